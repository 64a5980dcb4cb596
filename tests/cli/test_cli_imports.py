"""What ``import lkeval.cli`` loads: nothing a run needs only late, or only sometimes.

Every ``lkeval`` command imports the CLI, and a run's judge preflight and first agent wait for
it (the fork server preloads meanwhile), so what it imports is on the path to the first agent.
The GitHub client's httpx (with its command line's ``rich``, ``click`` and ``pygments``) is
needed only to publish, and genai-prices (with pydantic) only to price a usage; each is
imported where it is used.
"""

from __future__ import annotations

import json
import subprocess
import sys

import httpx

from lkeval.publish.github.api import GitHubApi, GitHubError

LATE = ("httpx", "rich", "click", "pygments", "genai_prices", "pydantic")


def _loaded_after(statement: str) -> dict[str, bool]:
    report = f"print(json.dumps({{m: m in sys.modules for m in {LATE!r}}}))"
    code = f"import json, sys; {statement}; {report}"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    loaded: dict[str, bool] = json.loads(out)
    return loaded


def test_importing_the_cli_loads_neither_httpx_nor_the_price_table() -> None:
    assert _loaded_after("import lkeval.cli") == dict.fromkeys(LATE, False)


def test_the_github_client_still_talks_and_fails_in_one_line() -> None:
    """httpx is imported inside the client's calls: a request goes out and a transport error
    is still a GitHubError (the ``except httpx...`` clauses see the module)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/down":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={"ok": True, "auth": request.headers["authorization"]})

    api = GitHubApi(
        "https://api.example.test", "ghp_cli_imports_token", transport=httpx.MockTransport(answer)
    )
    with api:
        assert api.request("GET", "/up").json() == {
            "ok": True,
            "auth": "Bearer ghp_cli_imports_token",
        }
        try:
            api.request("GET", "/down")
        except GitHubError as exc:
            assert "ConnectError" in str(exc) and exc.status is None
        else:
            raise AssertionError("a refused connection did not raise GitHubError")

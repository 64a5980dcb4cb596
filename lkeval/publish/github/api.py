"""A small GitHub REST client over httpx: timeouts, one retry, errors as one exception type.

Posting results is a courtesy, never the verdict: the callers turn every :class:`GitHubError`
into a ``::warning::`` and carry on, so this module's job is to fail fast and describe the
failure in one line (status, GitHub's own message), never to raise anything else.

Every request body is masked (with the process's one masker, which learns the token), and
the token only ever goes to the configured API origin (a ``Link`` header pointing elsewhere is
not followed).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from lkeval import __version__
from lkeval.text.masking import mask_results, register_secret

DEFAULT_TIMEOUT = 10.0
#: Overrides the timeout in seconds (a slow GitHub Enterprise Server, or fast tests).
TIMEOUT_ENV = "LKEVAL_GITHUB_TIMEOUT"
MAX_PAGES = 100


class GitHubError(Exception):
    """A GitHub call that did not succeed; ``status`` is None for timeouts and network errors."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def timeout_from_env(environ: Mapping[str, str] | None = None) -> float:
    """The client timeout: :data:`TIMEOUT_ENV` when set to a positive number, else 10 s."""
    raw = (os.environ if environ is None else environ).get(TIMEOUT_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


#: GitHub's token prefixes (github.blog, "Behind GitHub's new authentication token formats").
#: ``ghs_``: an installation token (server-to-server), which the workflow's GITHUB_TOKEN is;
#: the others act as a user.
INSTALLATION_PREFIXES = ("ghs_",)
USER_PREFIXES = ("ghp_", "github_pat_", "gho_", "ghu_")
TokenKind = Literal["installation", "user", "unknown", "none"]


def token_kind(token: str | None) -> TokenKind:
    """What a token is, by its prefix: an app installation's, a user's, or unknown (an older
    or GitHub Enterprise token without a prefix, or none at all)."""
    if not token:
        return "none"
    if token.startswith(INSTALLATION_PREFIXES):
        return "installation"
    if token.startswith(USER_PREFIXES):
        return "user"
    return "unknown"


class GitHubApi:
    """Synchronous GitHub REST calls against one API root (``GITHUB_API_URL``)."""

    def __init__(
        self,
        api_url: str,
        token: str | None,
        *,
        timeout: float | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": f"lk-eval/{__version__}",
        }
        #: What the token is, from its prefix (never the token itself): see :func:`token_kind`.
        self.token_kind = token_kind(token)
        if token:
            headers["Authorization"] = f"Bearer {token}"
            register_secret(token)
        self.timeout = timeout if timeout is not None else timeout_from_env()
        self._client = httpx.Client(
            headers=headers, timeout=self.timeout, transport=transport, follow_redirects=False
        )

    def __enter__(self) -> GitHubApi:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def url(self, path: str) -> str:
        """An absolute URL for an API path."""
        return path if path.startswith(("http://", "https://")) else self.api_url + path

    def request(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> httpx.Response:
        """One call, retried once on a 5xx or a failed connection; raises :class:`GitHubError`."""
        url = self.url(path)
        body = mask_results(json) if json is not None else None
        what = f"{method} {urlsplit(url).path}"
        for attempt in (1, 2):
            try:
                response = self._client.request(method, url, json=body, params=params)
            except httpx.TimeoutException:
                # Not retried: a POST that timed out may have landed, and a retry would post
                # the comment twice; a slow server is also likely to stay slow.
                raise GitHubError(f"{what}: no answer within {self.timeout:g}s") from None
            except httpx.TransportError as exc:
                if attempt == 1:
                    continue
                raise GitHubError(f"{what}: {type(exc).__name__}: {exc}") from None
            if response.status_code >= 500 and attempt == 1:
                continue
            if response.status_code >= 400:
                raise GitHubError(
                    f"{what}: {response.status_code} {_message(response)}", response.status_code
                )
            return response
        raise GitHubError(f"{what}: failed twice")  # unreachable: the loop returns or raises

    def paginate(self, path: str, params: dict[str, Any] | None = None) -> Iterator[Any]:
        """Every item of a list endpoint, following ``Link: rel="next"`` page by page."""
        url: str | None = path
        query = params
        origin = urlsplit(self.api_url)[:2]
        for _ in range(MAX_PAGES):
            if url is None:
                return
            response = self.request("GET", url, params=query)
            page = json_of(response)
            if not isinstance(page, list):
                raise GitHubError(f"GET {urlsplit(self.url(url)).path}: expected a list")
            yield from page
            url = response.links.get("next", {}).get("url")
            query = None  # the next link carries its own query
            absolute = url is not None and url.startswith(("http://", "https://"))
            if absolute and urlsplit(url)[:2] != origin:
                raise GitHubError(f"refusing to follow a next link off {self.api_url}")


def json_of(response: httpx.Response) -> Any:
    """The response's JSON; a body that is not JSON is a :class:`GitHubError` too."""
    try:
        return response.json()
    except ValueError:
        raise GitHubError(
            f"{response.request.method} {response.request.url.path}: answer is not JSON",
            response.status_code,
        ) from None


def _message(response: httpx.Response) -> str:
    """GitHub's own reason: its ``message`` and, for a 422, what each of its ``errors`` says.

    A 422 "Validation Failed" alone does not say what to fix; the ``errors`` list does
    (``body is too long (maximum is 65536 characters)``).
    """
    try:
        data = response.json()
    except ValueError:
        return response.reason_phrase or "error"
    if not isinstance(data, dict) or not isinstance(data.get("message"), str):
        return response.reason_phrase or "error"
    details = [_error_detail(e) for e in data.get("errors") or () if _error_detail(e)]
    message = str(data["message"])
    return f"{message}: {'; '.join(details)}" if details else message


def _error_detail(error: Any) -> str:
    """One entry of GitHub's ``errors``: its ``message``, else ``field code`` (``body missing``)."""
    if isinstance(error, str):
        return error
    if not isinstance(error, dict):
        return ""
    if isinstance(error.get("message"), str) and error["message"]:
        return str(error["message"])
    parts = [str(error[k]) for k in ("resource", "field", "code") if isinstance(error.get(k), str)]
    return " ".join(parts)

"""A small GitHub REST client over httpx: timeouts, one retry, errors as one exception type.

Posting results is a courtesy, never the verdict: the callers turn every :class:`GitHubError`
into a ``::warning::`` and carry on, so this module's job is to fail fast and describe the
failure in one line (status, GitHub's own message), never to raise anything else.

Every request body is masked (with the process's one masker, which learns the token), and
the token only ever goes to the configured API origin (a ``Link`` header pointing elsewhere is
not followed; a download's redirect to a storage host is fetched by a client that has no token).

Rate limits as GitHub answers them: the primary limit is a 403 (or 429) with
``x-ratelimit-remaining: 0`` and the reset time in ``x-ratelimit-reset``; a secondary limit is a
403 or 429 with ``retry-after`` seconds. A wait of up to :data:`MAX_RETRY_WAIT` seconds is
waited once; a longer one is a :class:`GitHubError` with ``rate_limited`` set, saying when.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urljoin, urlsplit

from lkeval import __version__
from lkeval.text.masking import mask_results, register_secret

DEFAULT_TIMEOUT = 10.0
#: Overrides the timeout in seconds (a slow GitHub Enterprise Server, or fast tests).
TIMEOUT_ENV = "LKEVAL_GITHUB_TIMEOUT"
MAX_PAGES = 100
#: The longest ``retry-after`` (seconds) waited once before a rate-limited call is given up.
MAX_RETRY_WAIT = 10.0
_REDIRECTS = (301, 302, 303, 307, 308)

if TYPE_CHECKING:
    import httpx
# httpx is imported where a call is made, not here: with its command line it brings ``rich``,
# ``click`` and ``pygments`` (~0.1 CPU-s), which a run that publishes nothing never needs and
# which would otherwise be imported before the first agent (``lkeval.cli`` imports this module).


class GitHubError(Exception):
    """A GitHub call that did not succeed; ``status`` is None for timeouts and network errors.

    ``rate_limited``: GitHub refused it for the rate limit (a 403 that is not a permission).
    """

    def __init__(self, message: str, status: int | None = None, rate_limited: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.rate_limited = rate_limited


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
        import httpx

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
        import httpx

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
            wait = rate_limit_wait(response)
            if wait is not None:
                if attempt == 1 and wait <= MAX_RETRY_WAIT:
                    time.sleep(wait)
                    continue
                raise GitHubError(
                    f"{what}: {response.status_code} {_message(response)} "
                    f"(rate limited: {_when(wait)})",
                    response.status_code,
                    rate_limited=True,
                )
            if response.status_code >= 400:
                raise GitHubError(
                    f"{what}: {response.status_code} {_message(response)}", response.status_code
                )
            return response
        raise GitHubError(f"{what}: failed twice")  # unreachable: the loop returns or raises

    def paginate(
        self, path: str, params: dict[str, Any] | None = None, key: str | None = None
    ) -> Iterator[Any]:
        """Every item of a list endpoint, following ``Link: rel="next"`` page by page.

        ``key``: the list is that member of each page's object (``{"total_count": n,
        "artifacts": [...]}``), as the Actions endpoints answer, instead of the page itself.
        """
        url: str | None = path
        query = params
        origin = urlsplit(self.api_url)[:2]
        for _ in range(MAX_PAGES):
            if url is None:
                return
            response = self.request("GET", url, params=query)
            page = json_of(response)
            if key is not None and isinstance(page, dict):
                page = page.get(key)
            if not isinstance(page, list):
                raise GitHubError(f"GET {urlsplit(self.url(url)).path}: expected a list")
            yield from page
            url = response.links.get("next", {}).get("url")
            query = None  # the next link carries its own query
            absolute = url is not None and url.startswith(("http://", "https://"))
            if absolute and urlsplit(url)[:2] != origin:
                raise GitHubError(f"refusing to follow a next link off {self.api_url}")

    def download(self, path: str, max_bytes: int) -> bytes:
        """The bytes behind an API download URL (an artifact's ``archive_download_url``).

        GitHub answers it with a 302 to a storage host whose URL carries its own short-lived
        signature; that host is fetched by a client with no ``Authorization`` header at all,
        whatever its name, so the token never leaves the API origin. Refused: a redirect from
        https to http, a second redirect, and more than ``max_bytes`` (counted as they arrive).
        """
        url = self.url(path)
        what = f"GET {urlsplit(url).path}"
        response = self._send_streamed(self._client, url, what)
        try:
            if response.status_code not in _REDIRECTS:
                return _bounded_body(response, what, max_bytes)
            location = response.headers.get("location")
        finally:
            response.close()
        if not location:
            raise GitHubError(f"{what}: {response.status_code} without a Location")
        target = urljoin(url, location)
        scheme = urlsplit(target).scheme
        if scheme not in ("http", "https") or (
            urlsplit(url).scheme == "https" and scheme != "https"
        ):
            raise GitHubError(f"{what}: refusing a redirect to a {scheme or 'relative'} URL")
        host = urlsplit(target).netloc
        import httpx

        with httpx.Client(
            headers={"User-Agent": f"lk-eval/{__version__}"},
            timeout=self.timeout,
            follow_redirects=False,
        ) as storage:
            fetched = self._send_streamed(storage, target, f"download from {host}")
            try:
                if fetched.status_code in _REDIRECTS:
                    raise GitHubError(f"download from {host}: a second redirect, not followed")
                return _bounded_body(fetched, f"download from {host}", max_bytes)
            finally:
                fetched.close()

    def _send_streamed(self, client: httpx.Client, url: str, what: str) -> httpx.Response:
        """One streamed GET (the body is read by the caller, within its limit)."""
        import httpx

        try:
            return client.send(client.build_request("GET", url), stream=True)
        except httpx.TimeoutException:
            raise GitHubError(f"{what}: no answer within {self.timeout:g}s") from None
        except httpx.TransportError as exc:
            raise GitHubError(f"{what}: {type(exc).__name__}: {exc}") from None


def _bounded_body(response: httpx.Response, what: str, max_bytes: int) -> bytes:
    """A streamed response's body, or :class:`GitHubError` for a status or a size over
    ``max_bytes`` (a declared ``Content-Length`` is refused before a byte is read)."""
    import httpx

    if response.status_code >= 400:
        response.read()
        limited = rate_limit_wait(response) is not None
        raise GitHubError(
            f"{what}: {response.status_code} {_message(response)}",
            response.status_code,
            rate_limited=limited,
        )
    if response.status_code != 200:
        raise GitHubError(f"{what}: unexpected {response.status_code}", response.status_code)
    declared = response.headers.get("content-length", "")
    too_large = f"{what}: larger than {max_bytes:,} bytes"
    if declared.isdigit() and int(declared) > max_bytes:
        raise GitHubError(too_large, 413)
    body = bytearray()
    try:
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > max_bytes:
                raise GitHubError(too_large, 413)
    except httpx.TimeoutException:
        raise GitHubError(f"{what}: the download stalled") from None
    except httpx.TransportError as exc:
        raise GitHubError(f"{what}: {type(exc).__name__}: {exc}") from None
    return bytes(body)


def rate_limit_wait(response: httpx.Response) -> float | None:
    """Seconds until GitHub takes calls again, when ``response`` is a rate-limit refusal
    (else None): ``retry-after``, or ``x-ratelimit-reset`` when ``x-ratelimit-remaining`` is 0."""
    if response.status_code not in (403, 429):
        return None
    retry_after = response.headers.get("retry-after", "").strip()
    if retry_after.isdigit():
        return float(retry_after)
    if response.headers.get("x-ratelimit-remaining", "").strip() == "0":
        reset = response.headers.get("x-ratelimit-reset", "").strip()
        return max(0.0, float(reset) - time.time()) if reset.isdigit() else 60.0
    if response.status_code == 429:
        return 60.0
    return None


def _when(wait: float) -> str:
    return f"retry in {wait:.0f}s" if wait < 120 else f"retry in {wait / 60:.0f} min"


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

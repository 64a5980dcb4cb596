"""A small, real GitHub REST server on 127.0.0.1 for the comment and context tests.

It keeps issue comments in memory and answers the calls lk-eval makes, the way GitHub does
(status codes, ``Link`` pagination honouring ``per_page``, JSON error ``message``), plus
switchable faults: 403 "Resource not accessible by integration" (a fork PR's token), 500, and
answers slower than the client's timeout.

Identities as GitHub has them: each token acts as someone. An installation token (``ghs_``:
the workflow's GITHUB_TOKEN, or a GitHub App's) posts as its app's bot, ``github-actions[bot]``
for GITHUB_TOKEN, and ``GET /user`` answers it 403 "Resource not accessible by integration";
a personal token posts as its user, whom ``GET /user`` names. Only a comment's author may edit
it (others get 403). A body over ``max_body`` characters is a 422 "Validation Failed" with
GitHub's ``errors`` list saying why.

Workflow runs and artifacts as GitHub serves them: ``GET /repos/{o}/{r}`` (the default
branch), the artifact lists (``/actions/artifacts?name=``, ``/actions/runs/{id}/artifacts``)
as ``{"total_count", "artifacts"}`` pages honouring ``per_page`` with ``Link`` headers, one run
(``/actions/runs/{id}``), the run list (``/actions/runs?branch=&status=``), and an artifact's
``archive_download_url`` answering 302 with a ``Location`` on a second loopback server, the
"blob" host, which refuses (and records in ``blob_leaks``) any request that carries an
``Authorization`` header: the token must never leave the API host. An expired artifact is
listed with ``expired: true`` and its download is 410; a token without ``actions: read`` gets
403 "Resource not accessible by integration" on every ``/actions/`` path; ``rate_limit``
answers those paths like GitHub's primary (403, ``x-ratelimit-remaining: 0``) or secondary
(429, ``retry-after``) limit.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from lkeval.testing.llm_server import QuietHTTPServer

MAX_BODY = 65_536

_LIST = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/(\d+)/comments$")
_ONE = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/comments/(\d+)$")
_PULLS = re.compile(r"^/repos/([^/]+)/([^/]+)/commits/([^/]+)/pulls$")
_REPO = re.compile(r"^/repos/([^/]+)/([^/]+)$")
_ARTIFACTS = re.compile(r"^/repos/([^/]+)/([^/]+)/actions/artifacts$")
_RUN = re.compile(r"^/repos/([^/]+)/([^/]+)/actions/runs/(\d+)$")
_RUNS = re.compile(r"^/repos/([^/]+)/([^/]+)/actions/runs$")
_RUN_ARTIFACTS = re.compile(r"^/repos/([^/]+)/([^/]+)/actions/runs/(\d+)/artifacts$")
_ZIP = re.compile(r"^/repos/([^/]+)/([^/]+)/actions/artifacts/(\d+)/zip$")
_BLOB = re.compile(r"^/blob/(\d+)\.zip$")
WORKFLOW = ".github/workflows/eval.yml"
REPO_ID = 4242
BOT = "github-actions[bot]"
#: GitHub's messages for the statuses a test can make every (matching) request answer.
FAULT_MESSAGES = {
    "401": "Bad credentials",
    "404": "Not Found",
    "500": "Server Error",
    "502": "Bad Gateway",
    "503": "Service Unavailable",
}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeGitHub:
    """State and behaviour of the fake; tests poke at it directly."""

    token: str = "ghs_faketoken123456"
    #: Who each token acts as, besides ``token`` (which is GITHUB_TOKEN: ``github-actions[bot]``).
    identities: dict[str, str] = field(default_factory=dict)
    max_body: int = MAX_BODY
    comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    pulls_by_sha: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    #: None, "slow" or a status GitHub answers with ("401", "403", "404", "500", "503");
    #: applies to methods in ``fault_methods`` (all when empty).
    fault: str | None = None
    fault_methods: tuple[str, ...] = ()
    #: When set, the fault applies only to requests for this path.
    fault_path: str | None = None
    slow_seconds: float = 1.0
    next_id: int = 1000
    base_url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    default_branch: str = "main"
    #: Workflow runs by id, and artifacts (newest last; listed newest first) with their zips.
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    zips: dict[int, bytes] = field(default_factory=dict)
    #: False: the token lacks ``actions: read`` (403 on every ``/actions/`` path).
    actions_read: bool = True
    #: None, "primary" (403, x-ratelimit-remaining: 0) or "secondary" (429, retry-after).
    rate_limit: str | None = None
    retry_after: str = "60"
    #: How many answers the rate limit lasts (then it is lifted); -1: for good.
    rate_limit_hits: int = -1
    #: The blob host: its URL, and every request that reached it with an Authorization header.
    blob_url: str = ""
    blob_requests: list[Request] = field(default_factory=list)
    blob_leaks: list[Request] = field(default_factory=list)
    #: Where the zip redirect points instead of the blob host (a test of a hostile Location).
    redirect_to: str | None = None

    def add_run(
        self,
        *,
        branch: str = "main",
        sha: str = "",
        conclusion: str | None = "success",
        event: str = "push",
        workflow: str = WORKFLOW,
        artifacts: dict[str, bytes] | None = None,
        expired: bool = False,
        head_repository_id: int = REPO_ID,
        repo: str = "octo/agent",
    ) -> dict[str, Any]:
        """A run on ``branch`` that uploaded ``artifacts`` (name -> zip bytes)."""
        self.next_id += 1
        run_id = self.next_id
        number = len(self.runs) + 1
        stamp = f"2026-11-{10 + number % 18:02d}T{number % 24:02d}:00:00Z"
        run = {
            "id": run_id,
            "run_number": number,
            "name": "Agent evals",
            "head_branch": branch,
            "head_sha": sha or f"{run_id:040x}",
            "path": workflow,
            "event": event,
            "status": "completed" if conclusion else "in_progress",
            "conclusion": conclusion,
            "workflow_id": 77,
            "html_url": f"https://github.example/{repo}/actions/runs/{run_id}",
            "created_at": stamp,
            "updated_at": stamp,
            "repository": {"id": REPO_ID, "full_name": repo},
            "head_repository": {"id": head_repository_id},
        }
        self.runs[run_id] = run
        for name, data in (artifacts or {}).items():
            self.next_id += 1
            self.artifacts.append(
                {
                    "id": self.next_id,
                    "node_id": f"MDg6QXJ0aWZhY3Q{self.next_id}",
                    "name": name,
                    "size_in_bytes": len(data),
                    "url": f"{self.base_url}/repos/{repo}/actions/artifacts/{self.next_id}",
                    "archive_download_url": (
                        f"{self.base_url}/repos/{repo}/actions/artifacts/{self.next_id}/zip"
                    ),
                    "expired": expired,
                    "created_at": stamp,
                    "updated_at": stamp,
                    "expires_at": "2026-12-31T00:00:00Z",
                    "digest": "sha256:" + "0" * 64,
                    "workflow_run": {
                        "id": run_id,
                        "repository_id": REPO_ID,
                        "head_repository_id": head_repository_id,
                        "head_branch": branch,
                        "head_sha": run["head_sha"],
                    },
                }
            )
            self.zips[self.next_id] = data
        return run

    def add_comments(
        self, repo: str, number: int, bodies: list[str], user: str = "someone"
    ) -> None:
        for body in bodies:
            self._create(repo, number, body, user=user)

    def identity(self, authorization: str | None) -> str | None:
        """The login a request's token acts as; None for an unknown token."""
        tokens = {self.token: BOT, **self.identities}
        for token, login in tokens.items():
            if authorization == f"Bearer {token}":
                return login
        return None

    def _create(self, repo: str, number: int, body: str, user: str) -> dict[str, Any]:
        self.next_id += 1
        comment = {
            "id": self.next_id,
            "body": body,
            "user": {"login": user, "type": "Bot" if user.endswith("[bot]") else "User"},
            "html_url": f"https://github.example/{repo}/pull/{number}#issuecomment-{self.next_id}",
        }
        self.comments.setdefault((repo, number), []).append(comment)
        return comment

    def comments_of(self, repo: str, number: int) -> list[dict[str, Any]]:
        return self.comments.get((repo, number), [])


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def _send(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        raw = b"" if data is None else json.dumps(data).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(raw)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def _handle(self, method: str) -> None:
        gh = self.server.github
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with gh.lock:
            gh.requests.append(
                Request(method, url.path, parse_qs(url.query), dict(self.headers.items()), body)
            )
            applies = (not gh.fault_methods or method in gh.fault_methods) and (
                gh.fault_path is None or url.path == gh.fault_path
            )
            fault = gh.fault if applies else None
        if fault == "slow":
            time.sleep(gh.slow_seconds)
        elif fault == "403":
            return self._send(
                403,
                {
                    "message": "Resource not accessible by integration",
                    "documentation_url": "https://docs.github.com/rest",
                },
            )
        elif fault in FAULT_MESSAGES:
            return self._send(int(fault), {"message": FAULT_MESSAGES[fault]})
        authorization = self.headers.get("Authorization")
        user = gh.identity(authorization)
        if user is None:
            return self._send(401, {"message": "Bad credentials"})
        with gh.lock:
            self._route(method, url.path, parse_qs(url.query), body, user, authorization or "")

    def _route(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
        user: str,
        authorization: str,
    ) -> None:
        gh = self.server.github
        if path == "/user" and method == "GET":
            if authorization.startswith("Bearer ghs_"):  # an installation token: no user
                return self._send(
                    403,
                    {
                        "message": "Resource not accessible by integration",
                        "documentation_url": (
                            "https://docs.github.com/rest/users/users#get-the-authenticated-user"
                        ),
                        "status": "403",
                    },
                )
            return self._send(200, {"login": user, "id": 1, "type": "User"})
        if m := _LIST.match(path):
            repo, number = f"{m[1]}/{m[2]}", int(m[3])
            if method == "GET":
                return self._list(repo, number, query)
            if method == "POST":
                if not self._valid_body(body):
                    return None
                return self._send(201, gh._create(repo, number, body["body"], user))
        if (m := _ONE.match(path)) and method == "PATCH":
            if not self._valid_body(body):
                return None
            for comments in gh.comments.values():
                for comment in comments:
                    if comment["id"] == int(m[3]):
                        if comment["user"]["login"] != user:
                            return self._send(
                                403, {"message": "Resource not accessible by integration"}
                            )
                        comment["body"] = body["body"]
                        return self._send(200, comment)
            return self._send(404, {"message": "Not Found"})
        if (m := _PULLS.match(path)) and method == "GET":
            return self._send(200, gh.pulls_by_sha.get(m[3], []))
        if method == "GET" and "/actions/" in path:
            return self._actions(path, query)
        if (m := _REPO.match(path)) and method == "GET":
            repo = f"{m[1]}/{m[2]}"
            return self._send(
                200, {"id": REPO_ID, "full_name": repo, "default_branch": gh.default_branch}
            )
        return self._send(404, {"message": "Not Found"})

    def _actions(self, path: str, query: dict[str, list[str]]) -> None:
        """The workflow-run and artifact endpoints (GitHub's answers, quirks included)."""
        gh = self.server.github
        if gh.rate_limit and gh.rate_limit_hits == 0:
            gh.rate_limit = None
        elif gh.rate_limit and gh.rate_limit_hits > 0:
            gh.rate_limit_hits -= 1
        if gh.rate_limit == "primary":
            return self._send(
                403,
                {"message": "API rate limit exceeded for installation ID 1."},
                {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 3600)},
            )
        if gh.rate_limit == "secondary":
            return self._send(
                429,
                {"message": "You have exceeded a secondary rate limit."},
                {"retry-after": gh.retry_after},
            )
        if not gh.actions_read:
            return self._send(403, {"message": "Resource not accessible by integration"})
        if m := _ARTIFACTS.match(path):
            name = query.get("name", [None])[0]
            found = [a for a in gh.artifacts if name is None or a["name"] == name]
            return self._page(path, query, "artifacts", found[::-1])
        if m := _RUN_ARTIFACTS.match(path):
            name = query.get("name", [None])[0]
            run_id = int(m[3])
            found = [
                a
                for a in gh.artifacts
                if a["workflow_run"]["id"] == run_id and (name is None or a["name"] == name)
            ]
            return self._page(path, query, "artifacts", found[::-1])
        if m := _RUN.match(path):
            run = gh.runs.get(int(m[3]))
            return self._send(200, run) if run else self._send(404, {"message": "Not Found"})
        if _RUNS.match(path):
            branch = query.get("branch", [None])[0]
            status = query.get("status", [None])[0]
            found = [
                r
                for r in gh.runs.values()
                if (branch is None or r["head_branch"] == branch)
                and (status is None or status in (r["status"], r["conclusion"]))
            ]
            return self._page(path, query, "workflow_runs", found[::-1])
        if m := _ZIP.match(path):
            artifact_id = int(m[3])
            artifact = next((a for a in gh.artifacts if a["id"] == artifact_id), None)
            if artifact is None:
                return self._send(404, {"message": "Not Found"})
            if artifact["expired"]:
                return self._send(410, {"message": "Artifact has expired"})
            target = gh.redirect_to or f"{gh.blob_url}/blob/{artifact_id}.zip?sig=s3cr3t-sas"
            return self._send(302, None, {"Location": target})
        return self._send(404, {"message": "Not Found"})

    def _page(
        self, path: str, query: dict[str, list[str]], key: str, items: list[dict[str, Any]]
    ) -> None:
        """One page of a ``{"total_count", key: [...]}`` list, with GitHub's ``Link`` header."""
        gh = self.server.github
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = int(query.get("page", ["1"])[0])
        last = max(1, -(-len(items) // per_page))
        keep = "".join(
            f"&{k}={v[0]}" for k, v in sorted(query.items()) if k not in ("page", "per_page")
        )
        base = f"{gh.base_url}{path}?per_page={per_page}{keep}"
        links = []
        if page < last:
            links.append(f'<{base}&page={page + 1}>; rel="next"')
            links.append(f'<{base}&page={last}>; rel="last"')
        data = {"total_count": len(items), key: items[(page - 1) * per_page : page * per_page]}
        return self._send(200, data, {"Link": ", ".join(links)} if links else None)

    def _valid_body(self, body: Any) -> bool:
        if not isinstance(body, dict) or not isinstance(body.get("body"), str):
            self._send(422, {"message": "Invalid request: body is required"})
            return False
        if len(body["body"]) > self.server.github.max_body:
            self._send(
                422,
                {
                    "message": "Validation Failed",
                    "errors": [
                        {
                            "resource": "IssueComment",
                            "code": "custom",
                            "field": "body",
                            "message": "body is too long (maximum is 65536 characters)",
                        }
                    ],
                    "documentation_url": (
                        "https://docs.github.com/rest/issues/comments#create-an-issue-comment"
                    ),
                    "status": "422",
                },
            )
            return False
        return True

    def _list(self, repo: str, number: int, query: dict[str, list[str]]) -> None:
        gh = self.server.github
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = int(query.get("page", ["1"])[0])
        comments = gh.comments_of(repo, number)
        last = max(1, -(-len(comments) // per_page))
        chunk = comments[(page - 1) * per_page : page * per_page]
        base = f"{gh.base_url}/repos/{repo}/issues/{number}/comments"
        links = []
        if page < last:
            links.append(f'<{base}?per_page={per_page}&page={page + 1}>; rel="next"')
            links.append(f'<{base}?per_page={per_page}&page={last}>; rel="last"')
        if page > 1:
            links.append(f'<{base}?per_page={per_page}&page=1>; rel="first"')
        return self._send(200, chunk, {"Link": ", ".join(links)} if links else None)


class _BlobHandler(BaseHTTPRequestHandler):
    """The storage host an artifact download is redirected to: no token may ever reach it."""

    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        gh = self.server.github
        url = urlsplit(self.path)
        request = Request("GET", url.path, parse_qs(url.query), dict(self.headers.items()), None)
        with gh.lock:
            gh.blob_requests.append(request)
            leaked = any(k.lower() == "authorization" for k in request.headers)
            if leaked:
                gh.blob_leaks.append(request)
            m = _BLOB.match(url.path)
            data = gh.zips.get(int(m[1])) if m else None
        if leaked:
            status, data = 400, b"<Error><Code>InvalidAuthenticationInfo</Code></Error>"
        elif data is None or parse_qs(url.query).get("sig") != ["s3cr3t-sas"]:
            status, data = 403, b"<Error><Code>AuthenticationFailed</Code></Error>"
        else:
            status = 200
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/zip" if status == 200 else "text/xml")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading (a download over its size limit)


class _Server(QuietHTTPServer):
    """Quiet when a client resets (a cancelled upload, a timed-out request), as GitHub is."""

    github: FakeGitHub


def _serve(handler: type[BaseHTTPRequestHandler], github: FakeGitHub) -> _Server:
    server = _Server(("127.0.0.1", 0), handler)
    server.github = github
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


@contextmanager
def github_server() -> Iterator[FakeGitHub]:
    """Run the fake on a free loopback port, and its blob host on another; yields its state
    with ``base_url`` and ``blob_url`` set."""
    github = FakeGitHub()
    servers = [_serve(_Handler, github), _serve(_BlobHandler, github)]
    github.base_url = f"http://127.0.0.1:{servers[0].server_address[1]}"
    github.blob_url = f"http://127.0.0.1:{servers[1].server_address[1]}"
    try:
        yield github
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()

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
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MAX_BODY = 65_536

_LIST = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/(\d+)/comments$")
_ONE = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/comments/(\d+)$")
_PULLS = re.compile(r"^/repos/([^/]+)/([^/]+)/commits/([^/]+)/pulls$")
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
        raw = json.dumps(data).encode()
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
        return self._send(404, {"message": "Not Found"})

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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    github: FakeGitHub


@contextmanager
def github_server() -> Iterator[FakeGitHub]:
    """Run the fake on a free loopback port; yields its state with ``base_url`` set."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.github = FakeGitHub()
    server.github.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.github
    finally:
        server.shutdown()
        server.server_close()

"""The fork server's prebuilt TLS context: handed to one HTTPX client only, and only where the
library would have built the very same context; it verifies a real TLS server exactly as the
library's own. Each test runs with httpx and with httpx2 (the OpenAI SDK 3's HTTPX).

The server is a real HTTPS server on 127.0.0.1 whose certificate a throwaway CA issued for this
test module (trustme: no key is kept in the repository): refused by the default trust, accepted
when ``SSL_CERT_FILE`` names the CA.
"""

from __future__ import annotations

import http.server
import importlib
import os
import shutil
import ssl
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import certifi
import httpcore2
import httpx
import httpx2
import pytest
import trustme

from lkeval.host import fork_server, tls_context

LIBRARIES = {library.name: library for library in tls_context.LIBRARIES}


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Trust(NamedTuple):
    """The test's own certificate authority: its PEM file, in a directory of its own."""

    dir: Path
    ca: Path
    authority: trustme.CA


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Trust:
    authority = trustme.CA()
    directory = tmp_path_factory.mktemp("tls")
    ca = directory / "ca.pem"
    authority.cert_pem.write_to_path(str(ca))
    return Trust(directory, ca, authority)


@pytest.fixture(scope="module")
def https_url(tls: Trust) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.authority.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def own_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts from the libraries' own functions, a default trust environment, and
    nothing prebuilt; what a test installs is undone."""
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE"):
        monkeypatch.delenv(name, raising=False)
    holders = [sys.modules[n] for library in LIBRARIES.values() for n in library.holders]
    original = [holder.create_ssl_context for holder in holders]
    yield
    for holder, function in zip(holders, original, strict=True):
        holder.create_ssl_context = function
    tls_context._prebuilt.clear()


@pytest.fixture(params=sorted(LIBRARIES))
def lib(request: pytest.FixtureRequest) -> Any:
    """The library under test (its module); prepared as the fork server prepares it."""
    return importlib.import_module(request.param)


def _context(client: Any) -> ssl.SSLContext:
    context: ssl.SSLContext = client._transport._pool._ssl_context
    return context


def _accepts(client: Any, url: str) -> bool:
    """True when the client talks to the server; False when it refuses its certificate."""
    try:
        with client:
            return bool(client.get(url).text == "hello")
    except (httpx.ConnectError, httpx2.ConnectError) as exc:
        assert "CERTIFICATE_VERIFY_FAILED" in str(exc)
        return False


def _prepare(lib: Any) -> ssl.SSLContext:
    assert lib.__name__ in tls_context.prepare()
    return _prebuilt(lib)


def _prebuilt(lib: Any) -> ssl.SSLContext:
    return tls_context._prebuilt[lib.__name__][1]


@pytest.mark.parametrize("name", sorted(LIBRARIES))
def test_the_installed_libraries_are_ones_whose_context_was_read(name: str) -> None:
    # fails when one changes: read its create_ssl_context again, then add its digest
    library = LIBRARIES[name]
    assert tls_context.fingerprint(library) in library.verified.values()


def test_the_first_default_client_gets_it_and_no_other_client_does(
    lib: Any, https_url: str
) -> None:
    prebuilt = _prepare(lib)
    first, second = lib.Client(), lib.AsyncClient()
    assert _context(first) is prebuilt
    assert _context(second) is not prebuilt
    assert lib.__name__ not in tls_context._prebuilt
    assert not _accepts(first, https_url)  # it verifies as the library's own default does


def test_a_client_that_changes_its_context_changes_no_other(lib: Any, https_url: str) -> None:
    _prepare(lib)
    careless = lib.Client()
    context = _context(careless)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    assert _accepts(careless, https_url)
    assert not _accepts(lib.Client(), https_url)


def test_an_agent_whose_environment_names_its_certificates_builds_its_own(
    lib: Any, https_url: str, tls: Trust, monkeypatch: pytest.MonkeyPatch
) -> None:
    prebuilt = _prepare(lib)
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca))
    client = lib.Client()
    assert _context(client) is not prebuilt
    assert _accepts(client, https_url)
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_DIR", str(tls.dir))
    assert _context(lib.Client()) is not prebuilt
    monkeypatch.delenv("SSL_CERT_DIR")
    assert _context(lib.Client()) is prebuilt  # still there for the call it was built for


def test_a_context_prebuilt_for_other_certificates_never_reaches_a_default_client(
    lib: Any, https_url: str, tls: Trust, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the fork server trusted the test's CA; an agent whose environment does not must
    # not be handed that trust (a broken set-up would pass)
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.ca))
    prebuilt = _prepare(lib)
    assert _accepts(lib.Client(trust_env=True, verify=prebuilt), https_url)
    monkeypatch.delenv("SSL_CERT_FILE")
    assert not _accepts(lib.Client(), https_url)
    assert not _accepts(lib.Client(trust_env=False), https_url)
    assert lib.__name__ in tls_context._prebuilt  # never handed out


def test_a_ca_file_changed_on_disk_is_read_again(
    lib: Any, https_url: str, tls: Trust, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "ca.pem"
    shutil.copy(certifi.where(), bundle)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    prebuilt = _prepare(lib)
    shutil.copy(tls.ca, bundle)
    client = lib.Client()
    assert _context(client) is not prebuilt
    assert _accepts(client, https_url)


def test_a_key_log_or_other_arguments_take_the_library_own_path(
    lib: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keylog = tmp_path / "keys.log"
    monkeypatch.setenv("SSLKEYLOGFILE", str(keylog))
    assert tls_context.prepare() == []  # never prebuilt with a key log
    monkeypatch.delenv("SSLKEYLOGFILE")
    prebuilt = _prepare(lib)
    monkeypatch.setenv("SSLKEYLOGFILE", str(keylog))
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())  # where both libraries log keys
    logging = _context(lib.Client())
    assert logging is not prebuilt and logging.keylog_filename == str(keylog)
    monkeypatch.delenv("SSLKEYLOGFILE")
    monkeypatch.delenv("SSL_CERT_FILE")
    assert _context(lib.Client(verify=False)) is not prebuilt
    own = ssl.create_default_context()
    assert _context(lib.Client(verify=own)) is own
    assert _context(lib.Client(trust_env=False)) is not prebuilt
    assert _context(lib.Client()) is prebuilt


def test_an_unverified_library_is_left_alone(lib: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    library = LIBRARIES[lib.__name__]
    own = sys.modules[library.sources[0]].create_ssl_context
    unverified = library._replace(verified={})
    others = tuple(each for each in tls_context.LIBRARIES if each is not library)
    monkeypatch.setattr(tls_context, "LIBRARIES", (*others, unverified))
    assert lib.__name__ not in tls_context.prepare()
    assert [sys.modules[n].create_ssl_context for n in library.holders] == [own] * 3
    assert lib.__name__ not in tls_context._prebuilt
    # a create_ssl_context something else replaced is not the verified one either
    monkeypatch.setattr(lib._transports.default, "create_ssl_context", lambda **_: None)
    assert tls_context.fingerprint(library) is None


def test_an_httpcore2_default_context_something_replaced_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(httpcore2, "default_ssl_context", lambda **_: None)
    assert tls_context.fingerprint(LIBRARIES["httpx2"]) is None
    assert "httpx2" not in tls_context.prepare()


def test_without_the_library_imported_it_imports_nothing(
    lib: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an agent's venv without it: the fork server's preload never imported it
    library = LIBRARIES[lib.__name__]
    monkeypatch.delitem(sys.modules, library.sources[-1])
    assert tls_context.fingerprint(library) is None
    assert lib.__name__ not in tls_context.prepare()
    assert library.sources[-1] not in sys.modules


def test_the_fork_server_prepares_it_and_a_forked_child_gets_it(lib: Any) -> None:
    dict(fork_server.WARM_CALLS)["httpx tls context"]()
    prebuilt = _prebuilt(lib)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first default client holds the parent's context
        os.write(write, b"1" if _context(lib.AsyncClient()) is prebuilt else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0
    assert lib.__name__ in tls_context._prebuilt  # the parent's own stays unused


def test_a_context_that_cannot_be_built_is_left_to_each_agent(
    lib: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken.pem"
    broken.write_text("not a certificate\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(broken))
    assert lib.__name__ not in tls_context.prepare()
    assert lib.__name__ not in tls_context._prebuilt
    with pytest.raises(ssl.SSLError):  # the agent's own client fails as it did before
        lib.Client()

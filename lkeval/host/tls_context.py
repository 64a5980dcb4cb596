"""The default TLS context of an agent's first HTTPX client, built in the fork server, not in
each forked agent.

Runs in the fork server (loaded by ``fork_server.py`` by file path, so it imports nothing from
lk-eval). Why: the example agent's ``openai.LLM()`` builds an ``httpx2.AsyncClient`` (the HTTPX
fork the OpenAI SDK 3 uses; plain ``httpx`` clients work the same way), whose transport calls
``create_ssl_context()`` of the library's ``_config`` module; with the default arguments that
parses a whole CA bundle (``load_verify_locations``), ~30-50 ms of each forked agent's CPU
(``BENCHMARKS.md``).

:func:`prepare` builds that context once in the fork server, before it forks, with the
library's own function, and wraps ``create_ssl_context``. In a forked agent the wrapper hands
the prebuilt context to the **first** call that would have built the very same one, and only
to that call: every other call runs the library's own function. So no two clients of an agent
ever share a context (a client that changes its context changes only its own, as without this
module), and the one handed out is what the library would have built in that call, only built
earlier, in the parent. "The very same one" means the default arguments (``verify=True``, no
``cert``) and the same inputs, at call time, as when it was built (:func:`trust_inputs`):
whether ``trust_env`` is on, the ``SSL_CERT_FILE``/``SSL_CERT_DIR`` the library reads, and
each CA file or directory it may load (the same path and the same file on disk: device, inode,
size, modification time). With ``SSLKEYLOGFILE`` set (a context that may log TLS keys) nothing
is prebuilt nor handed out. An agent whose scenario environment names other certificates
builds its own, exactly as a cold agent does.

It is pinned to the source it replaces (:data:`LIBRARIES`: digests of the files that build the
context, as read in httpx 0.28.1 and in httpx2 2.16.2 with httpcore2 2.16.2): with any other
files, with the library not imported by the preload (this module never imports it: another
interpreter's venv without it), or with a ``create_ssl_context`` something else replaced, it
installs nothing and the library's own path runs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import ssl
import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple


class Library(NamedTuple):
    """One HTTP library whose default TLS context can be prebuilt."""

    name: str
    #: The modules whose source builds the default context; the first defines
    #: ``create_ssl_context``.
    sources: tuple[str, ...]
    #: Digests of those sources, as read (release -> digest; only the digests are compared).
    verified: dict[str, str]
    #: The modules that hold ``create_ssl_context`` under that name (where it is defined,
    #: where the transports call it, the package's public name).
    holders: tuple[str, ...]
    #: The CA files and directories the default context may load besides the environment's.
    ca_paths: Callable[[], list[str]]


def _certifi_bundle() -> list[str]:
    import certifi

    return [certifi.where()]


def _openssl_paths() -> list[str]:
    # httpcore2's default: OpenSSL's compiled-in paths, then truststore's Linux candidates
    paths = ssl.get_default_verify_paths()
    candidates = list(getattr(sys.modules.get("httpcore2._ssl"), "CA_FILE_CANDIDATES", []))
    return [paths.openssl_cafile, paths.openssl_capath, *candidates]


LIBRARIES = (
    Library(
        "httpx",
        ("httpx._config",),
        {"0.28.1": "a4fa7653ec2271f7"},
        ("httpx._config", "httpx._transports.default", "httpx"),
        _certifi_bundle,
    ),
    Library(
        "httpx2",
        ("httpx2._config", "httpcore2._ssl"),
        {"2.16.2": "45bd9d98786a1753"},
        ("httpx2._config", "httpx2._transports.default", "httpx2"),
        _openssl_paths,
    ),
)
#: The environment the default contexts read (``SSLKEYLOGFILE``: ``ssl.create_default_context``).
TRUST_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR")

#: What the fork server built, per library: (the inputs it was built from, the context).
_prebuilt: dict[str, tuple[tuple[Any, ...], ssl.SSLContext]] = {}
#: Taken to hand a context out: two threads that ask at once cannot both get it.
_handing_out = threading.Lock()


def fingerprint(library: Library) -> str | None:
    """A digest of the library's sources, or None when they were not imported (this module
    never imports them) or cannot be read, or a holder's ``create_ssl_context`` (or httpcore2's
    ``default_ssl_context``) is no longer the one those files define."""
    modules = [sys.modules[name] for name in library.sources if name in sys.modules]
    if len(modules) != len(library.sources):
        return None
    digest = hashlib.sha256()
    try:
        for module in modules:
            with open(str(module.__file__), "rb") as source:
                digest.update(source.read())
        config = modules[0]
        create = config.create_ssl_context
        if create.__code__.co_filename != config.__file__:
            return None
        for name in library.holders:
            holder = sys.modules.get(name)
            if holder is not None and getattr(holder, "create_ssl_context", None) is not create:
                return None
        if library.name == "httpx2":  # its create_ssl_context calls httpcore2's, by attribute
            core = sys.modules.get("httpcore2")
            if getattr(core, "default_ssl_context", None) is not modules[1].default_ssl_context:
                return None
    except (AttributeError, OSError, TypeError):
        return None
    return digest.hexdigest()[:16]


def _on_disk(path: str | None) -> tuple[Any, ...] | None:
    if not path:
        return None
    try:
        stat = os.stat(path)
    except (OSError, ValueError):
        return (path,)
    return (path, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def trust_inputs(library: Library, trust_env: object = True) -> tuple[Any, ...] | None:
    """Everything the library's default context is built from at this moment, or None when it
    must not be prebuilt or handed out (a TLS key log is asked for, or the paths cannot be
    told)."""
    if os.environ.get("SSLKEYLOGFILE"):
        return None
    environment = tuple(os.environ.get(name) for name in TRUST_ENV) if trust_env else ()
    try:
        paths = [*(p for p in environment if p), *library.ca_paths()]
    except Exception:
        return None
    return (bool(trust_env), environment, tuple(_on_disk(path) for path in paths))


def note() -> str:
    """Whether a context was prebuilt in this process (or the fork server it was forked from),
    and for which libraries, as the run's start prints it."""
    if _prepared:
        return f"on (prebuilt for {', '.join(_prepared)}; pinned by file digests)"
    return "off (no HTTPX library whose files were verified, or a TLS key log asked for)"


#: The libraries :func:`prepare` prebuilt a context for (inherited by the forked agents).
_prepared: list[str] = []


def prepare() -> list[str]:
    """For each verified library the preload imported: build its default context and wrap its
    ``create_ssl_context``. Returns the libraries prepared. Called by the fork server after its
    preload, before it forks."""
    prepared = []
    for library in LIBRARIES:
        if fingerprint(library) not in library.verified.values():
            continue
        inputs = trust_inputs(library)
        if inputs is None:
            continue
        config = sys.modules[library.sources[0]]
        original = config.create_ssl_context
        try:
            _prebuilt[library.name] = (inputs, original())
        except Exception:  # each child meets the same error on the library's own path
            continue
        wrapper = handing_out_once(library, original)
        for name in library.holders:
            holder = sys.modules.get(name)
            if holder is not None:
                setattr(holder, "create_ssl_context", wrapper)  # noqa: B010 (a module)
        prepared.append(library.name)
    _prepared[:] = prepared
    return prepared


def handing_out_once(library: Library, create: Callable[..., Any]) -> Callable[..., Any]:
    """``create`` (the library's ``create_ssl_context``), except that the first call that would
    build the prebuilt context gets it instead."""

    @functools.wraps(create)
    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: Any = True) -> Any:
        if library.name in _prebuilt and verify is True and cert is None:
            inputs = trust_inputs(library, trust_env)
            with _handing_out:
                built = _prebuilt.get(library.name)
                if built is not None and inputs == built[0]:
                    del _prebuilt[library.name]  # one client only: nothing reaches another
                    return built[1]
        return create(verify=verify, cert=cert, trust_env=trust_env)

    return create_ssl_context


if __name__ == "__main__":  # print each library's fingerprint (for LIBRARIES' verified)
    import httpcore2  # noqa: F401
    import httpx  # noqa: F401
    import httpx2  # noqa: F401

    for each in LIBRARIES:
        print(each.name, fingerprint(each), file=sys.stdout)

"""Responses served from a record, as aiohttp's and requests' callers read them.

Standard library only, like its siblings :mod:`lkeval.host.tape` and
:mod:`lkeval.host.transports`, which loads it by path in the agent's interpreter. aiohttp
and requests responses are read whole by the transports and handed back from the record, in
record mode too, so a tool sees the same object whether its call was live or replayed: the
status, the headers the cassette keeps, and the body however the caller asks for it.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from typing import Any


class AiohttpResponse:
    """What an aiohttp caller reads of a response, served from a recorded one (in record mode
    too, so a tool sees the same object either way): status, headers, the body by ``read``,
    ``text``, ``json`` or the ``content`` stream, ``raise_for_status``, and the context manager."""

    def __init__(
        self, aiohttp: Any, method: str, url: Any, response: dict[str, Any], chunks: list[bytes]
    ) -> None:
        from multidict import CIMultiDict, CIMultiDictProxy

        self._aiohttp = aiohttp
        self.method = method.upper()
        self.url = self.real_url = url
        self.status = int(response.get("status", 200))
        self.reason = REASONS.get(self.status, "")
        self.headers = CIMultiDictProxy(CIMultiDict(response.get("headers", {})))
        self._chunks = chunks
        self._body = b"".join(self._chunks)
        self.history: tuple[Any, ...] = ()
        self.closed = True
        self.connection = None
        self.request_info = aiohttp.RequestInfo(
            url, self.method, CIMultiDictProxy(CIMultiDict()), url
        )
        self._content: Any = None

    @property
    def ok(self) -> bool:
        return self.status < 400

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "application/octet-stream").split(";")[0].strip()

    @property
    def charset(self) -> str | None:
        match = re.search(r"charset=([\w-]+)", self.headers.get("content-type", ""))
        return match.group(1) if match else None

    @property
    def content_length(self) -> int:
        return len(self._body)

    @property
    def content(self) -> Any:
        if self._content is None:
            import asyncio

            reader = self._aiohttp.StreamReader(
                _NoProtocol(), 2**30, loop=asyncio.get_running_loop()
            )
            for chunk in self._chunks:
                reader.feed_data(chunk)
            reader.feed_eof()
            self._content = reader
        return self._content

    async def read(self) -> bytes:
        return self._body

    async def text(self, encoding: str | None = None, errors: str = "strict") -> str:
        return self._body.decode(encoding or self.charset or "utf-8", errors)

    async def json(self, *, loads: Callable[[str], Any] = json.loads, **_: Any) -> Any:
        text = self._body.decode(self.charset or "utf-8").strip()
        return loads(text) if text else None

    def get_encoding(self) -> str:
        return self.charset or "utf-8"

    def raise_for_status(self) -> None:
        if self.status >= 400:
            raise self._aiohttp.ClientResponseError(
                self.request_info,
                self.history,
                status=self.status,
                message=self.reason,
                headers=self.headers,
            )

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass

    async def wait_for_close(self) -> None:
        pass

    async def __aenter__(self) -> AiohttpResponse:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass


class _NoProtocol:
    """The protocol a fed ``StreamReader`` asks to pause and resume: nothing to pause."""

    _reading_paused = False

    def pause_reading(self, *args: Any, **kwargs: Any) -> None:
        pass

    def resume_reading(self, *args: Any, **kwargs: Any) -> None:
        pass


REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 404: "Not Found"}


def requests_response(request: Any, response: dict[str, Any], chunks: list[bytes]) -> Any:
    """A ``requests.Response`` from a recorded one (in record mode too, as for aiohttp)."""
    import requests
    from requests.structures import CaseInsensitiveDict
    from requests.utils import get_encoding_from_headers

    out = requests.Response()
    out.status_code = int(response.get("status", 200))
    out.headers = CaseInsensitiveDict(response.get("headers", {}))
    out._content = b"".join(chunks)
    out._content_consumed = True
    out.raw = io.BytesIO(out._content)
    out.url = request.url
    out.request = request
    out.reason = REASONS.get(out.status_code, "")
    out.encoding = get_encoding_from_headers(out.headers)
    return out


__all__ = ["REASONS", "AiohttpResponse", "requests_response"]

"""A LiveKit-Inference-compatible speech server on 127.0.0.1: audio evals without speech keys.

An agent written for production (``inference.STT("deepgram/nova-3")``,
``inference.TTS("cartesia/sonic-3")``, or the openai plugin's STT/TTS) runs unmodified against
it: its ``LIVEKIT_INFERENCE_URL`` (or ``OPENAI_BASE_URL``) points at :meth:`SpeechServer.url_for`
(or :meth:`~SpeechServer.openai_url_for`), a per-attempt prefix, so concurrent agents are told
apart. Under that prefix it serves:

* ``/stt`` and ``/tts`` WebSockets (:mod:`lkeval.testing.speech_sockets`);
* ``POST /audio/speech`` and ``POST /audio/transcriptions`` (OpenAI's API);
* ``/eot`` answers 404, so the turn detector uses its local model (``livekit-agents`` falls
  back to ``turn-detector-v1-mini`` when the gateway refuses);
* anything else (``/chat/completions``, ``/models``, …) is forwarded to the upstream configured
  for that prefix with the request's headers unchanged: the agent's LLM calls still reach its
  provider with its own credentials.

Speech is espeak-ng's; recognition is the oracle (:meth:`expect_line`) or pocketsphinx (see
:mod:`lkeval.testing.speech_stt`). A process outside can drive the oracle over HTTP:
``POST /_control/<key>/expect {"text": ...}`` and ``GET /_control/<key>/heard``.

From a shell: ``python -m lkeval.testing.speech_server --upstream URL`` prints ``PORT n``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections import defaultdict

import aiohttp
from aiohttp import web

from lkeval.audio.espeak import espeak_pcm
from lkeval.audio.pcm import pcm_to_wav, wav_to_pcm
from lkeval.errors import ConfigError
from lkeval.testing.speech_sockets import SttSession, serve_tts
from lkeval.testing.speech_stt import AttemptSpeech, SttEngine, recognizer_factory

__all__ = ["SpeechServer", "main"]

HOST = "127.0.0.1"
OPENAI_TTS_RATE = 24_000
_KEY = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
#: Hop-by-hop headers (RFC 9110 §7.6.1) and those the forwarder recomputes.
_HOP = frozenset(
    {"host", "connection", "keep-alive", "transfer-encoding", "upgrade", "content-length", "te"}
)


class SpeechServer:
    """The server; ``await start()`` inside the running event loop, ``await stop()`` after."""

    def __init__(
        self,
        upstream: str | None = None,
        *,
        openai_upstream: str | None = None,
        stt: SttEngine = "oracle",
        voice: str = "en-us",
    ) -> None:
        if stt not in ("oracle", "pocketsphinx"):
            raise ConfigError(f"speech server: unknown STT {stt!r} (oracle or pocketsphinx)")
        if stt == "pocketsphinx":
            try:
                import pocketsphinx  # noqa: F401
            except ImportError:
                raise ConfigError(
                    "speech server: pocketsphinx is not installed (pip install 'lk-eval[speech]')"
                ) from None
        self._upstreams = {"a": upstream, "o": openai_upstream}
        self.stt, self.voice = stt, voice
        self._speech: defaultdict[str, AttemptSpeech] = defaultdict(AttemptSpeech)
        self._runner: web.AppRunner | None = None
        self._client: aiohttp.ClientSession | None = None
        self._port = 0

    async def start(self) -> None:
        """Listen on 127.0.0.1 on a free port."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", r"/_control/{key}/{action}", self._control)
        app.router.add_route("*", r"/{kind:[ao]}/{key}/v1/{tail:.*}", self._prefixed)
        app.router.add_route("*", r"/{tail:.*}", self._unprefixed)
        self._client = aiohttp.ClientSession(auto_decompress=False)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        """Close the listener, open sockets and the forwarding client."""
        if self._runner is not None:
            await self._runner.cleanup()
        if self._client is not None:
            await self._client.close()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``; without a prefix the attempt key is ``""``."""
        return f"http://{HOST}:{self._port}"

    def url_for(self, attempt_key: str) -> str:
        """The agent's ``LIVEKIT_INFERENCE_URL`` for one attempt (forwards to ``upstream``)."""
        return f"{self.base_url}/a/{_checked(attempt_key)}/v1"

    def openai_url_for(self, attempt_key: str) -> str:
        """The agent's ``OPENAI_BASE_URL`` for one attempt (forwards to ``openai_upstream``)."""
        return f"{self.base_url}/o/{_checked(attempt_key)}/v1"

    def expect_line(self, attempt_key: str, text: str) -> None:
        """Tell the oracle the next thing this attempt's caller says (call before it speaks)."""
        self._speech[_checked(attempt_key)].expected.append(text)

    def pending(self, attempt_key: str) -> list[str]:
        """Lines announced to the oracle and not yet sent as a transcript, oldest first.

        A line still pending when the caller's next line is about to be announced was never
        heard as an utterance (its audio did not reach the agent's STT, or ran into the next):
        :meth:`clear_expected` then keeps the oracle from handing it to the next utterance.
        """
        return list(self._speech[_checked(attempt_key)].expected)

    def clear_expected(self, attempt_key: str) -> list[str]:
        """Forget the pending lines (returned, oldest first)."""
        expected = self._speech[_checked(attempt_key)].expected
        dropped = list(expected)
        expected.clear()
        return dropped

    def heard(self, attempt_key: str) -> list[str]:
        """The final transcripts this attempt's agent was sent, in order."""
        return list(self._speech[_checked(attempt_key)].heard)

    def spoken(self, attempt_key: str) -> list[str]:
        """The sentences this attempt's agent had synthesized, in order."""
        return list(self._speech[_checked(attempt_key)].spoken)

    async def _control(self, request: web.Request) -> web.StreamResponse:
        key, action = request.match_info["key"], request.match_info["action"]
        if not _KEY.match(key):
            return web.json_response({"error": "bad attempt key"}, status=400)
        if action == "expect" and request.method == "POST":
            body = await request.json()
            self.expect_line(key, str(body.get("text", "")))
            return web.json_response({"queued": len(self._speech[key].expected)})
        if action == "heard" and request.method == "GET":
            return web.json_response({"heard": self.heard(key), "spoken": self.spoken(key)})
        return web.json_response({"error": "unknown control"}, status=404)

    async def _prefixed(self, request: web.Request) -> web.StreamResponse:
        info = request.match_info
        if not _KEY.match(info["key"]):
            return web.json_response({"error": "bad attempt key"}, status=400)
        return await self._serve(request, info["key"], info["tail"], self._upstreams[info["kind"]])

    async def _unprefixed(self, request: web.Request) -> web.StreamResponse:
        tail = request.match_info["tail"]
        return await self._serve(request, "", tail, self._upstreams["a"])

    async def _serve(
        self, request: web.Request, key: str, tail: str, upstream: str | None
    ) -> web.StreamResponse:
        speech = self._speech[key]
        route = tail.strip("/")
        if route == "stt" and request.method == "GET":
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            await SttSession(ws, speech, recognizer_factory(self.stt, speech)).serve()
            return ws
        if route == "tts" and request.method == "GET":
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            await serve_tts(ws, speech, self.voice)
            return ws
        if route == "eot":
            return web.json_response({"error": "no turn detector here"}, status=404)
        if route == "audio/speech" and request.method == "POST":
            return await self._openai_speech(request, speech)
        if route == "audio/transcriptions" and request.method == "POST":
            return await self._openai_transcription(request, speech)
        return await self._forward(request, tail, upstream)

    async def _openai_speech(self, request: web.Request, speech: AttemptSpeech) -> web.Response:
        body = await request.json()
        text = str(body.get("input", ""))
        speech.spoken.append(text.strip())
        pcm = await espeak_pcm(text, self.voice, OPENAI_TTS_RATE)
        if body.get("response_format") == "pcm":
            return web.Response(body=pcm, content_type="audio/pcm")
        # Any other format is answered as WAV, declared in Content-Type (the plugin decodes it).
        return web.Response(body=pcm_to_wav(pcm, OPENAI_TTS_RATE), content_type="audio/wav")

    async def _openai_transcription(
        self, request: web.Request, speech: AttemptSpeech
    ) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        audio = upload.file.read() if isinstance(upload, web.FileField) else b""
        recognizer = recognizer_factory(self.stt, speech)()
        pcm = await asyncio.to_thread(wav_to_pcm, audio, 16000) if audio else b""
        await asyncio.to_thread(recognizer.feed, pcm, 16000)
        text = await asyncio.to_thread(recognizer.finish)
        if text:
            speech.heard.append(text)
        if form.get("response_format") == "text":
            return web.Response(text=text, content_type="text/plain")
        extra = {"language": "english", "duration": len(pcm) / 32000, "segments": []}
        verbose = form.get("response_format") == "verbose_json"
        return web.json_response({"text": text, **(extra if verbose else {})})

    async def _forward(
        self, request: web.Request, tail: str, upstream: str | None
    ) -> web.StreamResponse:
        """Pass the request on to ``upstream`` as it came (headers, body), and stream back."""
        if upstream is None or self._client is None:
            return web.json_response({"error": f"/{tail} is not served here"}, status=404)
        url = upstream.rstrip("/") + "/" + tail
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        body = await request.read()
        try:
            async with self._client.request(
                request.method, url, params=request.query, headers=headers, data=body
            ) as upstream_response:
                response = web.StreamResponse(status=upstream_response.status)
                for name, value in upstream_response.headers.items():
                    if name.lower() not in _HOP:
                        response.headers.add(name, value)
                await response.prepare(request)
                async for chunk in upstream_response.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except aiohttp.ClientError as exc:
            why = f"upstream unreachable: {type(exc).__name__}"
            return web.json_response({"error": why}, status=502)


def _checked(attempt_key: str) -> str:
    if not _KEY.match(attempt_key):
        raise ValueError(f"attempt key {attempt_key!r}: letters, digits, '_', '.', '-' only")
    return attempt_key


async def _serve_forever(args: argparse.Namespace) -> None:
    server = SpeechServer(
        args.upstream, openai_upstream=args.openai_upstream, stt=args.stt, voice=args.voice
    )
    await server.start()
    print(f"PORT {server.base_url.rsplit(':', 1)[1]}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    """Run the server until interrupted; prints ``PORT n`` once it listens."""
    parser = argparse.ArgumentParser(prog="python -m lkeval.testing.speech_server")
    parser.add_argument("--upstream", help="where /a/<key>/v1/* that is not speech goes")
    parser.add_argument("--openai-upstream", help="where /o/<key>/v1/* that is not speech goes")
    parser.add_argument("--stt", choices=("oracle", "pocketsphinx"), default="oracle")
    parser.add_argument("--voice", default="en-us", help="the espeak-ng voice of the agent's TTS")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve_forever(args))
    except KeyboardInterrupt:
        return 130
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

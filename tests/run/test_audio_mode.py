"""Audio mode's pieces without an agent: the dispatch, the scenario's mode, the word error
rate, and the microphone and speaker on a real loopback connection."""

from __future__ import annotations

import asyncio
import json
import struct
import textwrap
from pathlib import Path

import pytest
from google.protobuf import json_format
from livekit.protocol import agent_simulation as sim_pb
from livekit.protocol.agent_pb import agent_session as pb

from lkeval.agents.protocol import SessionConnection
from lkeval.host import agent_host
from lkeval.results.model import TurnMetrics
from lkeval.run.attempt import dispatch_json
from lkeval.run.audio_line import FRAME_BYTES, WIRE_RATE, Microphone, Speaker
from lkeval.run.expectations import check_turn
from lkeval.run.word_errors import word_error_rate
from lkeval.scenarios.loader import load_scenario_file
from lkeval.scenarios.model import Scenario

HEAD = struct.Struct(">I")


def _scenario(text: str, tmp_path: Path) -> tuple[tuple[Scenario, ...], list[str]]:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    group, diagnostics = load_scenario_file(path)
    return group.scenarios, [str(d).replace(f"{path}:", "s.yaml:") for d in diagnostics]


def test_an_audio_dispatch_says_audio_and_the_host_turns_the_console_to_audio(
    tmp_path: Path,
) -> None:
    (scenario,), _ = _scenario("scenarios:\n  - label: A\n    instructions: hi\n", tmp_path)
    audio = dispatch_json(scenario, "run", "job", audio=True)
    parsed = json_format.Parse(audio, sim_pb.SimulationDispatch())
    assert parsed.mode == sim_pb.SimulationMode.SIMULATION_MODE_AUDIO
    assert agent_host.console_mode_for(audio) == "audio"
    assert agent_host.console_mode_for(dispatch_json(scenario, "run", "job")) == "text"
    assert agent_host.console_mode_for("not json") == "text"


def test_mode_keys_resolve_per_scenario_and_turn(tmp_path: Path) -> None:
    scenarios, found = _scenario(
        """\
        scenarios:
          - label: Plain
            instructions: hi
          - label: Spoken
            mode: audio
            instructions: hi
          - label: Typed
            mode: text
            instructions: hi
          - label: Mixed
            turns:
              - user: hello
              - user: my number is 42
                mode: audio
              - user: stop
                interrupt_after: 1.5s
        """,
        tmp_path,
    )
    assert found == []
    plain, spoken, typed, mixed = scenarios
    assert not plain.plays_audio("text") and plain.plays_audio("audio")
    assert spoken.plays_audio("text") and not typed.plays_audio("audio")
    assert mixed.plays_audio("text")  # a spoken turn makes the call an audio one
    assert mixed.turns[2].interrupt_after == 1.5
    assert mixed.turn_mode(mixed.turns[1], "text") == "audio"


def test_audio_keys_do_not_change_the_digest_of_scenarios_without_them(tmp_path: Path) -> None:
    (scenario,), _ = _scenario(
        "scenarios:\n  - label: A\n    instructions: hi\n    turns:\n      - user: x\n", tmp_path
    )
    # the digest from before the audio keys existed (history and baselines key on it)
    import dataclasses
    import hashlib

    content = dataclasses.asdict(scenario)
    content.pop("file")
    content.pop("mode")
    content.pop("impair")
    content.pop("caller_interrupt_after")
    for turn in content["turns"]:
        turn.pop("mode")
        turn.pop("interrupt_after")
    text = json.dumps(content, sort_keys=True, default=str, ensure_ascii=False)
    assert scenario.digest == hashlib.sha256(text.encode()).hexdigest()[:16]
    spoken = dataclasses.replace(scenario, mode="audio")
    assert spoken.digest != scenario.digest


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("mode: speech\n    instructions: hi", "must be one of text, audio"),
        (
            "mode: text\n    turns:\n      - user: a\n      - user: b\n        mode: audio",
            "is text, but turns[1]",
        ),
        ("turns:\n      - user: a\n        interrupt_after: 1.5s", "first turn has no reply"),
        (
            "turns:\n      - user: a\n      - user: b\n        interrupt_after: 1.5",
            "not a duration with its unit",
        ),
        (
            "turns:\n      - user: a\n      - user: b\n        mode: text\n"
            "        interrupt_after: 1s",
            "a text turn cannot interrupt",
        ),
        ("instructions: hi\n    caller_interrupt_after: 2", "not a duration with its unit"),
        (
            "instructions: hi\n    mode: text\n    caller_interrupt_after: 2s",
            "caller_interrupt_after: the scenario is text",
        ),
        (
            "turns:\n      - user: a\n    caller_interrupt_after: 2s",
            "caller_interrupt_after: no simulated caller",
        ),
    ],
)
def test_audio_key_mistakes_are_errors_at_their_line(text: str, error: str, tmp_path: Path) -> None:
    _, found = _scenario(f"scenarios:\n  - label: A\n    {text}\n", tmp_path)
    assert any(error in line for line in found), found


def test_word_error_rate() -> None:
    assert word_error_rate("My booking is B-4-2.", "my booking is b 4 2") == 0.0
    assert word_error_rate("book a room for two nights", "book a group or two") == 0.5
    assert word_error_rate("", "") == 0.0
    assert word_error_rate("", "noise") == 1.0


async def _pair() -> tuple[SessionConnection, asyncio.StreamReader, asyncio.StreamWriter]:
    """Our connection and the agent's end of it, over real loopback sockets."""
    accepted: asyncio.Future[SessionConnection] = asyncio.get_running_loop().create_future()

    def on_connect(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.set_result(SessionConnection(r, w))

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    conn = await accepted
    server.close()
    return conn, reader, writer


async def _read(reader: asyncio.StreamReader) -> pb.AgentSessionMessage:
    (n,) = HEAD.unpack(await reader.readexactly(4))
    msg = pb.AgentSessionMessage()
    msg.ParseFromString(await reader.readexactly(n))
    return msg


def _send(writer: asyncio.StreamWriter, msg: pb.AgentSessionMessage) -> None:
    data = msg.SerializeToString()
    writer.write(HEAD.pack(len(data)) + data)


def test_microphone_streams_20ms_frames_with_silence_between_lines() -> None:
    asyncio.run(_test_microphone_streams_20ms_frames_with_silence_between_lines())


async def _test_microphone_streams_20ms_frames_with_silence_between_lines() -> None:
    conn, reader, _ = await _pair()
    mic = Microphone(conn)
    mic.start()
    line = mic.say("hi", b"\x01\x00" * (WIRE_RATE // 10))  # 100 ms of speech
    frames = [await _read(reader) for _ in range(10)]
    await mic.stop()
    assert all(f.WhichOneof("message") == "audio_input" for f in frames)
    assert {len(f.audio_input.data) for f in frames} == {FRAME_BYTES}
    assert {f.audio_input.sample_rate for f in frames} == {WIRE_RATE}
    spoken = [f for f in frames if any(f.audio_input.data)]
    assert len(spoken) == 5 and line.done.is_set()  # then silence, still streaming
    assert line.started is not None and line.stopped is not None
    assert line.stopped - line.started == pytest.approx(0.1, abs=0.001)
    await conn.close()


def test_the_microphone_says_when_each_line_starts_before_filtering_its_first_frame() -> None:
    """The impairments reseed at each caller line (``Impairer.begin_line``): the microphone
    calls ``line_start`` once per line, just before the line's first frame reaches the filter,
    however much silence went before."""
    asyncio.run(_test_line_start())


async def _test_line_start() -> None:
    conn, reader, writer = await _pair()  # the agent's end, kept open
    filtered: list[bytes] = []
    starts: list[int] = []  # how many frames the filter had seen at each line's start

    def keep(frame: bytes) -> bytes:
        filtered.append(frame)
        return frame

    lines: list[bytes] = []

    def line_start(line: bytes) -> None:
        starts.append(len(filtered))
        lines.append(line)

    mic = Microphone(conn, keep, line_start=line_start)
    mic.start()
    for _silence in range(3):
        await _read(reader)
    first = mic.say("one", b"\x01\x00" * (WIRE_RATE // 25))  # 40 ms: two frames
    await first.done.wait()
    for _silence in range(4):
        await _read(reader)
    mic.say("two", b"\x02\x00" * (WIRE_RATE // 50))
    while len(starts) < 2 or len(filtered) <= starts[1]:
        await _read(reader)
    await mic.stop()
    await conn.close()
    writer.close()
    assert lines == [b"\x01\x00" * (WIRE_RATE // 25), b"\x02\x00" * (WIRE_RATE // 50)]
    assert len(starts) == 2
    assert filtered[starts[0]][:2] == b"\x01\x00" and not any(filtered[starts[0] - 1])
    assert filtered[starts[1]][:2] == b"\x02\x00" and not any(filtered[starts[1] - 1])


def test_jitter_delays_the_microphones_frames_in_order_and_the_stream_goes_on() -> None:
    """``--impair jitter=200ms``: each frame reaches the agent when the impairer says (its
    nominal time plus its delay), in order, none lost or repeated. Measured on the receiving
    end: how late each frame arrived against its nominal time. Only lower bounds are asserted
    (a loaded machine makes frames later, never earlier); without the delay applied, frames
    arrive on their nominal times and the mean lateness is far below the jitter's."""
    asyncio.run(_test_jitter())


async def _test_jitter() -> None:
    from lkeval.audio.impair import Impairer, parse_impairments

    impairer = Impairer(parse_impairments("jitter=200ms,seed=3"))
    conn, reader, _ = await _pair()
    delays: list[float] = []  # what the impairer said for each frame, in order

    def delay() -> float:
        delays.append(impairer.last_delay)
        return delays[-1]

    mic = Microphone(conn, impairer.process, delay)
    count = 100
    # frame k carries the value k + 1, so each arrival says which frame it is
    pcm = b"".join(struct.pack("<h", k + 1) * (FRAME_BYTES // 2) for k in range(count))
    loop = asyncio.get_running_loop()
    start = loop.time()
    mic.start()
    mic.say("numbered", pcm)
    arrivals: list[tuple[int, float]] = []
    while len(arrivals) < count:
        frame = (await _read(reader)).audio_input.data
        arrivals.append((struct.unpack_from("<h", frame)[0] - 1, loop.time()))
    await mic.stop()
    await conn.close()
    assert [k for k, _ in arrivals] == list(range(count))  # in order, none lost or repeated
    lateness = [at - (start + k * 0.02) for k, at in arrivals]
    assert sum(delays[:count]) / count > 0.15  # the impairer's draws (mean 200 ms)
    # each frame no earlier than its nominal time plus its delay (the mic starts after
    # ``start``, so ``lateness`` only overstates how late a frame was)
    early = [(k, lateness[k], delays[k]) for k in range(count) if lateness[k] < delays[k] - 1e-3]
    assert early == [], early[:5]


def test_speaker_answers_a_flush_only_when_the_reply_has_played() -> None:
    asyncio.run(_test_speaker_answers_a_flush_only_when_the_reply_has_played())


async def _test_speaker_answers_a_flush_only_when_the_reply_has_played() -> None:
    conn, reader, writer = await _pair()
    woken: list[int] = []
    speaker = Speaker(conn, lambda: woken.append(1))
    frame = pb.AgentSessionMessage.ConsoleIO.AudioFrame(
        data=bytes(WIRE_RATE // 5 * 2), sample_rate=WIRE_RATE, num_channels=1
    )  # 200 ms, sent at once as the agent does
    _send(writer, pb.AgentSessionMessage(audio_output=frame))
    flush = pb.AgentSessionMessage.ConsoleIO.AudioPlaybackFlush()
    _send(writer, pb.AgentSessionMessage(audio_playback_flush=flush))
    await writer.drain()
    loop = asyncio.get_running_loop()
    sent = loop.time()
    answer = await asyncio.wait_for(_read(reader), 5)
    assert answer.WhichOneof("message") == "audio_playback_finished"
    assert loop.time() - sent >= 0.19  # not before the audio would have finished playing
    (reply,) = speaker.replies
    assert reply.seconds == pytest.approx(0.2) and reply.cleared is None and speaker.idle
    assert woken
    await conn.close()


def test_a_clear_cuts_the_reply_and_is_not_answered() -> None:
    asyncio.run(_test_a_clear_cuts_the_reply_and_is_not_answered())


async def _test_a_clear_cuts_the_reply_and_is_not_answered() -> None:
    conn, reader, writer = await _pair()
    speaker = Speaker(conn, lambda: None)
    frame = pb.AgentSessionMessage.ConsoleIO.AudioFrame(
        data=bytes(WIRE_RATE * 2), sample_rate=WIRE_RATE, num_channels=1
    )  # 1 s
    _send(writer, pb.AgentSessionMessage(audio_output=frame))
    flush = pb.AgentSessionMessage.ConsoleIO.AudioPlaybackFlush()
    _send(writer, pb.AgentSessionMessage(audio_playback_flush=flush))
    await writer.drain()
    await asyncio.sleep(0.2)
    clear = pb.AgentSessionMessage.ConsoleIO.AudioPlaybackClear()
    _send(writer, pb.AgentSessionMessage(audio_playback_clear=clear))
    await writer.drain()
    await asyncio.sleep(1.2)
    (reply,) = speaker.replies
    assert reply.cleared is not None and reply.ends - reply.starts < 0.9
    assert speaker.idle
    with pytest.raises(asyncio.TimeoutError):  # the finished message never came
        await asyncio.wait_for(_read(reader), 0.2)
    await conn.close()


def _checks(expect: str, tmp_path: Path) -> tuple[Scenario, list[str]]:
    scenarios, found = _scenario(
        "scenarios:\n  - label: A\n    mode: audio\n    turns:\n      - user: a\n"
        "      - user: My booking is B 4 2.\n        interrupt_after: 1s\n"
        f"        expect:\n{textwrap.indent(textwrap.dedent(expect), ' ' * 10)}",
        tmp_path,
    )
    return scenarios[0], found


def _audio_turn(**fields: object) -> TurnMetrics:
    base: dict = dict(turn=2, latency_ms=1.0, mode="audio", said="My booking is B 4 2.")
    base.update(fields)
    return TurnMetrics(**base)


def test_heard_and_barge_in_checks_decide_on_what_the_agent_heard_and_did(tmp_path: Path) -> None:
    scenario, found = _checks(
        """\
        - heard: {contains: "b 4 2", max_wer: 0.2}
        - barge_in: {stopped_within: 1.5s}
        """,
        tmp_path,
    )
    assert found == []
    turn = scenario.turns[1]

    def check(metrics: TurnMetrics | None) -> list[tuple[bool, str]]:
        results = asyncio.run(check_turn(2, turn, [], None, metrics))
        return [(r.passed, r.reason) for r in results]

    heard = dict(heard="my booking is b 4 2", wer=0.0)
    assert check(_audio_turn(**heard, agent_stopped_ms=900.0)) == [(True, ""), (True, "")]
    misheard = check(_audio_turn(heard="my booking is before two", wer=0.6, agent_stopped_ms=900.0))
    assert not misheard[0][0] and "b 4 2" in misheard[0][1]
    late = check(_audio_turn(**heard, agent_stopped_ms=2500.0))
    assert late[1] == (False, "the agent stopped only after 2.50s")
    kept_talking = check(_audio_turn(**heard))
    assert kept_talking[1] == (False, "the agent did not stop speaking when the caller cut in")
    # a typed turn (or none at all) cannot pass a check on what was heard
    assert [ok for ok, _ in check(TurnMetrics(turn=2, latency_ms=1.0))] == [False, False]
    assert [ok for ok, _ in check(None)] == [False, False]


def test_a_back_channel_must_not_stop_the_agent(tmp_path: Path) -> None:
    scenario, found = _checks("- barge_in: {yields: false}\n", tmp_path)
    assert found == []
    turn = scenario.turns[1]
    ok = asyncio.run(check_turn(2, turn, [], None, _audio_turn(heard="x", wer=1.0)))
    assert ok[0].passed
    yielded = asyncio.run(
        check_turn(2, turn, [], None, _audio_turn(heard="x", wer=1.0, agent_stopped_ms=400.0))
    )
    assert not yielded[0].passed and "false yield" in yielded[0].reason


@pytest.mark.parametrize(
    ("expect", "error"),
    [
        ("- heard: {}\n", "checks nothing"),
        ("- heard: {max_wer: 2}\n", "from 0 to 1"),
        ("- heard: {cotains: x}\n", "cotains"),
        ("- barge_in: {stopped_within: 1}\n", "not a duration with its unit"),
        ("- barge_in: {stopped_within: 1s, yields: false}\n", "contradicts stopped_within"),
    ],
)
def test_audio_check_mistakes_are_errors(expect: str, error: str, tmp_path: Path) -> None:
    _, found = _checks(expect, tmp_path)
    assert any(error in line for line in found), found


def test_impair_reaches_the_microphone_per_attempt_and_is_recorded() -> None:
    from lkeval.run.speech import RunSpeech

    async def scenario() -> None:
        speech = RunSpeech("agent", "espeak", {}, impair="loss=30%,seed=7")
        await speech.start()
        try:
            assert "through loss=30%" in speech.conditions
            assert speech.agent_env("s#1") == {}  # the agent's own speech: nothing to point
            one, again = speech.audio_settings("s#1"), speech.audio_settings("s#1")
            other = speech.audio_settings("s#2")
            assert one.frame_filter is not None and one.line_report is not None
            speech_frame = b"\x10\x00" * (FRAME_BYTES // 2)
            lost = [one.frame_filter(speech_frame) is None for _ in range(200)]
            assert 20 < sum(lost) < 120  # about 30%, drawn from the attempt's seed
            assert again.frame_filter is not None and other.frame_filter is not None
            assert [again.frame_filter(speech_frame) is None for _ in range(200)] == lost
            assert [other.frame_filter(speech_frame) is None for _ in range(200)] != lost
            report = one.line_report()
            assert f"{sum(lost)} of 200 frames lost" in report and "seed=" in report
            assert "seed=7," not in report  # the attempt's own seed, derived from the run's
        finally:
            await speech.stop()

    asyncio.run(scenario())
    assert not RunSpeech("agent", "espeak", {}).impairments.active  # none: no filter


def test_the_caller_sees_what_it_said_and_reports_show_both() -> None:
    from lkeval.results.model import TranscriptItem
    from lkeval.results.wording import format_item
    from lkeval.run.attempt import caller_view

    heard = TranscriptItem(
        kind="message", turn=1, role="user", text="book a group", said="book a room"
    )
    typed = TranscriptItem(kind="message", turn=2, role="user", text="hi")
    assert [i.text for i in caller_view([heard, typed])] == ["book a room", "hi"]
    assert format_item(heard) == "[1] user: book a group (heard; the caller said: book a room)"
    assert format_item(typed) == "[2] user: hi"


def test_a_scenarios_impair_is_checked_at_its_line_and_overrides_the_runs() -> None:
    from lkeval.run.speech import RunSpeech

    async def scenario() -> None:
        speech = RunSpeech("agent", "espeak", {}, impair="loss=30%,seed=7")
        await speech.start()
        try:
            speech_frame = b"\x10\x00" * (FRAME_BYTES // 2)
            own = speech.audio_settings("s#1", "noise=10dB,seed=3")
            assert own.frame_filter is not None and own.line_report is not None
            sent = [own.frame_filter(speech_frame) for _ in range(50)]
            assert all(f is not None and f != speech_frame for f in sent)  # noisy, none lost
            report = own.line_report()
            assert report.startswith("noise=10dB,seed=") and "0 of 50 frames lost" in report
            assert "seed=3:" not in report  # the attempt's seed, derived from the scenario's
            clean = speech.audio_settings("s#1", "none")  # nothing, whatever --impair says
            assert clean.frame_filter is None and clean.line_report is None
            assert speech.audio_settings("s#1").frame_filter is not None  # the run's
            jittery = speech.audio_settings("s#1", "jitter=50ms")
            assert jittery.frame_filter is not None and jittery.frame_delay is not None
            held = []
            for _ in range(20):
                jittery.frame_filter(speech_frame)
                held.append(jittery.frame_delay())
            assert max(held) > 0.0  # the microphone is told each frame's delay
        finally:
            await speech.stop()

    asyncio.run(scenario())


def test_impair_in_a_scenario_file(tmp_path: Path) -> None:
    scenarios, found = _scenario(
        """\
        scenarios:
          - label: Noisy
            mode: audio
            impair: noise=15dB,loss=3%,seed=9
            instructions: hi
          - label: Clean
            instructions: hi
          - label: Bad
            impair: loss=80%
            instructions: hi
          - label: Typo
            impair: nois=3dB
            instructions: hi
        """,
        tmp_path,
    )
    noisy, clean = scenarios[:2]
    assert noisy.impair == "noise=15dB,loss=3%,seed=9" and clean.impair is None
    assert found == [
        "s.yaml:9:13: error: scenarios[2].impair: loss='80%': must be from 0 to 50 %",
        "s.yaml:12:13: error: scenarios[3].impair: unknown impairment 'nois' (noise, loss, burst, "
        "jitter, codec, seed)",
    ], found
    import dataclasses

    assert dataclasses.replace(clean, impair="none").digest != clean.digest


def test_a_caller_who_barges_in_makes_the_call_spoken(tmp_path: Path) -> None:
    (barging, scripted_then), found = _scenario(
        """\
        scenarios:
          - label: Barges in
            instructions: hi
            caller_interrupt_after: 1500ms
          - label: Then simulated
            instructions: hi
            then_simulate: true
            caller_interrupt_after: 2s
            turns:
              - user: hello
        """,
        tmp_path,
    )
    assert found == []
    assert barging.caller_interrupt_after == 1.5 and scenario_plays_audio(barging)
    assert scripted_then.caller_interrupt_after == 2.0


def scenario_plays_audio(scenario: Scenario) -> bool:
    """Spoken whatever ``--mode`` says."""
    return scenario.plays_audio("text")


def test_local_pocketsphinx_serves_a_recognizer_and_tells_it_nothing() -> None:
    """``--speech local:pocketsphinx``: the local server recognizes the audio with pocketsphinx
    (so an impairment changes what the agent hears), no line is announced to it (an oracle
    would make the recognizer moot), and the conditions say which STT it was."""
    pytest.importorskip("pocketsphinx")
    from lkeval.run.speech import RunSpeech

    async def scenario() -> None:
        speech = RunSpeech("local:pocketsphinx", "espeak", {})
        await speech.start()
        try:
            assert speech.local and speech.agent_env("s#1")["LIVEKIT_INFERENCE_URL"]
            assert speech._server is not None and speech._server.stt == "pocketsphinx"
            assert speech.audio_settings("s#1").before_line is None
            assert "pocketsphinx STT" in speech.conditions
        finally:
            await speech.stop()
        oracle = RunSpeech("local", "espeak", {})
        await oracle.start()
        try:
            assert oracle._server is not None and oracle._server.stt == "oracle"
            assert oracle.audio_settings("s#1").before_line is not None
            assert "oracle STT: recognition not tested" in oracle.conditions
        finally:
            await oracle.stop()

    asyncio.run(scenario())


def test_local_pocketsphinx_without_pocketsphinx_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    from lkeval.cli.options import speech_option
    from lkeval.errors import UsageError

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pocketsphinx" else real(name)
    )
    with pytest.raises(UsageError, match=r"pip install 'lk-eval\[speech\]'"):
        speech_option("local:pocketsphinx")
    assert speech_option("local") == "local"

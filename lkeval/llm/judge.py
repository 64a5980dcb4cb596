"""Judging a conversation: the scenario's expectations, scripted intents, LiveKit's judges.

The verdict comes back through a forced tool call, as in ``livekit.agents.evals``: the model
must call ``submit_verdict`` with a reasoning and one of fail/maybe/pass. The judge decides
once: two calls that disagree, a value outside the enum or prose are unusable answers, asked
again up to :data:`JUDGE_RETRIES` times; a verdict a weak model wrote as JSON text is taken
only when it is unambiguous. What is still unusable is a :class:`JudgeError`, which the
engine turns into an ``error`` result, never a pass or a fail.

The prompts (:mod:`lkeval.llm.judge_prompt`) are written not to lean towards pass: the options
are listed fail, maybe, pass; "unsure" is spelled out as maybe; the question asks what is shown,
not "did it succeed?". The conversation goes in as encoded, untrusted data that no text of the
agent can break out of.

A flaky LLM verdict must not block a merge on its own, so a failing verdict can be re-judged
(``rejudge=K``): K more votes, the majority stands, and every vote is kept in
:attr:`lkeval.results.model.Verdict.votes` for the report.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from livekit.agents.llm import (
    LLM,
    ChatContext,
)

from lkeval.llm.client import LLMError, LLMReply, call_llm, make_tool
from lkeval.llm.config import BUILTIN_JUDGES, LLMSpec, VerdictForm
from lkeval.llm.judge_prompt import (
    SUBMIT,
    conversation_prompt,
    conversation_system,
    intent_prompt,
    intent_system,
    render_transcript,
)
from lkeval.llm.textcalls import json_values, outside_json
from lkeval.results.model import TranscriptItem, Usage, Verdict, VerdictValue
from lkeval.text.masking import clip

__all__ = [
    "BUILTIN_JUDGES",
    "JudgeError",
    "combine_verdicts",
    "judge_conversation",
    "judge_intent",
    "parse_verdict",
    "render_transcript",
]

VERDICTS: tuple[VerdictValue, ...] = ("fail", "maybe", "pass")
JUDGE_RETRIES = 2
"""Times the judge is asked again after an unusable answer (no verdict, two disagreeing
verdicts, a value outside the enum) before the verdict is an error of the judge."""
_SUBMIT = SUBMIT
_VERDICT_FIELDS: dict[str, Any] = {
    # reasoning first: with strict schemas the model writes fields in order, so it
    # reasons before it commits to a verdict
    "reasoning": {
        "type": "string",
        "description": "Brief reasoning, citing the turns that decide the verdict.",
    },
    "verdict": {
        "type": "string",
        "enum": list(VERDICTS),
        "description": "fail if the conversation shows an expectation not met; maybe if "
        "you are unsure or it does not show enough to decide; pass if it shows every "
        "expectation met.",
    },
}
_SUBMIT_TOOL = make_tool(
    _SUBMIT, "Submit your verdict, with the reasoning that leads to it.", _VERDICT_FIELDS
)

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": _SUBMIT,
        "strict": True,
        "schema": {
            "type": "object",
            "properties": _VERDICT_FIELDS,
            "required": list(_VERDICT_FIELDS),
            "additionalProperties": False,
        },
    },
}
"""The verdict as a structured-output ``response_format``: the same fields as the tool's.
llama.cpp's server enforces it with a grammar (where it writes a forced tool call as text);
vLLM, Ollama and OpenAI support it too."""
_PADDING = 8
"""Whitespace after a verdict written as text that shows the model has only padding left."""


class JudgeError(Exception):
    """The judge LLM answered, but not with a usable verdict (no call, bad JSON, bad value)."""


def _verdict_args(arguments: Any, source: str) -> tuple[VerdictValue, str]:
    """Check one submit_verdict's arguments (a JSON string or an already parsed mapping)."""
    args = arguments
    if isinstance(arguments, str):
        try:
            args = json.loads(arguments or "")
        except json.JSONDecodeError as exc:
            raise JudgeError(f"{source}: {_SUBMIT} arguments are not JSON ({exc.msg})") from None
    if not isinstance(args, dict):
        raise JudgeError(f"{source}: {_SUBMIT} arguments are not an object")
    verdict = args.get("verdict")
    if not isinstance(verdict, str):
        raise JudgeError(f"{source}: {_SUBMIT} has no verdict")
    value = verdict.strip().lower()
    if value not in VERDICTS:
        raise JudgeError(f"{source}: unknown verdict {verdict!r} (expected pass/fail/maybe)")
    reasoning = args.get("reasoning")
    return cast(VerdictValue, value), reasoning.strip() if isinstance(reasoning, str) else ""


def _text_candidates(value: Any) -> list[Any]:
    """Verdict arguments inside one JSON value a model wrote as text.

    Weak models write either the arguments (``{"verdict": ...}``) or the call itself
    (``{"name": "submit_verdict", "arguments": {...}}``), sometimes a list of calls.
    """
    if isinstance(value, list):
        return [c for v in value for c in _text_candidates(v)]
    if not isinstance(value, dict):
        return []
    if "verdict" in value:
        return [value]
    if value.get("name") == _SUBMIT and "arguments" in value:
        return [value["arguments"]]
    return []


_PROSE_VERDICT = re.compile(
    r"\bverdict\b[\s*_\"'`]*(?:is|should be|would be|[:=-])?[\s*_\"'`:]*(pass|fail|maybe)\b",
    re.IGNORECASE,
)


def prose_verdicts(text: str) -> set[str]:
    """Verdicts a reply states in words (``Verdict: fail``), outside any JSON it wrote."""
    return {m.group(1).lower() for m in _PROSE_VERDICT.finditer(outside_json(text))}


def _conflict(verdict: VerdictValue, reply: LLMReply, reasoning: str, source: str) -> None:
    """Raise :class:`JudgeError` when the reply's words name another verdict than its call.

    A reply that says "Verdict: fail" and submits ``pass`` has two answers; taking either
    would be a guess, and taking the pass a false pass. It is unusable: asked again.
    """
    stated = prose_verdicts(reply.text) | prose_verdicts(reasoning)
    if stated - {verdict}:
        others = ", ".join(sorted(stated - {verdict}))
        raise JudgeError(
            f"{source}: the judge submitted {verdict} but its text says verdict {others}"
        )


def _verdict_from_text(text: str, source: str) -> tuple[VerdictValue, str] | None:
    """A verdict written as JSON text, when that is unambiguous; else None.

    Unambiguous means: at least one JSON verdict, every one of them well-formed, all naming
    the same verdict. Anything else (prose, two different verdicts, a value outside the
    enum) is not guessed at: the judge is asked again.
    """
    candidates = [c for v in json_values(text) for c in _text_candidates(v)]
    try:
        parsed = [_verdict_args(c, source) for c in candidates]
    except JudgeError:
        return None
    if not parsed or len({v for v, _ in parsed}) != 1:
        return None
    return parsed[0]


def parse_verdict(reply: LLMReply, source: str) -> tuple[VerdictValue, str]:
    """The one verdict of a reply; :class:`JudgeError` if there is none or more than one."""
    calls = [c for c in reply.tool_calls if c.name == _SUBMIT]
    if calls:
        parsed = [_verdict_args(c.arguments, source) for c in calls]
        values = sorted({v for v, _ in parsed})
        if len(values) > 1:
            raise JudgeError(
                f"{source}: the judge called {_SUBMIT} {len(calls)} times with different "
                f"verdicts ({', '.join(values)})"
            )
        _conflict(parsed[0][0], reply, parsed[0][1], source)
        return parsed[0]
    if (from_text := _verdict_from_text(reply.text, source)) is not None:
        _conflict(from_text[0], reply, from_text[1], source)
        return from_text
    got = (
        f"called {', '.join(c.name for c in reply.tool_calls)}"
        if reply.tool_calls
        else f"answered in text: {clip(' '.join(reply.text.split()), 120)!r}"
    )
    raise JudgeError(f"{source}: the judge did not call {_SUBMIT} ({got})")


async def _vote(
    llm: LLM, spec: LLMSpec, system: str, prompt: str, source: str
) -> tuple[VerdictValue, str, Usage]:
    """One verdict; an unusable answer is asked again, up to :data:`JUDGE_RETRIES` times.

    An unusable answer never counts as any verdict. ``tool_choice`` is ``"required"``, not
    the named form: the verdict tool is the only one offered, so it forces the same call, and
    common servers (llama.cpp's) ignore the named form.
    """
    ctx = ChatContext()
    ctx.add_message(role="system", content=system)
    ctx.add_message(role="user", content=prompt)
    usage = Usage()
    problems: list[str] = []
    for _ in range(1 + JUDGE_RETRIES):
        reply = await ask_verdict(llm, spec, ctx)
        usage = usage + reply.usage
        try:
            verdict, reasoning = parse_verdict(reply, source)
        except JudgeError as exc:
            problems.append(str(exc).removeprefix(f"{source}: "))
            continue
        if problems:
            reasoning += f" (asked again after {len(problems)} unusable answer(s): {problems[0]})"
        return verdict, reasoning, usage
    raise JudgeError(f"{source}: no usable verdict in {len(problems)} answers: {problems[-1]}")


async def ask_verdict(llm: LLM, spec: LLMSpec, ctx: ChatContext) -> LLMReply:
    """One request for a verdict, in the spec's form; the stream is closed once it holds one.

    Tool form: the verdict tool, ``tool_choice: "required"``; a verdict the model wrote as text
    ends the read once only padding follows it. JSON form: the ``json_schema`` response_format,
    read until the object is complete.
    """
    if spec.verdict_form == "json_schema":
        return await call_llm(
            llm, spec, ctx, response_format=VERDICT_SCHEMA, done=lambda t: _complete(t, 0)
        )
    return await call_llm(
        llm,
        spec,
        ctx,
        tools=[_SUBMIT_TOOL],
        tool_choice="required",
        done=lambda t: _complete(t, _PADDING),
    )


async def learn_verdict_form(
    llm: LLM,
    spec: LLMSpec,
    transcript: Sequence[TranscriptItem],
    expectations: str = "",
    instructions: str = "",
) -> VerdictForm:
    """Which form gives verdicts on this endpoint: ``tool`` when a forced call comes back as a
    call; else ``json_schema`` when the server answers that form with a verdict (llama.cpp
    with a small model: its grammar enforces the schema, where the call came back as text).
    Otherwise ``tool`` stays, and its text fallback is what there is."""
    as_tool = replace(spec, verdict_form="tool")
    reply = await ask_verdict(llm, as_tool, _chat("tool", transcript, expectations, instructions))
    if any(c.name == _SUBMIT for c in reply.tool_calls):
        return "tool"
    as_json = replace(spec, verdict_form="json_schema")
    ctx = _chat("json_schema", transcript, expectations, instructions)
    try:
        reply = await ask_verdict(llm, as_json, ctx)
    except LLMError:
        return "tool"  # the server refuses the form (an HTTP 400): not one it has
    try:
        parse_verdict(reply, "judge")
    except JudgeError:
        return "tool"
    return "json_schema"


def _complete(text: str, padding: int) -> bool:
    """True when ``text`` holds one unambiguous verdict and then at least ``padding``
    characters of nothing but whitespace: anything the model still writes could only be
    padding. (Words after the JSON keep it reading: they may contradict it.)"""
    end = text.rstrip()
    if not end.endswith(("}", "]", "```")) or len(text) - len(end) < padding:
        return False
    return _verdict_from_text(text, "judge") is not None


def _majority(votes: Sequence[VerdictValue]) -> VerdictValue:
    """The most common vote; a tie goes to the stricter side (fail, then maybe)."""
    counts = Counter(votes)
    top = max(counts.values())
    return next(v for v in ("fail", "maybe", "pass") if counts.get(v) == top)


def _chat(
    form: VerdictForm, transcript: Sequence[TranscriptItem], expectations: str, instructions: str
) -> ChatContext:
    """The conversation judge's request in ``form``."""
    ctx = ChatContext()
    ctx.add_message(role="system", content=conversation_system(form))
    ctx.add_message(
        role="user", content=conversation_prompt(transcript, expectations, instructions, form)
    )
    return ctx


async def judge_conversation(
    llm: LLM,
    spec: LLMSpec,
    transcript: Sequence[TranscriptItem],
    expectations: str,
    instructions: str,
    rejudge: int = 0,
) -> tuple[Verdict, Usage]:
    """Judge the whole conversation against the scenario's ``agent_expectations``.

    With ``rejudge=K`` a fail is asked K more times and the majority stands (ties stay
    fail); all votes are kept. Raises :class:`JudgeError` for an unusable answer and
    :class:`lkeval.llm.client.LLMError` when the LLM cannot be reached.
    """
    system = conversation_system(spec.verdict_form)
    prompt = conversation_prompt(transcript, expectations, instructions, spec.verdict_form)
    verdict, reasoning, usage = await _vote(llm, spec, system, prompt, "judge")
    if verdict != "fail" or rejudge <= 0:
        return Verdict("judge", verdict, reasoning), usage
    more = await asyncio.gather(
        *(_vote(llm, spec, system, prompt, "judge") for _ in range(rejudge))
    )
    votes: list[tuple[VerdictValue, str]] = [(verdict, reasoning)]
    for v, r, u in more:
        votes.append((v, r))
        usage = usage + u
    values = tuple(v for v, _ in votes)
    final = _majority(values)
    reason = next(r for v, r in votes if v == final)
    tally = f"{values.count(final)} of {len(values)} votes {final}"
    return Verdict("judge", final, f"{reason} (re-judged: {tally})", values), usage


async def judge_intent(
    llm: LLM,
    spec: LLMSpec,
    message_text: str,
    intent: str,
    context: Sequence[TranscriptItem] = (),
) -> tuple[Verdict, Usage]:
    """Check one agent message against a scripted turn's ``intent:``; source ``intent``."""
    prompt = intent_prompt(message_text, intent, context, spec.verdict_form)
    system = intent_system(spec.verdict_form)
    verdict, reasoning, usage = await _vote(llm, spec, system, prompt, "intent")
    return Verdict("intent", verdict, reasoning), usage


def combine_verdicts(verdicts: Sequence[Verdict], maybe_is_pass: bool = False) -> tuple[bool, str]:
    """AND of all verdicts (LiveKit's rule: the agent's own verdict can veto, never rescue).

    ``maybe`` fails unless ``maybe_is_pass``. The reason names each failing part.
    """
    failing = [
        v for v in verdicts if v.verdict == "fail" or (v.verdict == "maybe" and not maybe_is_pass)
    ]
    reason = "; ".join(
        f"{v.source}: {v.verdict}" + (f" — {v.reason}" if v.reason else "") for v in failing
    )
    return not failing, reason

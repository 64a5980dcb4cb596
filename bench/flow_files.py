"""Count the lkeval files a value passes through: the files whose functions receive it.

    python bench/flow_files.py

Runs the example eval in this process (its agent on the local scripted LLM), with a profile
hook on every call into lkeval: a call "carries" a value when an argument (or what an argument
holds, a few levels down) is, or contains, a probe string. Two probes: one scenario's id,
followed from its YAML file to the JUnit file, and the judge model of ``--judge-model``,
followed from the flag to the first HTTP request that names it (the judge preflight).
Prints the files each probe passed through (issue 17.9's count).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SCENARIO = "SCN_checkDouble01"
LABEL = "Checks double room availability"
PROBES = {SCENARIO: (SCENARIO, LABEL), "flowprobe-judge": ("flowprobe-judge",)}
JUDGE = "flowprobe-judge"


def _holds(value: Any, probe: tuple[str, ...], depth: int = 0) -> bool:
    if isinstance(value, str):
        return any(p in value for p in probe)
    if isinstance(value, bytes):
        return any(p.encode() in value for p in probe)
    if depth >= 4 or value is None or isinstance(value, (int, float, bool, Path)):
        return False
    if isinstance(value, dict):
        items = list(value.items())[:64]
        return any(_holds(k, probe, depth + 1) or _holds(v, probe, depth + 1) for k, v in items)
    if isinstance(value, (list, tuple, set, frozenset)):
        return any(_holds(v, probe, depth + 1) for v in list(value)[:64])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return any(
            _holds(getattr(value, f.name, None), probe, depth + 1)
            for f in dataclasses.fields(value)
        )
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict) and depth < 3:
        return _holds(fields, probe, depth + 1)
    return False


def main() -> int:
    import lkeval
    from lkeval.testing.llm_server import LLMServer

    package = str(Path(lkeval.__file__).parent) + os.sep
    seen: dict[str, set[str]] = {SCENARIO: set(), JUDGE: set()}
    requested = threading.Event()  # the judge model reached the LLM server: stop following it
    record = LLMServer._record

    def _record(self: Any, request: Any) -> None:
        if request.body.get("model") == JUDGE:
            requested.set()
        record(self, request)

    LLMServer._record = _record  # type: ignore[method-assign]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        filename = frame.f_code.co_filename
        if not filename.startswith(package) or "/testing/" in filename:
            return
        relative = filename[len(package) :]
        names = frame.f_code.co_varnames[
            : frame.f_code.co_argcount + frame.f_code.co_kwonlyargcount
        ]
        values = [frame.f_locals.get(n) for n in names]
        for probe, files in seen.items():
            if probe == JUDGE and requested.is_set():
                continue
            if relative not in files and any(_holds(v, PROBES[probe]) for v in values):
                files.add(relative)

    hotel = ROOT / "examples" / "hotel"
    rules = (hotel / "llm_rules.yaml").read_text().replace("model: judge", f"model: {JUDGE}")
    with (
        tempfile.TemporaryDirectory() as tmp,
        LLMServer.from_rules_text(rules)
        if hasattr(LLMServer, "from_rules_text")
        else _server(LLMServer, rules, Path(tmp)) as llm,
    ):
        os.environ.update(
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="not-needed-locally",
            HOTEL_AGENT_MODEL="hotel-agent",
        )
        argv = [
            "run",
            "--agent",
            str(hotel / "agent.py"),
            "--scenarios",
            str(hotel / "scenarios.yaml"),
            "--results",
            f"{tmp}/results.json",
            "--junit",
            f"{tmp}/junit.xml",
            "--caller-model",
            "caller",
            "--judge-model",
            JUDGE,
            "--match",
            "Checks double*",
        ]
        from lkeval.cli import main as cli_main

        sys.setprofile(profile)
        try:
            code = cli_main(argv)
        finally:
            sys.setprofile(None)
        assert LABEL in Path(f"{tmp}/junit.xml").read_text(), "the probe never reached JUnit"
    print(f"exit code {code}")
    for probe, files in seen.items():
        print(f"{probe}: {len(files)} files")
        for name in sorted(files):
            print(f"  {name}")
    return 0


def _server(cls: Any, rules: str, tmp: Path) -> Any:
    path = tmp / "rules.yaml"
    path.write_text(rules)
    return cls.from_file(path)


if __name__ == "__main__":
    sys.exit(main())

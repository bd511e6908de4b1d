"""How long resuming a long session takes, and how long one step takes to save.

Builds a 10,000-message session in a temporary store (tool calls with realistic arguments,
file-sized tool results, text with provider ids, thinking with signatures), then prints:

- resume, cold: ``Store.open`` + ``load_messages`` (every message made into a real pydantic-ai
  object) in a fresh process that has already imported pydantic-ai, as the app has by then, but
  built nothing else; the median of five such processes (each one's CPU time is printed too,
  so a burst of load on a shared machine shows as one outlier rather than moving the result);
- resume, warm: the same in this process, median of five runs, the previous result freed first;
- for comparison, the SDK's adapter alone (``ModelMessagesTypeAdapter.validate_json``) on the
  same rows: what a resume cost before ``history_codec``;
- append: the median time of ``append_step`` for one more step.

CPU time is the figure to compare: the machine may be shared, which inflates wall time. A
calibration loop is timed too, so runs on a busier or quieter machine can be put side by side.
``load_messages`` keeps the cyclic garbage collector out of the load and hands what it built
to the oldest generation; a full collection still walks those objects whenever one runs, and
what one costs right after a cold resume is reported separately (paid later, not by the resume).

- resume, whole: what a user waits for on ``ketch --resume ID``: the store opened and loaded,
  the real session built (``build_session``), the replay items made from the messages and the
  stored events, and the replay printed through the UI's transcript view (Rich warmed up, as the
  app does in the background meanwhile); median of three in this process.

Targets: resume < 300 ms, whole resume < 500 ms, append < 5 ms.
Run: ``.venv/bin/python bench/resume.py``.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))
os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")

from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage  # noqa: E402

from ketch.protocol.events import ToolCallFinished, ToolCallStarted, Usage  # noqa: E402
from ketch.state.store import Store  # noqa: E402

MESSAGES = 10_000
RESUME_TARGET_MS = 300
WHOLE_RESUME_TARGET_MS = 500
COLD_RUNS = 5
APPEND_TARGET_MS = 5

_WORDS = "the a function returns value file path test error config module import class self data".split()


def _prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _code(rng: random.Random, lines: int) -> str:
    return "\n".join(f"{i:>5}\t    {_prose(rng, rng.randint(3, 12))}" for i in range(1, lines + 1))


def make_step(rng: random.Random, n: int) -> tuple[list[ModelMessage], list]:
    """One model response with a tool call, and the request carrying its result (2 messages)."""
    call_id = f"call_{n:06d}"
    tool, args = rng.choice(
        [
            ("read_file", {"path": f"src/pkg/module_{n % 97}.py"}),
            ("grep", {"pattern": "def .*value", "path": "src"}),
            ("shell", {"command": "pytest -q tests/test_value.py"}),
            ("edit_file", {"path": "src/pkg/a.py", "old": _prose(rng, 20), "new": _prose(rng, 25)}),
        ]
    )
    response = ModelResponse(
        parts=[
            ThinkingPart(_prose(rng, 60), id=f"rs_{n}", signature="E" * 400, provider_name="openai"),
            TextPart(_prose(rng, 40), id=f"msg_{n}", provider_name="openai", provider_details={"phase": "commentary"}),
            ToolCallPart(tool, args, call_id, id=f"fc_{n}", provider_name="openai"),
        ],
        usage=RequestUsage(input_tokens=20_000 + n, output_tokens=300, cache_read_tokens=18_000),
        model_name="gpt-5",
        provider_name="openai",
        provider_response_id=f"resp_{n}",
    )
    result = _code(rng, rng.randint(10, 60)) if tool != "edit_file" else "Edited src/pkg/a.py (+3 -2)"
    request = ModelRequest(parts=[ToolReturnPart(tool, result, call_id)])
    if n % 25 == 0:
        request = ModelRequest(parts=[UserPromptPart(_prose(rng, 30))])
        response.parts = [TextPart(_prose(rng, 200))]
    events = [
        ToolCallStarted(call_id=call_id, name=tool, args=args),
        ToolCallFinished(call_id=call_id, name=tool, summary="ok"),
        Usage(input_tokens=20_000, output_tokens=300),
    ]
    return [response, request], events


def build(db: Path) -> str:
    rng = random.Random(7)
    with Store.open(db) as store:
        sid = store.create_session("/bench/project", "openai:gpt-5", "build")
        batch: list[ModelMessage] = []
        batch_events: list = []
        for n in range(MESSAGES // 2):
            messages, events = make_step(rng, n)
            batch += messages
            batch_events += events
            if len(batch) >= 500:
                store.append_step(sid, batch, batch_events)
                batch, batch_events = [], []
        if batch:
            store.append_step(sid, batch, batch_events)
    return sid


_COLD_CHILD = """
import gc, sys, time
sys.path.insert(0, sys.argv[1])
import pydantic_ai.messages
from ketch.state.store import Store
start, cpu = time.perf_counter(), time.process_time()
store = Store.open(sys.argv[2])
messages = store.load_messages(sys.argv[3])
wall_ms, cpu_ms = (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000
cpu = time.process_time()
gc.collect()
print(wall_ms, cpu_ms, len(messages), (time.process_time() - cpu) * 1000)
"""


def calibration_ms() -> float:
    """CPU time of a fixed pure-Python loop: how fast this machine is running right now."""
    cpu = time.process_time()
    total = 0
    for i in range(3_000_000):
        total += i
    return (time.process_time() - cpu) * 1000


def cold_resume(db: Path, sid: str) -> tuple[float, float, float]:
    """Wall ms, CPU ms and the following full collection's CPU ms, for one fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", _COLD_CHILD, str(SRC), str(db), sid], capture_output=True, text=True, check=True
    ).stdout.split()
    assert int(out[2]) == MESSAGES, out
    return float(out[0]), float(out[1]), float(out[3])


def whole_resume(tmp: Path, sid: str) -> tuple[float, float, int]:
    """(wall ms, cpu ms, rows printed) of one complete resume, as the app does it."""
    import asyncio
    from types import SimpleNamespace

    from ketch.frontends.assemble import build_session
    from ketch.frontends.cli import _main_parser
    from ketch.frontends.slash_actions import resumed_transcript
    from ketch.ui.controller import KetchApp
    from ketch.ui.replay import play
    from ketch.ui.rich_render import AnsiRenderer
    from ketch.ui.transcript import TurnView

    os.environ.update(KETCH_DATA_DIR=str(tmp), KETCH_CONFIG_DIR=str(tmp / "config"))
    project = tmp / "project"
    (project / ".git").mkdir(parents=True, exist_ok=True)
    args = _main_parser().parse_args(["--base-url", "http://127.0.0.1:9/v1", "--wire", "openai-chat",
                                      "--model", "gpt-5", "--resume", sid, "--cwd", str(project)])
    renderer = AnsiRenderer()
    renderer.warm_up()
    printed: list[str] = []
    app = SimpleNamespace(committer=SimpleNamespace(commit=printed.extend), config=SimpleNamespace(display_prompt=None))
    app.view = TurnView(renderer, lambda: 119, printed.extend)
    app.echo_prompt = lambda text: KetchApp.echo_prompt(app, text)  # type: ignore[arg-type]

    async def run() -> None:
        session = await build_session(args, interactive=True)
        try:
            await play(app, await resumed_transcript(session))  # type: ignore[arg-type]
        finally:
            await session.aclose()

    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    asyncio.run(run())
    return (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000, len(printed)


def main() -> None:
    from ketch.context.history_codec import build_messages, validate_messages

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ketch.db"
        start = time.perf_counter()
        sid = build(db)
        size_mb = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        print(f"built {MESSAGES} messages in {time.perf_counter() - start:.1f} s ({size_mb:.1f} MB on disk)")

        calibration = [calibration_ms()]
        colds = [cold_resume(db, sid) for _ in range(COLD_RUNS)]
        cold_ms, cold_cpu_ms, collect_ms = (statistics.median(c[i] for c in colds) for i in range(3))

        warm, warm_cpu = [], []
        for _ in range(5):
            gc.collect()
            start, cpu = time.perf_counter(), time.process_time()
            with Store.open(db) as store:
                loaded = store.load_messages(sid)
            warm.append((time.perf_counter() - start) * 1000)
            warm_cpu.append((time.process_time() - cpu) * 1000)
            assert len(loaded) == MESSAGES
            del loaded

        # Diagnostics after the timed resumes, so their garbage doesn't shape the heap those ran in.
        with Store.open(db) as store:
            query = "SELECT data FROM messages WHERE session_id = ? ORDER BY seq"
            rows = [r for (r,) in store.connection.execute(query, (sid,))]
        direct = sum(m is not None for m in build_messages(rows))
        print(f"{direct} of {len(rows)} messages built directly, {len(rows) - direct} through the SDK's adapter")
        adapter, adapter_cpu = [], []
        for _ in range(3):
            gc.collect()
            start, cpu = time.perf_counter(), time.process_time()
            loaded = validate_messages(rows)
            adapter.append((time.perf_counter() - start) * 1000)
            adapter_cpu.append((time.process_time() - cpu) * 1000)
            del loaded
        calibration.append(calibration_ms())

        rng = random.Random(11)
        appends, appends_cpu = [], []
        with Store.open(db) as store:
            for n in range(MESSAGES, MESSAGES + 60):
                messages, events = make_step(rng, n)
                start, cpu = time.perf_counter(), time.process_time()
                store.append_step(sid, messages, events)
                appends.append((time.perf_counter() - start) * 1000)
                appends_cpu.append((time.process_time() - cpu) * 1000)
        append_ms, append_cpu_ms = statistics.median(appends), statistics.median(appends_cpu)

        wholes = [whole_resume(Path(tmp), sid) for _ in range(3)]
        whole_ms, whole_cpu_ms = statistics.median(w[0] for w in wholes), statistics.median(w[1] for w in wholes)

        def verdict(value: float, target: float | None) -> str:
            if target is None:
                return ""
            return f"target < {target} ms  " + ("ok" if value < target else "OVER TARGET")

        print(" " * 50 + "wall       cpu   (cpu time is judged: other processes inflate it less than wall time)")
        rows_out = [
            (f"resume cold (open + load_messages, median of {COLD_RUNS})", cold_ms, cold_cpu_ms, RESUME_TARGET_MS),
            ("resume warm (median of 5)", statistics.median(warm), statistics.median(warm_cpu), RESUME_TARGET_MS),
            ("  before: SDK adapter alone (median of 3)", statistics.median(adapter), statistics.median(adapter_cpu), None),
            ("append one step (median of 60)", append_ms, append_cpu_ms, APPEND_TARGET_MS),
            (f"resume whole (session + replay of {wholes[0][2]} rows)", whole_ms, whole_cpu_ms, WHOLE_RESUME_TARGET_MS),
        ]
        for label, wall, cpu_ms, target in rows_out:
            print(f"{label:<48} {wall:8.2f} ms {cpu_ms:8.2f} ms  {verdict(cpu_ms, target)}")
        print("cold resumes, cpu ms each: " + ", ".join(f"{c[1]:.0f}" for c in colds))
        print(
            f"full collection after a cold resume (paid later, not in the resume): {collect_ms:.0f} ms cpu; "
            f"calibration loop: {statistics.median(calibration):.0f} ms cpu (lower is a faster machine)"
        )


if __name__ == "__main__":
    main()

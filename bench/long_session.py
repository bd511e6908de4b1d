"""Benchmark: ketch's CPU per step over a 1,000-step single turn, and where it goes.

Run: ``.venv/bin/python bench/long_session.py [--steps 1000] [--wire responses|anthropic|gemini|chat|both]``
(``both``: Responses and Anthropic).

One turn of ``--steps`` tool calls (``read_file`` of a 1 kB file each) against the fake
provider on 127.0.0.1, at the model's default window (``gpt-5`` on Responses, 400k;
``claude-sonnet-4-5`` on Anthropic, 200k). The session runs in this process, built as the
headless front end builds it, and its events are read here, on the event loop's thread; the
fake provider runs in a child process (:class:`_FakeProcess`), as a real provider is elsewhere.

Per step it records the CPU time of that thread (``time.thread_time``) from one
``tool_call_started`` to the next, garbage collections it triggers included: the
end of the previous response, the tool, pruning and storing, and the building of the next
request. The tool's own time is in it (a 1 kB read, well under a millisecond).

At steps 10, 100, 500 and 1,000 the five steps after the mark are profiled (cProfile, timed by
the thread's CPU clock, so load on a shared machine does not skew it), in a second, identical
session: a profiled window leaves the process slower for the rest of its run (at step 1,000
about twice as slow after windows at 10, 100 and 500), so the times come from a session that is
never profiled. The profile is split three ways:

- ``ketch``: every call into ``src/ketch`` from outside it, with everything it calls
  (pruning, storing with its sqlite and JSON work, events, the loop's hooks, the tool); not
  ketch's modules that stand in for parts of the SDK (``_SDK_SHIMS``: the Responses passthrough,
  the mapping memos, the history-scan fast paths), whose time and that of the SDK code they
  call count as the SDK's;
- ``sdk request``: building the request: pydantic-ai's message mapping (``_map_messages``,
  ``_prepare_responses_create``) and the provider SDK's parameter transform and request build;
- ``other``: the rest: pydantic-ai's agent graph between steps, reading the response stream,
  httpx, asyncio.

A mark's figure is the median of the twenty steps before it in the timed session (``TIMED``);
the split is the profile's share times that median.
Targets (issue 17): ketch's share at step 1,000 under twice its step-10 figure, and the
whole step under 100 ms, on both wires.

``--background-mb N`` makes the first step start a background command (``shell`` with
``background: true``, run with ``--yolo``) that prints N MB over about ``--background-s`` seconds
while the turn goes on; nothing reads it, so ketch keeps only its newest part. The same targets
hold, and the report says whether the command printed all of it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent / "tests"))

from fakeprovider import FakeProvider, RecordedRequest, ToolCall, Turn  # noqa: E402

sys.path.insert(0, str(HERE))
from background_load import BACKGROUND_DONE, background_producer  # noqa: E402

BACKGROUND: dict[str, float] = {"mb": 0.0, "seconds": 60.0}
"""The ``--background-mb`` load (0: none) and the time it is spread over."""

MARKS = (10, 100, 500, 1000)
WINDOW = 5
"""Steps profiled after each mark (in the profiled session)."""
TIMED = 20
"""Steps before each mark whose median is the step's figure (in the timed session): on a shared
machine a few steps in a row can run a third slower, which five steps' median would report."""
TOP = int(os.environ.get("BENCH_TOP", "0"))
"""With BENCH_TOP=N, print the N functions of most self time of each profiled window."""

WIRES = {
    "responses": ("openai-responses", "gpt-5", "/v1"),
    "anthropic": ("anthropic-messages", "claude-sonnet-4-5", ""),
    "gemini": ("gemini", "gemini-2.5-flash", ""),
    "chat": ("openai-chat", "gpt-5", "/v1"),
}


_REQUEST_BUILDING = frozenset({"_map_messages", "_map_message", "async_maybe_transform", "_build_request", "_prepare_responses_create",
                               "_build_content_and_config", "_GenerateContentParameters_to_mldev", "body", "encode"})
"""Where the SDK builds a request: pydantic-ai's message mapping, the provider SDK's
parameter transform and its HTTP request build."""


_SDK_SHIMS = ("passthrough.py", "responses_memo.py", "lookalike_memo.py", "history_scans.py", "settled_history.py", "ordered_results.py", "encoded_items.py")
"""ketch's modules that stand in for parts of the SDK (``src/ketch/providers/``): their time, and
that of the SDK code they call, is the SDK's, not ketch's own. ketch's own wire models
(``src/ketch/wire/``) replace the SDK on their wire, so they count the same way."""


def _is_shim(func: tuple[str, int, str]) -> bool:
    """Also ketch's own model wires (``src/ketch/wire/``): they do the SDK's work, so they count as it."""
    return ("/src/ketch/providers/" in func[0] and func[0].endswith(_SDK_SHIMS)) or "/src/ketch/wire/" in func[0]


def _is_ketch(func: tuple[str, int, str]) -> bool:
    return "/src/ketch/" in func[0] and not _is_shim(func)


def _is_request_building(func: tuple[str, int, str]) -> bool:
    return func[2] in _REQUEST_BUILDING and (
        "/pydantic_ai/" in func[0] or "/openai/" in func[0] or "/anthropic/" in func[0] or "/google/genai/" in func[0]
        or _is_shim(func)
    )


def _entered(stats: dict, inside: Callable[[tuple[str, int, str]], bool]) -> float:
    """CPU time spent inside the functions ``inside`` selects, counted where they are entered
    from outside (each call's cumulative time once, not again for calls among them)."""
    total = 0.0
    for func, (_cc, _nc, _tt, _ct, callers) in stats.items():
        if inside(func):
            total += sum(ct for caller, (_c, _n, _t, ct) in callers.items() if not inside(caller))
    return total


def _split(profile: cProfile.Profile) -> dict[str, float]:
    """Shares of the profiled time: ketch's own code (every call into ``src/ketch`` from
    outside it, with what it calls), the SDK's request building, and the rest."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    whole = sum(tt for (_cc, _nc, tt, _ct, _callers) in stats.values()) or 1.0
    ketch = _entered(stats, _is_ketch)
    request = _entered(stats, _is_request_building)
    return {"ketch": ketch / whole, "sdk request": request / whole, "other": max(0.0, 1 - (ketch + request) / whole)}


class Script:
    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.n = 0

    def __call__(self, req: RecordedRequest) -> Turn:
        if not (req.body or {}).get("tools"):
            return Turn(text="Summary: files were read.")
        n, self.n = self.n, self.n + 1
        if n == 0 and BACKGROUND["mb"]:
            command = background_producer(BACKGROUND["mb"], BACKGROUND["seconds"])
            return Turn(text="Starting the printer.", tool_calls=[ToolCall("shell", {"command": command, "background": True})])
        if n >= self.steps:
            return Turn(text=f"Read {n} files.")  # after the last mark's profiled window
        return Turn(text=f"Reading file {n}.", tool_calls=[ToolCall("read_file", {"path": f"f{n % 50:02}.txt"})])


async def _drive(args: argparse.Namespace, steps: int, profiled: bool) -> tuple[list[float], dict[int, dict[str, float]]]:
    from ketch.frontends.assemble import build_session

    session = await build_session(args, interactive=False)
    per_step: list[float] = []
    splits: dict[int, dict[str, float]] = {}
    profile: cProfile.Profile | None = None
    last = time.thread_time()
    step = 0
    try:
        async for event in session.run_turn("Read the files one by one."):
            if event.type != "tool_call_started":
                continue
            now = time.thread_time()
            if step and profile is None:
                per_step.append(now - last)
            elif step:
                per_step.append(float("nan"))  # profiled: not a fair time
            step += 1
            # Steps mark-5 .. mark-1 are timed as they are; mark .. mark+4 are profiled.
            if profile is not None and any(step == mark + WINDOW for mark in MARKS):
                profile.disable()
                splits[step - WINDOW] = _split(profile)
                if TOP:
                    pstats.Stats(profile).sort_stats("tottime").print_stats(TOP)
                profile = None
            if profiled and any(step == mark for mark in MARKS if mark <= steps):
                profile = cProfile.Profile(time.thread_time)  # CPU of this thread: load elsewhere is not counted
                profile.enable()
            last = time.thread_time()  # the profiler's own bookkeeping stays out of the step
    finally:
        if profile is not None:
            profile.disable()
        await session.aclose()
    return per_step, splits


def run(wire_key: str, steps: int) -> None:
    # Two sessions: one timed and never profiled, one profiled at the marks. A profiled window
    # leaves the rest of the process slower (on 3.11, about twice as slow at step 1,000 after
    # windows at 10, 100 and 500), so times taken after one would not be the session's own.
    per_step, _ = _session(wire_key, steps, profiled=False)
    _, splits = _session(wire_key, steps, profiled=True)
    _report(wire_key, per_step, splits)


def _session(wire_key: str, steps: int, *, profiled: bool) -> tuple[list[float], dict[int, dict[str, float]]]:
    wire, model, suffix = WIRES[wire_key]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for n in range(50):
            (root / f"f{n:02}.txt").write_text("".join(f"line {i} of file {n}: {'x' * 40}\n" for i in range(20)))
        os.environ["KETCH_CONFIG_DIR"] = str(root / "config")
        os.environ["KETCH_DATA_DIR"] = str(root / "data")
        (root / "config").mkdir()
        (root / "config" / "config.toml").write_text(f"titles = false\nmax_steps = {steps + 20}\n")
        os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
        os.environ.setdefault("ANTHROPIC_API_KEY", "sk-bench")
        os.environ.setdefault("GEMINI_API_KEY", "bench")
        with _FakeProcess(steps) as base_url:
            from ketch.frontends.cli import _main_parser

            base = base_url if suffix else base_url.removesuffix("/v1")
            yolo = ["--yolo"] if BACKGROUND["mb"] else []
            args = _main_parser().parse_args(
                ["-p", "x", "--base-url", base, "--wire", wire, "--model", model, "--output-format", "json", *yolo]
            )
            args.cwd = str(root)
            os.chdir(root)
            result = asyncio.run(_drive(args, steps, profiled))
            if BACKGROUND["mb"]:
                printed = (root / BACKGROUND_DONE).exists()
                print(f"  ({'timed' if not profiled else 'profiled'} session: the background command "
                      f"{'printed all' if printed else 'had not printed all'} of its {BACKGROUND['mb']:g} MB when the turn ended)")
            return result


class _FakeProcess:
    """The fake provider in a process of its own (this file with ``--serve-fake STEPS``).

    In this process it would share the interpreter's heap: it keeps every request it parsed, so at
    step 1,000 it holds about a thousand requests of up to 2,000 messages each (millions of objects),
    and each garbage collection the loop's thread triggers walks them too, which a user's ketch, whose
    provider is elsewhere, never pays."""

    def __init__(self, steps: int) -> None:
        self._steps = steps
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> str:
        self._process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve-fake", str(self._steps),
             "--background-mb", str(BACKGROUND["mb"]), "--background-s", str(BACKGROUND["seconds"])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self._process.stdout is not None
        base_url = self._process.stdout.readline().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            self._process.kill()
            raise SystemExit(f"long_session: the fake provider did not start (it printed {base_url!r})")
        return base_url

    def __exit__(self, *exc: object) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.close()  # the server's cue to stop
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def _serve_fake(steps: int) -> None:
    """Serve the bench's script on 127.0.0.1 until standard input closes; print the base URL first.

    Requests are not recorded (nothing here reads them): kept, they would grow this process to
    millions of objects whose collections compete with the measured process for the machine."""
    with FakeProvider([Script(steps + WINDOW + 1)] * (steps + 70)) as fake:
        fake._record = lambda request: None  # type: ignore[method-assign]
        print(fake.base_url, flush=True)
        sys.stdin.read()


def _timed_window(per_step: list[float], mark: int) -> list[float]:
    """The timed steps just before ``mark`` (up to :data:`TIMED` of them)."""
    return [t for t in per_step[max(0, mark - 1 - TIMED) : mark - 1] if t == t]


def _report(wire_key: str, per_step: list[float], splits: dict[int, dict[str, float]]) -> None:
    _wire, model, _suffix = WIRES[wire_key]
    print(f"{wire_key} ({model}, {len(per_step)} steps measured), CPU per step of the loop's thread:")
    for mark in MARKS:
        if mark > len(per_step) + 1:
            continue
        window = _timed_window(per_step, mark)
        median = statistics.median(window) * 1000
        split = splits.get(mark)
        parts = (
            ", ".join(f"{name} {share * median:.1f} ms ({share:.0%})" for name, share in split.items())
            if split
            else "no profile"
        )
        print(f"  step {mark:>5}: {median:6.1f} ms  [{parts}]")
    if len(per_step) + 1 >= 1000 and 10 in splits and 1000 in splits:
        at10 = statistics.median(_timed_window(per_step, 10))
        at1000 = statistics.median(_timed_window(per_step, 1000))
        ketch10, ketch1000, whole = splits[10]["ketch"] * at10, splits[1000]["ketch"] * at1000, at1000 * 1000
        print(
            f"  targets: ketch at 1,000 {ketch1000 * 1000:.1f} ms vs 2 × step 10 {2 * ketch10 * 1000:.1f} ms: "
            f"{'ok' if ketch1000 < 2 * ketch10 else 'MISSED'}; whole step {whole:.1f} ms < 100 ms: "
            f"{'ok' if whole < 100 else 'MISSED'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--wire", choices=["responses", "anthropic", "gemini", "chat", "both"], default="both")
    parser.add_argument("--serve-fake", type=int, metavar="STEPS", help=argparse.SUPPRESS)
    parser.add_argument("--background-mb", type=float, default=0.0,
                        help="the first step starts a background command printing this many MB")
    parser.add_argument("--background-s", type=float, default=60.0, help="over about this many seconds")
    options = parser.parse_args()
    BACKGROUND.update(mb=options.background_mb, seconds=options.background_s)
    if options.serve_fake is not None:
        _serve_fake(options.serve_fake)
        return
    for wire_key in ("responses", "anthropic") if options.wire == "both" else (options.wire,):
        run(wire_key, options.steps)


if __name__ == "__main__":
    main()

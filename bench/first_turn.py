"""A process's first turn over the Responses wire, with and without the SDK warm-up.

Two cases, each run alternating ``KETCH_SDK_WARMUP`` on and off (src/ketch/providers/sdk_warmup.py) so that
load on a shared machine hits both alike:

- headless: ``ketch -p --output-format stream-json`` against the fake HTTP provider, which answers
  after ``--delay`` seconds (a remote model's time to first token). Timed from the child's start:
  the first text event, the turn-finished event, and the gap between them (where the SDK, without
  the warm-up, builds the models of the final ``response.completed`` event).
- interactive: the real app on a pty (as bench/startup.py runs it); once the session is ready and
  ``--idle`` seconds more have passed (the user typing), the prompt is submitted. The model answers
  with a tool call (``read_file``) and then, given its result, a final answer. Timed: Enter to the
  final answer on screen.

Usage: .venv/bin/python bench/first_turn.py [--runs 5] [--delay 0.8] [--idle 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from fakeprovider import FakeProvider, ToolCall, Turn  # noqa: E402
from startup import PtyChild, isolate  # noqa: E402

DONE = b"ALL-DONE-MARKER"


def headless(delay: float) -> tuple[float, float]:
    """Seconds from the child's start to its first text event and to its turn-finished event."""
    with FakeProvider([Turn(text="The answer is here. " * 20, delay=delay)]) as fake:
        start = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "ketch", "-p", "go", "--base-url", fake.base_url, "--wire", "openai-responses",
             "--model", "fake-model", "--output-format", "stream-json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        first = finished = None
        assert child.stdout is not None
        for line in child.stdout:
            if first is None and b"The answer" in line:
                first = time.perf_counter() - start
            if b'"turn_finished"' in line:
                finished = time.perf_counter() - start
        child.wait()
    if first is None or finished is None:
        raise SystemExit("the headless turn did not complete; is the fake provider working?")
    return first, finished


def interactive(idle: float) -> float:
    """Seconds from Enter on the first prompt to the final answer on screen."""
    script = [
        Turn(text="Reading it.", tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]),
        Turn(text=f"The notes say hello. {DONE.decode()}"),
    ]
    with FakeProvider(script) as fake:
        child = PtyChild([sys.executable, "-m", "ketch", "--base-url", fake.base_url,
                          "--wire", "openai-responses", "--model", "fake-model"])
        try:
            child.read_until(b"fake-model", timeout=60)  # the session is ready
            deadline = time.perf_counter() + idle
            while time.perf_counter() < deadline:
                child.read(0.05)
            start = len(child.output)
            child.send(b"read notes.txt\r")
            entered = time.perf_counter()
            return child.read_until(DONE, timeout=60, start=start) - entered
        finally:
            child.close()


def alternate(runs: int, measure) -> dict[bool, list]:
    results: dict[bool, list] = {True: [], False: []}
    for index in range(runs):
        for warmup in ((True, False) if index % 2 == 0 else (False, True)):
            os.environ["KETCH_SDK_WARMUP"] = "1" if warmup else "0"
            results[warmup].append(measure())
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.8, help="headless: provider's time to first byte, seconds")
    parser.add_argument("--idle", type=float, default=3.0, help="interactive: seconds from session ready to Enter")
    args = parser.parse_args()
    isolate()
    with open("notes.txt", "w") as notes:
        notes.write("hello\n")
    med = statistics.median

    runs = alternate(args.runs, lambda: headless(args.delay))
    print(f"headless, provider answers after {args.delay:.1f} s ({args.runs} runs each, medians, from the child's start):")
    for warmup in (False, True):
        values = runs[warmup]
        print(f"  warm-up {'on ' if warmup else 'off'}: first text {med(v[0] for v in values):.2f} s, "
              f"turn finished {med(v[1] for v in values):.2f} s, "
              f"first text → finished {med(v[1] - v[0] for v in values):.2f} s")

    turns = alternate(args.runs, lambda: interactive(args.idle))
    print(f"interactive, first prompt {args.idle:.1f} s after the session is ready; Enter → final answer on screen "
          f"(a tool call in between), {args.runs} runs each:")
    for warmup in (False, True):
        values = turns[warmup]
        print(f"  warm-up {'on ' if warmup else 'off'}: median {med(values):.2f} s, min {min(values):.2f} s, "
              f"max {max(values):.2f} s")
    print(f"load average at the time: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

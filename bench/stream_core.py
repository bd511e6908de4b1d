"""CPU the core costs while a stream arrives, with no UI: ``ketch -p`` on the fake provider.

Runs ``ketch -p --output-format stream-json`` against the fake HTTP provider (one SSE chunk per token at RATE tokens
a second, Chat Completions by default) and samples the child's CPU time (psutil) when the
first words of the answer reach its stdout and again when the turn-finished event does, so
start-up and shutdown are left out. This is the floor under bench/render.py: what the SDK stream
path costs before anything is drawn. ``KETCH_COALESCE_MS=0`` in the environment shows the
cost without merging deltas (src/ketch/providers/coalesce.py).
Usage: .venv/bin/python bench/stream_core.py [--rate 200] [--tokens 4000] [--wire openai-chat]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from fakeprovider import FakeProvider, Turn  # noqa: E402

from ketch.ui.demo import sample_answer, split_tokens  # noqa: E402


def run(tokens: list[str], rate: float, cwd: str, wire: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``ketch -p`` between the first and last streamed words."""
    with FakeProvider([Turn(text="".join(tokens), text_pieces=tokens, chunk_delay=1 / rate)]) as fake:
        child = subprocess.Popen(
            [sys.executable, "-m", "ketch", "-p", "go", "--base-url", fake.base_url, "--wire", wire,
             "--model", "fake-model", "--output-format", "stream-json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=cwd, bufsize=0,
        )
        proc = psutil.Process(child.pid)
        seen = bytearray()
        first = last = None
        end = b'"type": "turn_finished"'
        assert child.stdout is not None
        while True:
            data = child.stdout.read1(65536) if hasattr(child.stdout, "read1") else os.read(child.stdout.fileno(), 65536)
            if not data:
                break
            if first is None:
                first = (sum(proc.cpu_times()[:2]), time.perf_counter())
            seen += data
            if last is None and end in seen[-(len(data) + len(end)):]:
                last = (sum(proc.cpu_times()[:2]), time.perf_counter())
        child.wait()
        if first is None or last is None:
            raise SystemExit("the answer did not arrive in full; is the fake provider working?")
        return last[0] - first[0], last[1] - first[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--tokens", type=int, default=4000)
    parser.add_argument("--wire", default="openai-chat", choices=["openai-chat", "openai-responses", "anthropic-messages"])
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="ketch-bench-")
    os.environ.update(KETCH_CONFIG_DIR=f"{home}/config", KETCH_DATA_DIR=f"{home}/data", PYDANTIC_AI_NO_BANNER="1")
    tokens = split_tokens(sample_answer(args.tokens))
    cpu, wall = run(tokens, args.rate, home, args.wire)
    merging = os.environ.get("KETCH_COALESCE_MS", "default (100)")
    print(f"{len(tokens)} tokens at {args.rate:.0f} tok/s over {args.wire}, KETCH_COALESCE_MS={merging}: "
          f"{cpu:.2f} s CPU over {wall:.1f} s of streaming = {100 * cpu / wall:.1f}% of one core, "
          f"{1000 * cpu / len(tokens):.2f} ms per token")
    print(f"load average: {os.getloadavg()[0]:.2f} (2 cores; CPU shares are noisy when others run)")


if __name__ == "__main__":
    main()

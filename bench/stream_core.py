"""CPU the core costs while a stream arrives, with no UI: ``ketch -p`` on the fake provider.

Runs ``ketch -p`` twice against the fake HTTP provider (openai-chat, one SSE chunk per
token): once with a one-token answer (start-up only) and once with N tokens at RATE per
second, and prints the extra CPU of the second as a share of its streaming time. This is
the floor under bench/render.py: what the SDK stream path costs before anything is drawn.
Usage: .venv/bin/python bench/stream_core.py [--rate 200] [--tokens 2000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from fakeprovider import FakeProvider, Turn  # noqa: E402

from ketch.ui.demo import sample_answer, split_tokens  # noqa: E402


def run(tokens: list[str], rate: float, cwd: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``ketch -p`` streaming ``tokens``."""
    with FakeProvider([Turn(text="".join(tokens), text_pieces=tokens, chunk_delay=1 / rate)]) as fake:
        start = time.perf_counter()
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%U %S", sys.executable, "-m", "ketch", "-p", "go",
             "--base-url", fake.base_url, "--wire", "openai-chat", "--model", "fake-model"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd, check=True,
        )
        user, system = map(float, done.stderr.split()[-2:])
        return user + system, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--tokens", type=int, default=2000)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="ketch-bench-")
    os.environ.update(KETCH_CONFIG_DIR=f"{home}/config", KETCH_DATA_DIR=f"{home}/data", PYDANTIC_AI_NO_BANNER="1")
    tokens = split_tokens(sample_answer(4 * args.tokens))[: args.tokens]
    base_cpu, base_wall = run(tokens[:1], args.rate, home)
    cpu, wall = run(tokens, args.rate, home)
    streaming = max(wall - base_wall, 1e-6)
    print(f"start-up only: {base_cpu:.2f} s CPU; {len(tokens)} tokens at {args.rate:.0f} tok/s: {cpu:.2f} s CPU, {wall:.1f} s wall")
    print(f"the stream itself: {(cpu - base_cpu):.2f} s CPU over {streaming:.1f} s = {100 * (cpu - base_cpu) / streaming:.0f}% of one core, "
          f"{1000 * (cpu - base_cpu) / len(tokens):.2f} ms per chunk")


if __name__ == "__main__":
    main()

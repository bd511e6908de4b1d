"""How long ``ketch -p`` takes to exit after its answer when tracing points at a collector that
refuses connections, against the same run with tracing off.

Runs a one-turn ``ketch -p`` against the fake provider three times each way, with
``OTEL_EXPORTER_OTLP_ENDPOINT`` at a port bound and held without listening (every connection
refused), and prints the median wall time of each and the difference (the exit's flush is
bounded at ``telemetry.EXIT_FLUSH_S``; target: under 1 s more than with tracing off) and
whether anything reached stderr. Run: ``.venv/bin/python bench/telemetry_exit.py``.
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakeprovider import FakeProvider, Turn  # noqa: E402
from kettle import adhoc, ketch_env  # noqa: E402

RUNS = 3


def one(fake: FakeProvider, cwd: str, env: dict[str, str]) -> tuple[float, str]:
    began = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "ketch", "-p", "hi", *adhoc(fake, "openai-chat")],
                         cwd=cwd, env=ketch_env(env), capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - began
    if run.returncode != 0:
        raise SystemExit(run.stderr)
    return took, run.stderr


def main() -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{held.getsockname()[1]}"
    with tempfile.TemporaryDirectory() as cwd, FakeProvider([Turn(text="hello")] * (2 * RUNS)) as fake:
        off = [one(fake, cwd, {})[0] for _ in range(RUNS)]
        traced = [one(fake, cwd, {"OTEL_EXPORTER_OTLP_ENDPOINT": url}) for _ in range(RUNS)]
    held.close()
    a, b = statistics.median(off), statistics.median(t for t, _ in traced)
    print(f"tracing off: {a:.2f} s · collector refusing: {b:.2f} s · difference {b - a:+.2f} s")
    print("stderr:", repr(traced[0][1]) if any(e for _, e in traced) else "empty")


if __name__ == "__main__":
    main()

"""Added wall time of a sandboxed `true` against a bare one (median of 40 runs each); target
under 15 ms for the default mechanism. Also prints the Landlock fallback's figure.

Each run starts the process the way the shell tool does (`bash -c true` in the workspace, a
new session) and waits for it. The policy is the default workspace-write one for a small
repository made in a temporary directory.

Run: .venv/bin/python bench/sandbox.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ketch.sandbox.detect import detect
from ketch.sandbox.policy import build_policy
from ketch.sandbox.runtime import Sandbox

RUNS = 40


def _timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdin=subprocess.DEVNULL, capture_output=True, start_new_session=True)
    return (time.perf_counter() - start) * 1000


def _compare(bare: list[str], confined: list[str], cwd: Path) -> tuple[list[float], list[float]]:
    """Alternate the two so that load from other processes falls on both alike."""
    _timed(bare, cwd), _timed(confined, cwd)  # warm the page cache
    a, b = [], []
    for _ in range(RUNS):
        a.append(_timed(bare, cwd))
        b.append(_timed(confined, cwd))
    return a, b


def main() -> None:
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / ".git" / "hooks").mkdir(parents=True)
        (ws / "src").mkdir()
        (ws / ".envrc").write_text("")
        command = ["bash", "-c", "true"]
        for preference in ("auto", "landlock"):
            mechanism = detect(preference)  # type: ignore[arg-type]
            if not mechanism.available:
                print(f"{preference}: no mechanism ({mechanism.reason})")
                continue
            sandbox = Sandbox(build_policy("workspace-write", ws), mechanism)
            start = time.perf_counter()
            argv = sandbox.wrap(command, cwd=ws).argv
            wrap_ms = (time.perf_counter() - start) * 1000
            bare, confined = _compare(command, argv, ws)
            added = statistics.median(confined) - statistics.median(bare)
            target = " (target < 15 ms)" if preference == "auto" else ""
            print(
                f"{mechanism.name}: bare median {statistics.median(bare):.1f} ms (min {min(bare):.1f}), "
                f"sandboxed median {statistics.median(confined):.1f} ms (min {min(confined):.1f}), "
                f"added {added:.1f} ms median{target}, {min(confined) - min(bare):.1f} ms between the minimums; "
                f"building the argv {wrap_ms:.2f} ms"
            )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

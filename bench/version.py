"""Wall time of `ketch --version` (median of 5 runs); target under 0.15 s.

Run: .venv/bin/python bench/version.py
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    exe = shutil.which("ketch", path=str(Path(sys.executable).parent)) or shutil.which("ketch")
    cmd = [exe, "--version"] if exe else [sys.executable, "-m", "ketch", "--version"]
    for probe in ("--version", "--help"):
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "ketch", probe], capture_output=True, text=True
        ).stderr
        heavy = [m for m in ("pydantic_ai", "openai", "anthropic", "prompt_toolkit", "rich") if f"| {m}\n" in out or f" {m}\n" in out]
        print(f"ketch {probe} imports heavy modules: {heavy or 'none'}")
    subprocess.run(cmd, capture_output=True)  # warm the page cache
    times = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(f"ketch --version: median {median * 1000:.0f} ms over 5 runs ({' '.join(f'{t * 1000:.0f}' for t in times)}) target < 150 ms")


if __name__ == "__main__":
    main()

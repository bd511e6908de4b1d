"""How long a checkpoint of a 10,000-file workspace takes, and how long a rewind of 10 files.

Builds a 10,000-file tree (100 packages of 50 source files and 50 text files, with a
.gitignore) in a temporary folder, takes the first snapshot (every file hashed and stored once
per workspace, not judged), then prints the median wall time of:

- a snapshot with nothing changed (one ``git diff-files``, one ``git ls-files --others``,
  one ``write-tree`` against the private store's stat cache);
- a snapshot with 10 files changed (those 10 hashed and stored);
- planning and applying a code rewind of those 10 files (the rewind's own snapshot
  included).

Wall time, since the work is mostly git's, in child processes. A calibration loop is timed
too, so a busy machine shows. Targets: unchanged < 100 ms, 10 changed < 200 ms, restore of
10 files < 200 ms. Run: ``.venv/bin/python bench/checkpoint.py``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ketch.checkpoints.rewind import Checkpointer, apply_code, plan_code  # noqa: E402

RUNS = 9


def build(root: Path) -> None:
    for d in range(100):
        (root / f"pkg{d}" / "sub").mkdir(parents=True)
        for f in range(50):
            (root / f"pkg{d}" / f"m{f}.py").write_text(f"x = {d * f}\n" * 20)
            (root / f"pkg{d}" / "sub" / f"n{f}.txt").write_text("y\n" * 10)
    (root / ".gitignore").write_text("*.pyc\n__pycache__/\nbuild/\n*.log\n")


def calibrate() -> float:
    start = time.perf_counter()
    total = 0
    for i in range(2_000_000):
        total += i
    return (time.perf_counter() - start) * 1000


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root, data = Path(tmp) / "ws", Path(tmp) / "data"
        root.mkdir()
        build(root)
        cp = Checkpointer(root, data)
        start = time.perf_counter()
        cp.take("bench", 1, "before", prompt="first")
        first = (time.perf_counter() - start) * 1000
        unchanged, changed, restore = [], [], []
        for run in range(RUNS):
            start = time.perf_counter()
            cp.take("bench", run + 1, "after")
            unchanged.append((time.perf_counter() - start) * 1000)
            cp.take("bench", run + 2, "before", prompt=f"turn {run + 2}")
            for f in range(10):
                (root / f"pkg{f}" / f"m{f}.py").write_text(f"changed {run}\n")
            start = time.perf_counter()
            cp.take("bench", run + 2, "after")
            changed.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            plan = plan_code(cp, "bench", run + 2)
            done = apply_code(cp, plan, None)
            restore.append((time.perf_counter() - start) * 1000)
            assert len(done["restored"]) == 10, done
        cp.close()
    rows = [
        ("snapshot, nothing changed (10,000 files)", unchanged, 100),
        ("snapshot, 10 files changed", changed, 200),
        ("rewind of 10 files (plan, own snapshot, restore)", restore, 200),
    ]
    print(f"calibration loop: {calibrate():.1f} ms; first snapshot (every file stored once): {first:.0f} ms")
    ok = True
    for name, values, target in rows:
        median = statistics.median(values)
        ok &= median < target
        print(f"{name}: median {median:.1f} ms (min {min(values):.1f}, max {max(values):.1f}) target < {target} ms "
              f"{'ok' if median < target else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

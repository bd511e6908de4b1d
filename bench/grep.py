"""Benchmark: ketch's grep tool against raw rg on a 50,000-file tree.

Builds a deterministic tree in a temporary directory (500 directories of 100 small files,
a .gitignore, a handful of matches), then times the real ``grep`` tool function (the path
the agent takes: jail, argv, rg --json, parsing, sorting, formatting) and ``rg`` run
directly for the same pattern. Prints both medians and their ratio (target: under 1.5).

Run: .venv/bin/python bench/grep.py [--files N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from ketch.tools.base import ToolDeps  # noqa: E402
from ketch.tools.search import find_rg, grep, search  # noqa: E402
from ketch.tools.workspace import Workspace  # noqa: E402

PATTERN = r"needle_[0-9]+"
FILES_PER_DIR = 100


@dataclass
class _Ctx:
    deps: ToolDeps
    tool_call_id: str = "bench"


def build_tree(root: Path, files: int) -> int:
    """Write ``files`` small files; every 2,500th holds a match. Returns the match count."""
    matches = 0
    for index in range(files):
        directory = root / f"pkg{index // (FILES_PER_DIR * 50):02d}" / f"mod{index // FILES_PER_DIR:04d}"
        if index % FILES_PER_DIR == 0:
            directory.mkdir(parents=True, exist_ok=True)
        body = [f"# file {index}", f"def function_{index}(value):", f"    return value * {index % 97}"]
        if index % 2_500 == 0:
            body.append(f"# needle_{index}")
            matches += 1
        (directory / f"f{index:05d}.py").write_text("\n".join(body) + "\n")
    (root / ".gitignore").write_text("*.pyc\n__pycache__/\n")
    return matches


def median_seconds(action, runs: int) -> float:
    action()  # warm the page cache and the code path
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=7)
    options = parser.parse_args()
    rg = find_rg()
    if rg is None:
        sys.exit("rg not found: install the ripgrep wheel into this environment.")
    with tempfile.TemporaryDirectory(prefix="ketch-grep-bench-") as temp:
        root = Path(temp)
        started = time.perf_counter()
        expected = build_tree(root, options.files)
        print(f"tree: {options.files:,} files, {expected} matches, built in {time.perf_counter() - started:.1f} s")

        ctx = _Ctx(ToolDeps(workspace=Workspace(root)))
        loop = asyncio.new_event_loop()

        def run_ketch() -> None:
            out = loop.run_until_complete(grep(ctx, PATTERN))
            assert out.count("\n") + 1 == expected, out

        def run_rg() -> None:
            done = subprocess.run(
                [rg, "--no-require-git", "-n", "--", PATTERN], cwd=root, capture_output=True, stdin=subprocess.DEVNULL
            )  # stdin must not be a pipe, or rg searches it instead of the tree
            assert done.stdout.count(b"\n") == expected, done.stdout

        def run_fallback() -> None:
            out = loop.run_until_complete(search(ctx.deps.workspace, PATTERN, rg=None))
            assert out.count("\n") + 1 == expected, out

        try:
            ketch_s = median_seconds(run_ketch, options.runs)
            rg_s = median_seconds(run_rg, options.runs)
            walk_s = median_seconds(lambda: sum(1 for _ in ctx.deps.workspace.iter_paths()), 3)
            fallback_s = median_seconds(run_fallback, 1)
        finally:
            loop.close()
    print(f"ketch grep: median {ketch_s * 1000:.1f} ms over {options.runs} runs")
    print(f"raw rg:     median {rg_s * 1000:.1f} ms over {options.runs} runs")
    print(f"ratio:      {ketch_s / rg_s:.2f} (target < 1.5)")
    print(f"(for reference: walker alone {walk_s * 1000:.0f} ms; pure-Python fallback grep {fallback_s * 1000:.0f} ms)")


if __name__ == "__main__":
    main()

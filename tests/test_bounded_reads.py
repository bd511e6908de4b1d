"""read_file, grep (rg and the Python fallback) and glob in bounded memory and time.

The heavy cases run the real tool function in a child process and read that process's
peak resident memory from the kernel (``ru_maxrss``), for itself and for the rg it ran.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ketch.tools.base import ToolDeps
from ketch.tools.files import glob, read_file
from ketch.tools.workspace import Workspace

PEAK_LIMIT_KB = 200 * 1024
GIB = 1024**3

CHILD = r"""
import asyncio, json, resource, sys, time
from dataclasses import dataclass
from ketch.tools.base import ToolDeps, ToolSettings
from ketch.tools.files import read_file
from ketch.tools.search import find_rg, search
from ketch.tools.workspace import Workspace

@dataclass
class Ctx:
    deps: ToolDeps
    tool_call_id: str = "call"

def high_water_kb():
    # VmHWM is this process's own peak; ru_maxrss would carry the peak of the (large) pytest
    # process this one was forked from, since Linux keeps it across exec
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

def read_kb():
    # bytes this process had read() (/proc/self/io rchar): what a scan of the file would show
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:")) // 1024

root, tool, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
workspace = Workspace(root)
before = high_water_kb()
read_before = read_kb()
started = time.monotonic()
try:
    if tool == "read_file":
        out = asyncio.run(read_file(Ctx(ToolDeps(workspace=workspace)), **args))
    else:
        rg = find_rg() if tool == "grep-rg" else None
        assert tool != "grep-rg" or rg is not None
        out = asyncio.run(search(workspace, rg=rg, **args))
except Exception as exc:
    out = f"{type(exc).__name__}: {exc}"
print(json.dumps({
    "before_kb": before, "peak_kb": high_water_kb(),
    "children_peak_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    "seconds": time.monotonic() - started, "read_kb": read_kb() - read_before,
    "out": out[-2000:], "length": len(out),
}))
"""


def measure(root: Path, tool: str, timeout: float = 120, **args: object) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(root), tool, json.dumps(args)],
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def one_line_2gb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 GiB file whose first line never ends: text up front, then a sparse hole of zeros."""
    root = tmp_path_factory.mktemp("huge")
    with open(root / "huge.txt", "wb") as handle:
        handle.write(b"start " + b"a" * 20_000 + b" needle")
        handle.truncate(2 * GIB)
    return root


def test_read_file_first_line_of_a_2gb_line_in_bounded_memory_and_time(one_line_2gb: Path) -> None:
    result = measure(one_line_2gb, "read_file", path="huge.txt", offset=1, limit=1)
    assert result["peak_kb"] < PEAK_LIMIT_KB, result
    assert result["peak_kb"] - result["before_kb"] < 32 * 1024, result
    assert result["read_kb"] < 64 * 1024, result  # the first MiBs, not the 2 GiB (time: what a scan would cost)
    first, note = result["out"].split("\n")[-2:]
    assert first.startswith("a" * 100) or "start " in result["out"]
    assert "[line cut; more than 1,0" in first and note == "(line 1 was cut; any further lines start after it)"
    assert result["length"] < 2_200


def test_read_file_past_a_huge_line_scans_without_loading_it(tmp_path: Path) -> None:
    with open(tmp_path / "huge.txt", "wb") as handle:
        handle.write(b"a" * 20_000)
        handle.truncate(GIB // 2)
    result = measure(tmp_path, "read_file", path="huge.txt", offset=2, limit=5)
    assert result["peak_kb"] < PEAK_LIMIT_KB, result
    assert result["peak_kb"] - result["before_kb"] < 32 * 1024, result
    assert result["out"] == "ToolFailed: offset 2 is past the end of huge.txt, which has 1 lines.", result


async def test_read_file_whole_of_a_2gb_file_is_refused_before_reading(one_line_2gb: Path) -> None:
    with pytest.raises(Exception, match="huge.txt is 2,147,483,648 bytes, over the 256,000-byte read limit"):
        await read_file(Ctx(ToolDeps(workspace=Workspace(one_line_2gb))), "huge.txt")


@pytest.fixture(scope="module")
def long_lines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 40 MB single text line that matches (within rg's size limit) and a 300 MB one beyond it."""
    root = tmp_path_factory.mktemp("long")
    block = b"x" * (1024 * 1024)
    with open(root / "forty.txt", "wb") as handle:
        handle.write(b"needle ")
        for _ in range(40):
            handle.write(block)
        handle.write(b" needle\nsecond needle line\n")
    with open(root / "big.log", "wb") as handle:
        handle.write(b"needle ")
        for _ in range(300):
            handle.write(block)
        handle.write(b"\n")
    return root


@pytest.mark.parametrize("backend", ["grep-rg", "grep-python"])
def test_grep_on_huge_lines_keeps_both_processes_small(long_lines: Path, backend: str) -> None:
    result = measure(long_lines, backend, pattern="needle")
    assert result["peak_kb"] < PEAK_LIMIT_KB, result
    assert result["children_peak_kb"] < PEAK_LIMIT_KB, result
    lines = result["out"].splitlines()
    assert lines[0].startswith("forty.txt:1:needle xxx") and "…" in lines[0] and len(lines[0]) < 500, lines[0][:600]
    assert lines[1] == "forty.txt:2:second needle line"
    assert len(lines) == 2, "the 300 MB file is over the size limit and not searched"


@pytest.fixture(scope="module")
def millions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("many")
    (root / "hits.txt").write_bytes(b"hit here\n" * 1_000_000)
    return root


@pytest.mark.parametrize("backend", ["grep-rg", "grep-python"])
def test_grep_with_millions_of_matches_stops_counting_and_stays_small(millions: Path, backend: str) -> None:
    result = measure(millions, backend, pattern="hit", max_results=5)
    assert result["peak_kb"] < PEAK_LIMIT_KB and result["children_peak_kb"] < PEAK_LIMIT_KB, result
    assert result["out"].splitlines()[-1] == "(199995+ more matches not shown; narrow the pattern, path or glob)"


@dataclass
class Ctx:
    deps: ToolDeps
    tool_call_id: str = "call"


async def test_a_file_growing_while_read_cannot_keep_the_read_going(tmp_path: Path) -> None:
    """A writer appends short lines ten times faster than they can be parsed, for ten seconds;
    the read stops at the size the file had when it was opened instead of chasing the writer.
    (Should it chase, the test fails after 10 s and empties the file so the read ends.)"""
    target = tmp_path / "growing.log"
    seed = b"seed line\n" * 1000
    target.write_bytes(seed)
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "with open(sys.argv[1], 'ab', buffering=0) as f:\n"
        "    block = b'appended\\n' * 100_000\n"
        "    for _ in range(1000):\n"
        "        f.write(block)\n"
        "        time.sleep(0.01)\n"
    ), str(target)])
    ctx = Ctx(ToolDeps(workspace=Workspace(tmp_path)))
    try:
        while target.stat().st_size <= len(seed):
            time.sleep(0.001)
        reading = asyncio.ensure_future(asyncio.to_thread(
            asyncio.run, read_file(ctx, "growing.log", offset=1_000_000_000, limit=1)))
        done, _ = await asyncio.wait([reading], timeout=10)
        still_writing = writer.poll() is None
    finally:
        writer.kill()
        writer.wait()
    if not done:
        target.write_bytes(b"")  # end the chase, then fail
        await asyncio.wait([reading])
        pytest.fail("the read was still going after 10 s: it chased the growing file")
    with pytest.raises(Exception, match=r"offset 1000000000 is past the end of growing.log, which has (\d+) lines") as caught:
        reading.result()
    counted = int(str(caught.value).rsplit("has ", 1)[1].split()[0])
    assert still_writing, "the writer finished before the read: the test proves nothing"
    assert counted < target.read_bytes().count(b"\n")


async def test_glob_stops_counting_at_its_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ketch.tools.listing as module

    monkeypatch.setattr(module, "GLOB_COUNT_LIMIT", 1200)
    for i in range(1600):
        (tmp_path / f"f{i:04}.py").write_text("")
    out = await glob(Ctx(ToolDeps(workspace=Workspace(tmp_path))), "*.py")
    lines = out.splitlines()
    assert len(lines) == 1001 and lines[-1] == "(200+ more files not shown; narrow the pattern)"


async def test_a_file_that_reports_size_zero_is_read_up_to_the_cap(tmp_path: Path) -> None:
    """procfs files say they are empty; the read still shows them, and stops at the cap.

    The file tools refuse /proc (it can hold keys) and no ordinary file reports size 0 while
    holding data, so the reader behind read_file is driven directly on an open procfs file."""
    import os

    from ketch.tools.files import _numbered_lines
    from ketch.tools.workspace import InvalidPath

    status = Path("/proc/self/status")
    assert os.stat(status).st_size == 0 and len(status.read_bytes()) > 200  # the premise
    with status.open("rb") as binary:
        out = _numbered_lines(binary, "status", 1, None, 64 * 1024)
    assert "\tName:\t" in out and "\tPid:\t" in out
    with status.open("rb") as binary:
        capped = _numbered_lines(binary, "status", 1, None, 60)
    assert "\tName:\t" in capped and "\tPid:\t" not in capped
    assert len(capped.splitlines()) < len(out.splitlines())
    # and read_file itself keeps refusing procfs
    proc = Path(f"/proc/{os.getpid()}")
    with pytest.raises(InvalidPath, match="process or kernel state"):
        await read_file(Ctx(ToolDeps(workspace=Workspace(proc))), "status")

"""Check-then-use races: each file tool runs a thousand times while another process swaps a
directory of the workspace with a symlink to a directory outside it (one atomic
``renameat2(RENAME_EXCHANGE)`` after another, as fast as it can).

What is asserted is what crossed the boundary: the outside files' bytes and names after the
run (nothing written, created or removed there) and every tool result (the outside secret
never in one). No timing is asserted; the swapper's own count shows that it ran, and each
tool must have been seen both succeeding and refusing, so the race really happened.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ToolFailed

from ketch.tools import beneath
from ketch.tools.base import ToolDeps
from ketch.tools.files import edit_file, glob, list_dir, preview_edit, preview_write, read_file, write_file
from ketch.tools.search import search
from ketch.tools.workspace import Workspace

RUNS = 1000
SECRET = "outside-secret-5e1f"
INSIDE = "inside-text alpha\n"

_SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b, stop = (s.encode() for s in sys.argv[1:4])
n = 0
while not os.path.exists(stop):
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        raise SystemExit(f"renameat2: {os.strerror(ctypes.get_errno())}")
    n += 1
if n % 2:  # leave the real directory where it was
    libc.renameat2(-100, a, -100, b, 2)
print(n)
"""


@dataclass
class Ctx:
    deps: ToolDeps
    tool_call_id: str = "call-race"


@dataclass
class Arena:
    ws: Path
    outside: Path
    ctx: Ctx
    before: dict[str, bytes]

    def outside_now(self) -> dict[str, bytes]:
        return {str(p.relative_to(self.outside)): p.read_bytes() for p in sorted(self.outside.rglob("*")) if p.is_file()}


@pytest.fixture
def arena(tmp_path: Path) -> Iterator[Arena]:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "d" / "sub").mkdir(parents=True)
    outside.mkdir()
    for base, text in ((ws / "d", INSIDE), (outside, SECRET + "\n")):
        (base / "f.txt").write_text(text)
        (base / "sub").mkdir(exist_ok=True)
        (base / "sub" / "g.txt").write_text(text)
    (ws / "alt").symlink_to(outside)  # exchanged with ws/d, over and over
    before = {str(p.relative_to(outside)): p.read_bytes() for p in sorted(outside.rglob("*")) if p.is_file()}
    stop = tmp_path / "stop"
    swapper = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(ws / "d"), str(ws / "alt"), str(stop)],
                               stdout=subprocess.PIPE, text=True)
    try:
        yield Arena(ws, outside, Ctx(ToolDeps(workspace=Workspace(ws))), before)
    finally:
        stop.touch()
        out, _ = swapper.communicate(timeout=60)
        assert swapper.returncode == 0, out
        assert int(out) > 0  # it swapped


Call = Callable[[Arena, int], Awaitable[str]]


async def call_read(a: Arena, i: int) -> str:
    return await read_file(a.ctx, "d/f.txt")


async def call_read_deep(a: Arena, i: int) -> str:
    return await read_file(a.ctx, "d/sub/g.txt")


async def call_write(a: Arena, i: int) -> str:
    return await write_file(a.ctx, f"d/new-{i % 7}.txt", f"written {i}\n")


async def call_write_existing(a: Arena, i: int) -> str:
    return await write_file(a.ctx, "d/f.txt", INSIDE if i % 2 else "inside-text beta\n")


async def call_write_mkdir(a: Arena, i: int) -> str:
    return await write_file(a.ctx, f"d/made-{i % 5}/x.txt", "made\n")


async def call_edit(a: Arena, i: int) -> str:
    old, new = ("alpha", "beta") if i % 2 == 0 else ("beta", "alpha")
    try:
        return await edit_file(a.ctx, "d/sub/g.txt", old_string=old, new_string=new)
    except ToolFailed as exc:
        if "not found" in exc.message:  # the previous flip did not land: flip the other way
            return await edit_file(a.ctx, "d/sub/g.txt", old_string=new, new_string=old)
        raise


async def call_list(a: Arena, i: int) -> str:
    return await list_dir(a.ctx, "d")


async def call_glob(a: Arena, i: int) -> str:
    return await glob(a.ctx, "**/*.txt", "d")


async def call_grep(a: Arena, i: int) -> str:
    return await search(a.ctx.deps.workspace, "secret|inside", "d", rg=None)


async def call_preview(a: Arena, i: int) -> str:
    return preview_write(a.ctx.deps.workspace, {"path": "d/f.txt", "content": "x\n"}) + preview_edit(
        a.ctx.deps.workspace, {"path": "d/f.txt", "old_string": "inside", "new_string": "x"})


CALLS: list[Call] = [call_read, call_read_deep, call_write, call_write_existing, call_write_mkdir, call_edit,
                     call_list, call_glob, call_grep, call_preview]


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.__name__)
async def test_a_symlink_swapped_in_meanwhile_never_lets_a_tool_reach_outside(arena: Arena, call: Call) -> None:
    succeeded = refused = 0
    for i in range(RUNS):
        try:
            result = await call(arena, i)
        except ToolFailed as exc:
            assert SECRET not in exc.message
            refused += 1
            continue
        assert SECRET not in result, result
        succeeded += 1
    assert arena.outside_now() == arena.before  # nothing written, made or removed outside
    assert succeeded > 0, "every call failed: the test shows nothing"
    if call not in (call_list, call_glob, call_grep, call_preview):  # these report a refusal inside their text
        assert refused > 0, "no call ever met the swapped directory: the race did not happen"


def test_the_kernel_path_is_the_one_in_use_here() -> None:
    """The race test runs on openat2 where this kernel has it (the walk is covered below)."""
    release = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    assert beneath.uses_openat2() is (sys.platform.startswith("linux") and release >= (5, 6))


@pytest.fixture
def walk_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fd walk of kernels without openat2."""
    beneath._load()
    monkeypatch.setattr(beneath, "_have_openat2", False)


@pytest.mark.parametrize("call", [call_read, call_write, call_write_mkdir, call_edit, call_grep], ids=lambda c: c.__name__)
async def test_the_fd_walk_holds_the_same_way(arena: Arena, call: Call, walk_only: None) -> None:
    await test_a_symlink_swapped_in_meanwhile_never_lets_a_tool_reach_outside(arena, call)


async def test_rewind_writes_and_deletes_beneath_the_workspace(arena: Arena) -> None:
    """apply_code's primitives (the same beneath calls rewind makes) against the swap."""
    root = str(arena.ws)
    refused = done = 0
    for i in range(RUNS):
        try:
            if i % 3 == 0:
                beneath.write_bytes(root, "d/f.txt", b"restored\n", mode=0o644)
            elif i % 3 == 1:
                beneath.symlink(root, "d/link", "f.txt")
            else:
                beneath.unlink(root, "d/link")
            done += 1
        except (OSError, ToolFailed):
            refused += 1
    assert arena.outside_now() == arena.before
    assert done > 0 and refused > 0

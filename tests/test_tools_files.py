"""File tools against real files in tmp_path: what they return and what lands on disk."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.base import ToolDeps, ToolSettings
from ketch.tools.files import (
    TOOLS,
    edit_file,
    glob,
    list_dir,
    preview_edit,
    preview_write,
    read_file,
    unified_diff,
    write_file,
)
from ketch.tools.workspace import PathOutsideWorkspace, Workspace


@dataclass
class Ctx:
    deps: ToolDeps
    tool_call_id: str = "call-1"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def ctx(root: Path) -> Ctx:
    return Ctx(ToolDeps(workspace=Workspace(root), settings=ToolSettings(read_max_bytes=2_000)))


def test_specs_have_the_agreed_names_kinds_and_key_args() -> None:
    assert [(t.name, t.kind, t.key_arg) for t in TOOLS] == [
        ("read_file", "read", "path"),
        ("write_file", "write", "path"),
        ("edit_file", "write", "path"),
        ("list_dir", "read", "path"),
        ("glob", "read", "pattern"),
    ]


# ------------------------------------------------------------------------ read_file


async def test_read_file_numbers_lines_and_reads_ranges(ctx: Ctx, root: Path) -> None:
    (root / "a.txt").write_bytes(b"one\r\ntwo\nthree\nfour\n")
    assert await read_file(ctx, "a.txt") == "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour"
    assert await read_file(ctx, "a.txt", offset=2, limit=2) == (
        "     2\ttwo\n     3\tthree\n(more lines follow; continue with offset=4)"
    )
    assert await read_file(ctx, "a.txt", offset=4) == "     4\tfour"
    with pytest.raises(ToolFailed, match="past the end of a.txt, which has 4 lines"):
        await read_file(ctx, "a.txt", offset=9)


async def test_read_file_refuses_binary_large_missing_and_outside(ctx: Ctx, root: Path, tmp_path: Path) -> None:
    (root / "blob.bin").write_bytes(b"PK\x03\x04\x00\x00data")
    with pytest.raises(ToolFailed, match="blob.bin is a binary file"):
        await read_file(ctx, "blob.bin")
    (root / "big.txt").write_text("line of text\n" * 500)  # 6,500 bytes > 2,000 cap
    with pytest.raises(ToolFailed, match="over the 2,000-byte read limit"):
        await read_file(ctx, "big.txt")
    ranged = await read_file(ctx, "big.txt", offset=10, limit=3)
    assert ranged.splitlines()[0] == "    10\tline of text"
    capped = await read_file(ctx, "big.txt", offset=1, limit=400)
    assert capped.splitlines()[-2] == "   100\tline of text"  # 100 lines of 20 bytes fill the cap
    assert capped.endswith("(more lines follow; continue with offset=101)")
    with pytest.raises(ToolFailed, match="does not exist"):
        await read_file(ctx, "nope.txt")
    (tmp_path / "secret").write_text("s")
    with pytest.raises(PathOutsideWorkspace):
        await read_file(ctx, "../secret")
    with pytest.raises(ToolFailed, match="is a directory"):
        await read_file(ctx, ".")
    os.mkfifo(root / "pipe")
    with pytest.raises(ToolFailed, match="pipe is not a regular file"):
        await read_file(ctx, "pipe")
    with pytest.raises(ToolFailed, match="pipe is not a regular file"):
        await edit_file(ctx, "pipe", "a", "b")


async def test_read_file_shows_an_empty_file_and_clips_long_lines(ctx: Ctx, root: Path) -> None:
    (root / "empty").write_text("")
    assert await read_file(ctx, "empty") == "(empty is empty)"
    (root / "min.js").write_text("x" * 2_500 + "\n")
    ctx.deps.settings.read_max_bytes = 10_000
    assert await read_file(ctx, "min.js") == "     1\t" + "x" * 2_000 + " … [500 more characters]"


# ----------------------------------------------------------------------- write_file


async def test_write_file_creates_parents_and_reports_created(ctx: Ctx, root: Path) -> None:
    summary = await write_file(ctx, "pkg/sub/new.py", "print('hi')\nx = 1\n")
    assert (root / "pkg" / "sub" / "new.py").read_bytes() == b"print('hi')\nx = 1\n"
    assert summary == "Created pkg/sub/new.py (2 lines, 18 bytes)."
    assert [p.name for p in (root / "pkg" / "sub").iterdir()] == ["new.py"]  # no temp file left


async def test_write_file_overwrites_keeping_mode_and_counts_changes(ctx: Ctx, root: Path) -> None:
    script = root / "run.sh"
    script.write_text("#!/bin/sh\necho a\necho b\n")
    script.chmod(0o755)
    summary = await write_file(ctx, "run.sh", "#!/bin/sh\necho a\necho c\necho d\n")
    assert script.read_text() == "#!/bin/sh\necho a\necho c\necho d\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert summary == "Wrote run.sh: +2 -1 (4 lines now)."


async def test_write_file_through_a_symlink_to_outside_is_refused_and_nothing_written(
    ctx: Ctx, root: Path, tmp_path: Path
) -> None:
    (root / "escape").symlink_to(tmp_path / "victim.txt")
    with pytest.raises(PathOutsideWorkspace):
        await write_file(ctx, "escape", "pwned")
    assert not (tmp_path / "victim.txt").exists()


def test_unified_diff_and_previews_do_not_write(root: Path) -> None:
    workspace = Workspace(root)
    (root / "m.py").write_text("a = 1\nb = 2\n")
    expected = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n"
    assert unified_diff("a = 1\nb = 2\n", "a = 1\nb = 3\n", "m.py") == expected
    assert preview_edit(workspace, {"path": "m.py", "old_string": "b = 2", "new_string": "b = 3"}) == expected
    assert preview_write(workspace, {"path": "m.py", "content": "a = 1\nb = 3\n"}) == expected
    assert preview_write(workspace, {"path": "new.txt", "content": "x"}) == (
        "--- a/new.txt\n+++ b/new.txt\n@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n"
    )
    assert preview_edit(workspace, {"path": "m.py", "old_string": "zzz", "new_string": "y"}).startswith(
        "(this edit would fail: old_string was not found in m.py"
    )
    assert preview_write(workspace, {"path": "/etc/x", "content": ""}).startswith("(this write would fail: Path")
    assert (root / "m.py").read_text() == "a = 1\nb = 2\n" and not (root / "new.txt").exists()


# ------------------------------------------------------------------------ edit_file


async def test_edit_file_replaces_exactly_one_occurrence(ctx: Ctx, root: Path) -> None:
    (root / "m.py").write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    summary = await edit_file(ctx, "m.py", "    return 2\n", "    return 20\n")
    assert (root / "m.py").read_text() == "def f():\n    return 1\n\ndef g():\n    return 20\n"
    assert summary == "Edited m.py: +1 -1 (5 lines now)."


async def test_edit_file_ambiguous_match_names_lines_and_writes_nothing(ctx: Ctx, root: Path) -> None:
    original = "x = 1\ny = 2\nx = 1\n"
    (root / "m.py").write_text(original)
    with pytest.raises(ToolFailed, match=r"occurs 2 times in m.py \(lines 1, 3\)"):
        await edit_file(ctx, "m.py", "x = 1", "x = 9")
    assert (root / "m.py").read_text() == original
    await edit_file(ctx, "m.py", "x = 1", "x = 9", replace_all=True)
    assert (root / "m.py").read_text() == "x = 9\ny = 2\nx = 9\n"


async def test_edit_file_miss_reports_the_closest_lines(ctx: Ctx, root: Path) -> None:
    (root / "m.py").write_text("import os\n\ndef main():\n    print('hello world')\n    return 0\n")
    with pytest.raises(ToolFailed) as caught:
        await edit_file(ctx, "m.py", "  print('hello world')\n  return 0", "pass")
    message = caught.value.message
    assert message.startswith("old_string was not found in m.py; it must match exactly")
    assert "Closest match (lines 4-5" in message
    assert "     4\t    print('hello world')\n     5\t    return 0" in message


async def test_edits_apply_in_order_atomically(ctx: Ctx, root: Path) -> None:
    original = "alpha\nbeta\ngamma\n"
    (root / "t.txt").write_text(original)
    with pytest.raises(ToolFailed, match="^Edit 2: old_string was not found"):
        await edit_file(ctx, "t.txt", edits=[{"old_string": "alpha", "new_string": "ALPHA"},
                                             {"old_string": "delta", "new_string": "DELTA"}])
    assert (root / "t.txt").read_text() == original
    await edit_file(ctx, "t.txt", edits=[{"old_string": "alpha", "new_string": "beta0"},
                                         {"old_string": "beta0\nbeta", "new_string": "B"}])
    assert (root / "t.txt").read_text() == "B\ngamma\n"


async def test_edit_file_keeps_crlf_and_creates_with_empty_old_string(ctx: Ctx, root: Path) -> None:
    (root / "w.txt").write_bytes(b"one\r\ntwo\r\n")
    await edit_file(ctx, "w.txt", "one\ntwo", "uno\ndos")
    assert (root / "w.txt").read_bytes() == b"uno\r\ndos\r\n"
    assert await edit_file(ctx, "fresh.txt", "", "hello\n") == "Created fresh.txt (1 line, 6 bytes)."
    assert (root / "fresh.txt").read_text() == "hello\n"
    with pytest.raises(ToolFailed, match="does not exist; create it with write_file"):
        await edit_file(ctx, "absent.txt", "x", "y")
    with pytest.raises(ToolFailed, match="identical"):
        await edit_file(ctx, "fresh.txt", "hello", "hello")


# ------------------------------------------------------------------ list_dir / glob


async def test_list_dir_shows_dirs_first_and_hides_ignored(ctx: Ctx, root: Path) -> None:
    for name in ["src/a.py", "b.txt", ".github/ci.yml", "node_modules/x/y.js", ".git/HEAD"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / ".gitignore").write_text("node_modules/\n")
    assert await list_dir(ctx) == "./\n  .github/\n  src/\n  .gitignore\n  b.txt"
    assert await list_dir(ctx, "src") == "src/\n  a.py"
    with pytest.raises(ToolFailed, match="is a file"):
        await list_dir(ctx, "b.txt")


async def test_glob_matches_by_name_or_path_and_skips_ignored(ctx: Ctx, root: Path) -> None:
    for name in ["src/a.py", "src/pkg/b.py", "src/pkg/c.ts", "tests/test_a.py", "build/gen.py", ".cfg/x.py"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / ".gitignore").write_text("build/\n")
    assert await glob(ctx, "*.py") == "src/a.py\nsrc/pkg/b.py\ntests/test_a.py"
    assert await glob(ctx, "src/**/*.{py,ts}") == "src/a.py\nsrc/pkg/b.py\nsrc/pkg/c.ts"
    assert await glob(ctx, "*.py", path="src/pkg") == "src/pkg/b.py"
    assert await glob(ctx, ".cfg/*.py") == ".cfg/x.py"
    assert await glob(ctx, "*.rs") == "No files match '*.rs' under .."
    with pytest.raises(PathOutsideWorkspace):
        await glob(ctx, "*", path=os.sep)

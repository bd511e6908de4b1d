"""grep through the bundled rg and through the pure-Python fallback, on the same real trees."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.base import ToolDeps, ToolSettings
from ketch.tools.search import TOOLS, find_rg, grep, search
from ketch.tools.workspace import PathOutsideWorkspace, Workspace

RG = find_rg()
BACKENDS = [pytest.param(RG, id="rg"), pytest.param(None, id="python")]


@dataclass
class Ctx:
    deps: ToolDeps
    tool_call_id: str = "call-1"


def make_tree(root: Path) -> Workspace:
    files = {
        "src/app.py": "import os\n\ndef main():\n    todo = 1  # TODO: tidy\n    return todo\n",
        "src/util/helpers.py": "# TODO first\nx = 1\ny = 2\nz = 3\n# todo lower\n",
        "docs/guide.md": "A TODO in the docs\n",
        "build/out.py": "TODO in ignored build output\n",
        ".hidden/h.py": "TODO hidden\n",
        "notes-1.txt": "-v is a flag, not a pattern\n",
        "ünï/日本.py": "TODO ünïcode 日本\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "image.bin").write_bytes(b"\x89PNG\x00\x00TODO")
    os.mkfifo(root / "src" / "TODO.fifo")  # reading it would block forever
    (root / ".gitignore").write_text("build/\n")
    return Workspace(root)


def test_the_wheel_binary_is_found_next_to_the_interpreter() -> None:
    assert RG is not None and Path(RG).name == "rg"
    assert [(t.name, t.kind, t.key_arg) for t in TOOLS] == [("grep", "read", "pattern")]


@pytest.mark.parametrize("rg", BACKENDS)
async def test_grep_lists_matches_sorted_skipping_ignored_hidden_and_binary(tmp_path: Path, rg) -> None:
    workspace = make_tree(tmp_path)
    assert await search(workspace, "TODO", rg=rg) == (
        "docs/guide.md:1:A TODO in the docs\n"
        "src/app.py:4:    todo = 1  # TODO: tidy\n"
        "src/util/helpers.py:1:# TODO first\n"
        "ünï/日本.py:1:TODO ünïcode 日本"
    )


@pytest.mark.parametrize("rg", BACKENDS)
async def test_grep_options_path_glob_case_and_context(tmp_path: Path, rg) -> None:
    workspace = make_tree(tmp_path)
    assert await search(workspace, "todo", "src/util", case_insensitive=True, rg=rg) == (
        "src/util/helpers.py:1:# TODO first\nsrc/util/helpers.py:5:# todo lower"
    )
    assert await search(workspace, "TODO", glob="*.md", rg=rg) == "docs/guide.md:1:A TODO in the docs"
    assert await search(workspace, "TODO", glob="src/**", rg=rg) == (
        "src/app.py:4:    todo = 1  # TODO: tidy\nsrc/util/helpers.py:1:# TODO first"
    )
    assert await search(workspace, "^y", "src/util/helpers.py", context=1, rg=rg) == (
        "src/util/helpers.py-2-x = 1\nsrc/util/helpers.py:3:y = 2\nsrc/util/helpers.py-4-z = 3"
    )
    # A pattern that looks like an option is still a pattern.
    assert await search(workspace, "-v", rg=rg) == "notes-1.txt:1:-v is a flag, not a pattern"
    assert await search(workspace, "nothing-here", rg=rg) == "No matches for 'nothing-here' in the workspace."


@pytest.mark.parametrize("rg", BACKENDS)
async def test_grep_caps_results_with_a_count_of_the_rest(tmp_path: Path, rg) -> None:
    workspace = Workspace(tmp_path)
    for i in range(5):
        (tmp_path / f"f{i}.txt").write_text("hit\n" * 10)
    out = await search(workspace, "hit", max_results=12, rg=rg)
    lines = out.splitlines()
    assert lines[:10] == [f"f0.txt:{n}:hit" for n in range(1, 11)]
    assert lines[10:] == ["f1.txt:1:hit", "f1.txt:2:hit", "(38 more matches not shown; narrow the pattern, path or glob)"]


@pytest.mark.parametrize("rg", BACKENDS)
async def test_grep_refuses_bad_regex_and_paths_outside(tmp_path: Path, rg) -> None:
    workspace = make_tree(tmp_path / "w")
    with pytest.raises(ToolFailed, match=r"^grep failed: invalid regex '\('"):
        await search(workspace, "(", rg=rg)
    with pytest.raises(PathOutsideWorkspace):
        await search(workspace, "root", "/etc", rg=rg)
    (tmp_path / "w" / "link").symlink_to("/etc")
    with pytest.raises(PathOutsideWorkspace):
        await search(workspace, "root", "link", rg=rg)


async def test_grep_tool_uses_the_settings_cap(tmp_path: Path) -> None:
    workspace = make_tree(tmp_path)
    ctx = Ctx(ToolDeps(workspace=workspace, settings=ToolSettings(grep_max_results=2)))
    out = await grep(ctx, "TODO", max_results=50)
    assert out.splitlines() == [
        "docs/guide.md:1:A TODO in the docs",
        "src/app.py:4:    todo = 1  # TODO: tidy",
        "(2 more matches not shown; narrow the pattern, path or glob)",
    ]


async def test_an_rg_that_cannot_run_falls_back_to_python(tmp_path: Path) -> None:
    workspace = make_tree(tmp_path / "w")
    missing = str(tmp_path / "no-such-rg")
    assert await search(workspace, "TODO", "docs", rg=missing) == "docs/guide.md:1:A TODO in the docs"


async def test_counting_stops_at_the_limit_and_rg_is_reaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ketch.tools.search as module

    monkeypatch.setattr(module, "COUNT_LIMIT", 50)
    workspace = Workspace(tmp_path)
    (tmp_path / "many.txt").write_text("hit\n" * 5_000)
    out = await search(workspace, "hit", max_results=3, rg=RG)
    assert out.splitlines() == ["many.txt:1:hit", "many.txt:2:hit", "many.txt:3:hit",
                                "(47+ more matches not shown; narrow the pattern, path or glob)"]
    assert [c for c in psutil.Process().children(recursive=True) if c.name() == "rg"] == []

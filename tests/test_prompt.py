"""Per-step instructions: live state, project files root → cwd, only the offered tools."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ketch.core.prompt import (
    BASE_PROMPT,
    CachedGitSummary,
    InstructionFileCache,
    PromptState,
    build_instructions,
    find_instruction_files,
    git_summary,
    summarize_porcelain,
    volatile_sections,
)

ALL_TOOLS = [
    ("read_file", "Read a text file.\nArgs: path"),
    ("edit_file", "Replace text in a file."),
    ("bash", "Run a shell command."),
    ("todo_write", "Replace the todo list."),
    ("task", "Run a subagent."),
    ("ask", "Ask the user a question."),
    ("web_fetch", "Fetch a URL."),
]


def mentions(text: str, tool: str) -> bool:
    """Whether ``tool`` appears as an identifier (not inside a word like "asks")."""
    return re.search(rf"(?<![\w-]){re.escape(tool)}(?![\w-])", text) is not None


def make_tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "repo"
    cwd = root / "pkg" / "sub"
    cwd.mkdir(parents=True)
    for directory, names in ((root, ["CLAUDE.md", "AGENTS.md"]), (root / "pkg", ["KETCH.md"]), (cwd, ["CLAUDE.md", "KETCH.md", "AGENTS.md"])):
        for name in names:
            (directory / name).write_text(f"rule from {directory.relative_to(tmp_path)}/{name}\n")
    (tmp_path / "AGENTS.md").write_text("outside the repository\n")
    return root, cwd


def test_instruction_files_are_found_from_root_down_to_cwd(tmp_path: Path):
    root, cwd = make_tree(tmp_path)
    found = [p.relative_to(tmp_path).as_posix() for p in find_instruction_files(root, cwd)]
    assert found == [
        "repo/AGENTS.md",
        "repo/CLAUDE.md",
        "repo/pkg/KETCH.md",
        "repo/pkg/sub/AGENTS.md",
        "repo/pkg/sub/KETCH.md",
        "repo/pkg/sub/CLAUDE.md",
    ]


def test_cwd_outside_root_reads_only_cwd(tmp_path: Path):
    root, cwd = make_tree(tmp_path)
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "KETCH.md").write_text("x")
    assert find_instruction_files(root, other) == [other / "KETCH.md"]


def test_instructions_carry_project_files_in_order(tmp_path: Path):
    root, cwd = make_tree(tmp_path)
    text = build_instructions(PromptState(cwd=cwd, root=root))
    order = [text.index(f"rule from {p}") for p in ("repo/AGENTS.md", "repo/CLAUDE.md", "repo/pkg/KETCH.md", "repo/pkg/sub/AGENTS.md")]
    assert order == sorted(order)
    assert "outside the repository" not in text
    assert "## pkg/sub/CLAUDE.md" in text


@pytest.mark.parametrize("withheld", [name for name, _ in ALL_TOOLS])
def test_a_withheld_tool_is_never_mentioned(withheld: str):
    offered = [t for t in ALL_TOOLS if t[0] != withheld]
    # A cwd whose path names no tool (pytest's tmp_path carries the test's name).
    text = build_instructions(
        PromptState(cwd=Path("/nonexistent/project"), tools=offered, task_list="- [ ] fix it", memory="m", skills="s", agent_prompt="build")
    )
    assert not mentions(text, withheld)
    for name, description in offered:
        assert f"- {name}: {description.splitlines()[0]}" in text


def test_offered_tool_gets_its_hint_and_descriptions_are_one_line(tmp_path: Path):
    text = build_instructions(PromptState(cwd=tmp_path, tools=ALL_TOOLS))
    assert "todo_write" in text.split("# Tools available")[0]  # the hint in the base section
    assert "Args: path" not in text


def test_tool_definitions_are_accepted(tmp_path: Path):
    from pydantic_ai.tools import ToolDefinition

    tool = ToolDefinition(name="grep", description="Search file contents.\nMore.", parameters_json_schema={})
    assert "- grep: Search file contents." in build_instructions(PromptState(cwd=tmp_path, tools=[tool]))


def test_the_base_prompt_names_no_tool():
    for name, _ in ALL_TOOLS:
        assert not mentions(BASE_PROMPT, name)


def test_live_state_is_read_on_every_build_and_kept_out_of_the_instructions(tmp_path: Path):
    todo = ["- [ ] first"]
    state = PromptState(cwd=tmp_path, task_list=lambda: "\n".join(todo), git="branch main; clean", memory="likes tea")
    instructions = build_instructions(state)
    assert volatile_sections(state)["Task list"] == "- [ ] first"
    todo.append("- [ ] second")
    now = volatile_sections(state)
    assert now["Task list"] == "- [ ] first\n- [ ] second"
    assert now["Git"] == "branch main; clean" and now["Memory"] == "likes tea"
    # the instructions do not move with the state: the provider's cache keeps serving them
    assert build_instructions(state) == instructions
    assert "first" not in instructions and "branch main" not in instructions and "likes tea" not in instructions


def test_instruction_files_are_cached_until_they_change(tmp_path: Path):
    path = tmp_path / "AGENTS.md"
    path.write_text("version one")
    cache = InstructionFileCache()
    assert cache.read(path) == "version one"
    stat = path.stat()
    path.write_text("version two")  # same size; restore the old mtime: the cache must not re-read
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert cache.read(path) == "version one"
    path.write_text("version three!")
    assert cache.read(path) == "version three!"
    path.unlink()
    assert cache.read(path) is None


def test_summarize_porcelain():
    out = "## main...origin/main [ahead 2]\n M a.py\nM  b.py\n?? c.py\n?? d.py\nUU e.py\n"
    assert summarize_porcelain(out) == "branch main [ahead 2]; 1 conflicted, 1 modified, 1 staged, 2 untracked"
    assert summarize_porcelain("## No commits yet on trunk\n") == "branch trunk (no commits yet); clean"
    assert summarize_porcelain("## HEAD (no branch)\n") == "branch detached HEAD; clean"


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_git_summary_reads_a_real_repository_and_tolerates_none(tmp_path: Path):
    assert git_summary(tmp_path) == ""  # not a repository
    subprocess.run(["git", "init", "-q", "-b", "work", str(tmp_path)], check=True)
    (tmp_path / "new.txt").write_text("x")
    assert git_summary(tmp_path) == "branch work (no commits yet); 1 untracked"
    cached = CachedGitSummary(tmp_path)
    assert cached() == "branch work (no commits yet); 1 untracked"
    (tmp_path / "other.txt").write_text("y")
    assert cached() == "branch work (no commits yet); 1 untracked"  # same step: cached
    cached.new_step()
    assert cached() == "branch work (no commits yet); 2 untracked"


def test_git_summary_without_git_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert git_summary(tmp_path) == ""


def test_git_summary_outside_a_repository_starts_no_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """It runs once per step: outside a repository it answers without starting git."""
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "git-runs"
    (fake / "git").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit 1\n')
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    work = tmp_path / "work"
    (work / "deep").mkdir(parents=True)
    assert git_summary(work / "deep") == ""
    assert not log.exists(), log.read_text()
    (work / ".git").mkdir()  # control: with a .git above, git is asked
    assert git_summary(work / "deep") == ""
    assert str(work / "deep") in log.read_text()


def test_environment_section(tmp_path: Path):
    state = PromptState(cwd=tmp_path, os_name="Linux 6.1", today="2026-11-30")
    text = build_instructions(state)
    assert f"- Working directory: {tmp_path}" in text
    assert "- OS: Linux 6.1" in text and "2026-11-30" not in text
    assert volatile_sections(state)["Date"] == "2026-11-30"
    assert volatile_sections(state)["Git"] == "not a repository"
    assert "No tools are available" in text


def test_assembly_is_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """What keeps assembly per step cheap: over 60 steps each instruction file is read once
    (the cache checks its stat), and every step's text is built whole. The time target itself
    is bench/prune.py's (instruction assembly per step < 5 ms)."""
    root, cwd = make_tree(tmp_path)
    files = InstructionFileCache()
    reads: list[Path] = []
    real_read_text = Path.read_text

    def counted(self: Path, *args: Any, **kwargs: Any) -> str:
        reads.append(self)
        return real_read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counted)
    texts = []
    for step in range(60):
        state = PromptState(cwd=cwd, root=root, tools=ALL_TOOLS * 3, task_list=f"- [ ] step {step}", memory="m\n" * 50, skills="s\n" * 30, git="branch main; clean", files=files)
        texts.append(build_instructions(state))
    monkeypatch.undo()
    assert reads and len(reads) == len(set(reads)), reads  # each file once, then the cache
    assert len(set(texts)) == 1 and "step 0" not in texts[0]  # the task list travels as a reminder, not here

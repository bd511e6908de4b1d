"""Read-only git tools against real repositories made in tmp_path."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.base import ToolDeps, ToolSettings
from ketch.tools.git import TOOLS, git_blame, git_diff, git_log, git_show, git_status, staged_diff
from ketch.tools.workspace import PathOutsideWorkspace, Workspace


@dataclass
class Ctx:
    deps: ToolDeps
    tool_call_id: str = "call-1"


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key, value in {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
                       "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com",
                       "GIT_AUTHOR_DATE": "2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z"}.items():
        monkeypatch.setenv(key, value)
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("one\ntwo\n")
    (root / "b.txt").write_text("bee\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first commit")
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    git(root, "commit", "-q", "-am", "add three")
    return root


@pytest.fixture
def ctx(repo: Path) -> Ctx:
    return Ctx(ToolDeps(workspace=Workspace(repo), settings=ToolSettings(shell_output_cap=10_000)))


def test_specs_are_read_only() -> None:
    assert [(t.name, t.kind) for t in TOOLS] == [
        ("git_status", "read"), ("git_diff", "read"), ("git_log", "read"), ("git_show", "read"), ("git_blame", "read"),
    ]


async def test_status_shows_branch_changes_and_clean(ctx: Ctx, repo: Path) -> None:
    assert await git_status(ctx) == "## main\n(working tree clean)"
    (repo / "b.txt").write_text("changed\n")
    (repo / "new.txt").write_text("n\n")
    assert await git_status(ctx) == "## main\n M b.txt\n?? new.txt"


async def test_diff_unstaged_staged_and_range(ctx: Ctx, repo: Path) -> None:
    assert await git_diff(ctx) == "No changes."
    (repo / "b.txt").write_text("bee\nsting\n")
    unstaged = await git_diff(ctx)
    assert unstaged.endswith("@@ -1 +1,2 @@\n bee\n+sting\n") and "b/b.txt" in unstaged
    assert await git_diff(ctx, staged=True) == "No changes."
    git(repo, "add", "b.txt")
    assert await git_diff(ctx, staged=True) == unstaged
    assert staged_diff(repo) == unstaged
    ranged = await git_diff(ctx, ref="HEAD~1..HEAD", path="a.txt")
    assert ranged.endswith("@@ -1,2 +1,3 @@\n one\n two\n+three\n")
    assert await git_diff(ctx, ref="HEAD~1", stat=True, path="b.txt") == (
        " b.txt | 1 +\n 1 file changed, 1 insertion(+)\n"
    )


async def test_log_show_and_blame(ctx: Ctx, repo: Path) -> None:
    log = await git_log(ctx)
    lines = log.splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "2026-01-02 Ada (HEAD -> main) add three", "2026-01-02 Ada first commit",
    ]
    assert (await git_log(ctx, path="b.txt", max_count=5)).endswith("first commit")
    shown = await git_show(ctx, "HEAD")
    assert "    add three" in shown and "+three" in shown
    assert await git_show(ctx, "HEAD~1:a.txt") == "one\ntwo\n"
    blame = await git_blame(ctx, "a.txt", start_line=3, end_line=3)
    assert blame.count("\n") == 1 and "Ada 2026-01-02 3) three" in blame


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: git_diff(c, ref="--output=/tmp/pwned"), "starts with '-'"),
        (lambda c: git_log(c, ref="-p"), "starts with '-'"),
        (lambda c: git_show(c, "--output=x"), "starts with '-'"),
        (lambda c: git_blame(c, "-L1,1"), "starts with '-'"),
        (lambda c: git_diff(c, path="--cached"), "starts with '-'"),
        (lambda c: git_show(c, "no-such-ref"), "git show failed: "),
    ],
)
async def test_option_like_arguments_and_bad_refs_fail_cleanly(ctx: Ctx, repo: Path, call, message: str) -> None:
    with pytest.raises(ToolFailed, match=message) as caught:
        await call(ctx)
    assert "\n" not in caught.value.message
    assert not Path("/tmp/pwned").exists() and not (repo / "x").exists()


async def test_paths_are_jailed_and_output_capped(ctx: Ctx, repo: Path) -> None:
    with pytest.raises(PathOutsideWorkspace):
        await git_log(ctx, path="../../etc/passwd")
    (repo / "big.txt").write_text("line\n" * 5_000)
    git(repo, "add", "big.txt")
    ctx.deps.settings.shell_output_cap = 500
    out = await git_diff(ctx, staged=True)
    assert len(out) < 600 and out.endswith("more characters; narrow it with a path or ref)")


async def test_outside_a_repository_reports_one_line(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    ctx = Ctx(ToolDeps(workspace=Workspace(plain)))
    with pytest.raises(ToolFailed, match="^git status failed: not a git repository"):
        await git_status(ctx)


async def test_repository_config_cannot_run_programs_on_read(ctx: Ctx, repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    git(repo, "config", "diff.external", f"sh -c 'touch {marker}'")
    git(repo, "config", "core.fsmonitor", f"sh -c 'touch {marker}'")
    (repo / "b.txt").write_text("changed\n")
    await git_status(ctx)
    assert "+changed" in await git_diff(ctx)
    assert not marker.exists()

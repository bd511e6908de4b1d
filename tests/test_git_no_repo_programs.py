"""The read-only git tools never run a program the repository's git config names.

Each test builds a repository whose config names a program that leaves a marker file,
first proves the trap is armed (plain ``git`` with the same command leaves the marker),
then runs the tool and asserts the marker never appears.
"""

from __future__ import annotations

import asyncio
import os
import pty
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from gittraps import Traps, armed, ctx_for, git, repo_fixture, run_every_tool, touch_same_size, traps_fixture
from isolation import own_processes
from pydantic_ai.exceptions import ToolFailed

from ketch.core.prompt import git_summary
from ketch.tools.git import git_blame, git_diff, git_log, git_show, git_status, staged_diff
from ketch.tools.gitsafe import git_command, neutral_value

traps = pytest.fixture(traps_fixture, name="traps")
repo = pytest.fixture(repo_fixture, name="repo")


# ------------------------------------------------------------------ worktree-reading traps


@pytest.mark.parametrize("variable", ["clean", "process"])
async def test_filters_from_gitattributes_never_run(repo: Path, traps: Traps, variable: str) -> None:
    (repo / ".gitattributes").write_text("*.txt filter=trap\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attrs")
    git(repo, "config", f"filter.trap.{variable}", traps.program(f"filter-{variable}"))
    git(repo, "config", "filter.trap.smudge", traps.program("filter-smudge"))
    git(repo, "config", "filter.trap.required", "true")
    touch_same_size(repo / "a.txt")
    armed(traps, git(repo, "status", "--short", check=False))
    touch_same_size(repo / "a.txt")
    await run_every_tool(repo)
    assert traps.fired() == []


async def test_smudge_filter_never_runs_on_show(repo: Path, traps: Traps) -> None:
    (repo / ".gitattributes").write_text("*.txt filter=trap\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attrs")
    git(repo, "config", "filter.trap.smudge", traps.program("smudge"))
    armed(traps, git(repo, "cat-file", "--filters", "HEAD:a.txt", check=False))
    await run_every_tool(repo)
    assert traps.fired() == []


async def test_fsmonitor_hook_never_runs(repo: Path, traps: Traps) -> None:
    git(repo, "config", "core.fsmonitor", traps.program("fsmonitor"))
    armed(traps, git(repo, "status", check=False))
    await run_every_tool(repo)
    assert traps.fired() == []


async def test_external_diff_from_config_env_and_driver_never_runs(
    repo: Path, traps: Traps, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(repo, "config", "diff.external", traps.program("diff-external"))
    (repo / ".gitattributes").write_text("*.txt diff=trap\n")
    git(repo, "config", "diff.trap.command", traps.program("diff-driver"))
    (repo / "a.txt").write_text("changed\n")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", traps.program("env-external"))
    armed(traps, git(repo, "diff", check=False), git(repo, "show", check=False))
    await run_every_tool(repo)
    assert traps.fired() == []


async def test_textconv_never_runs_for_diff_show_or_blame(repo: Path, traps: Traps) -> None:
    (repo / ".gitattributes").write_text("*.txt diff=trap\n")
    git(repo, "config", "diff.trap.textconv", traps.program("textconv"))
    (repo / "a.txt").write_text("changed\n")
    armed(traps, git(repo, "blame", "a.txt", check=False))
    await run_every_tool(repo)
    assert traps.fired() == []


async def test_include_path_and_include_if_config_is_neutralised_too(repo: Path, traps: Traps) -> None:
    """A config included from the work tree (relative to .git) names a filter and an fsmonitor."""
    (repo / "inc").mkdir()
    (repo / "inc" / "one.cfg").write_text(f'[filter "inc"]\n\tclean = {traps.program("included-clean")}\n')
    (repo / "inc" / "two.cfg").write_text(f'[core]\n\tfsmonitor = {traps.program("included-fsmonitor")}\n')
    git(repo, "config", "include.path", "../inc/one.cfg")
    git(repo, "config", f"includeIf.gitdir:{repo}/.path", "../inc/two.cfg")
    (repo / ".gitattributes").write_text("*.txt filter=inc\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attrs")
    touch_same_size(repo / "a.txt")
    armed(traps, git(repo, "status", check=False))
    touch_same_size(repo / "a.txt")
    await run_every_tool(repo)
    assert traps.fired() == []


async def test_a_submodule_config_never_runs_through_the_superproject(repo: Path, traps: Traps, tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    (sub / ".gitattributes").write_text("*.txt filter=subtrap\n")
    (sub / "x.txt").write_text("xray\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "sub")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sm")
    git(repo, "commit", "-q", "-m", "add sm")
    git(repo / "sm", "config", "filter.subtrap.clean", traps.program("submodule-clean"))
    git(repo / "sm", "config", "core.fsmonitor", traps.program("submodule-fsmonitor"))
    touch_same_size(repo / "sm" / "x.txt")
    armed(traps, git(repo, "status", check=False))
    touch_same_size(repo / "sm" / "x.txt")
    await run_every_tool(repo)
    assert traps.fired() == []


async def test_hooks_in_dot_git_and_hooks_path_never_run(repo: Path, traps: Traps) -> None:
    names = ["reference-transaction", "post-index-change", "post-checkout", "pre-commit", "fsmonitor-watchman",
             "pre-auto-gc", "post-rewrite", "push-to-checkout"]
    hooks = repo / "elsewhere-hooks"
    hooks.mkdir()
    for name in names:
        for folder in (repo / ".git" / "hooks", hooks):
            (folder / name).write_text(f"#!/bin/sh\necho {name} >> {traps.markers / ('hook-' + name)}\n")
            (folder / name).chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    armed(traps, git(repo, "update-ref", "refs/heads/probe", "HEAD", check=False))
    await run_every_tool(repo)
    assert traps.fired() == []


async def test_gpg_program_never_runs_for_a_signed_commit(repo: Path, traps: Traps) -> None:
    body = git(repo, "cat-file", "commit", "HEAD").stdout
    head, _, message = body.partition("\n\n")
    signed = f"{head}\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n AAAA\n -----END PGP SIGNATURE-----\n\n{message}"
    made = subprocess.run(["git", "-C", str(repo), "hash-object", "-t", "commit", "-w", "--stdin"], input=signed,
                          capture_output=True, text=True, check=True).stdout.strip()
    git(repo, "update-ref", "refs/heads/main", made)
    git(repo, "config", "log.showSignature", "true")
    git(repo, "config", "gpg.program", traps.program("gpg"))
    git(repo, "config", "gpg.openpgp.program", traps.program("gpg-openpgp"))
    armed(traps, git(repo, "show", "-s", check=False))
    await run_every_tool(repo)
    assert traps.fired() == []


async def test_pager_never_runs_even_on_a_terminal(repo: Path, traps: Traps, monkeypatch: pytest.MonkeyPatch) -> None:
    """git pages only to a terminal; the tools pipe, and the hardened argv holds on a pty too."""
    git(repo, "config", "core.pager", traps.program("core-pager"))
    git(repo, "config", "pager.log", traps.program("pager-log"))
    monkeypatch.setenv("GIT_PAGER", traps.program("env-git-pager"))
    monkeypatch.setenv("PAGER", traps.program("env-pager"))

    def on_a_pty(argv: list[str], env: dict[str, str]) -> None:
        leader, follower = pty.openpty()
        try:
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env, timeout=20)
        finally:
            os.close(follower)
            os.close(leader)

    on_a_pty(["git", "-C", str(repo), "log"], dict(os.environ))
    armed(traps)
    on_a_pty(*git_command(repo, ["log"]))
    on_a_pty(*git_command(repo, ["diff", "HEAD~1"]))
    await run_every_tool(repo)
    assert traps.fired() == []


def test_editors_resolve_to_nothing(repo: Path, traps: Traps, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read commands never edit; should one ever ask, git's editor is ':' (run nothing)."""
    git(repo, "config", "core.editor", traps.program("editor"))
    git(repo, "config", "sequence.editor", traps.program("sequence-editor"))
    monkeypatch.setenv("GIT_EDITOR", traps.program("env-editor"))
    assert git(repo, "var", "GIT_EDITOR").stdout.strip().endswith("env-editor")
    argv, env = git_command(repo, ["var", "GIT_EDITOR"])
    assert subprocess.run(argv, env=env, capture_output=True, text=True).stdout.strip() in ("", ":")
    argv, env = git_command(repo, ["var", "GIT_SEQUENCE_EDITOR"])
    assert subprocess.run(argv, env=env, capture_output=True, text=True).stdout.strip() in ("", ":")


# ------------------------------------------------------------------ reads that leave the workspace


async def test_core_worktree_pointing_elsewhere_is_refused(repo: Path, tmp_path: Path) -> None:
    """A config that moves the work tree to another folder would show that folder's files."""
    outside = tmp_path / "home-of-user"
    outside.mkdir()
    (outside / "id_secret").write_text("the user's private key\n")
    git(repo, "--work-tree", str(outside), "add", "id_secret")
    (outside / "id_secret").write_text("the user's private key, edited\n")
    git(repo, "config", "core.worktree", str(outside))
    assert "private key, edited" in git(repo, "diff").stdout  # the trap: plain git reads outside
    ctx = ctx_for(repo)
    for call in (lambda: git_status(ctx), lambda: git_diff(ctx), lambda: git_blame(ctx, "id_secret")):
        with pytest.raises(ToolFailed, match="core.worktree"):
            await call()
    assert "private key" not in staged_diff_or_error(repo)
    assert git_summary(repo, timeout=20) == ""


def staged_diff_or_error(root: Path) -> str:
    try:
        return staged_diff(root)
    except ToolFailed as exc:
        return exc.message


async def test_a_submodule_work_tree_set_by_core_worktree_still_works(repo: Path, tmp_path: Path) -> None:
    """Submodules keep core.worktree in .git/modules/…/config pointing back at themselves."""
    sub = tmp_path / "sub2"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    (sub / "y.txt").write_text("yankee\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "sub")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sm2")
    assert git(repo / "sm2", "config", "core.worktree").stdout.strip()
    (repo / "sm2" / "y.txt").write_text("yankee\nzulu\n")
    assert "+zulu" in await git_diff(ctx_for(repo / "sm2"))


def test_every_configured_program_key_gets_a_neutral_value() -> None:
    assert neutral_value("filter.Any Name.clean") == ""
    assert neutral_value("filter.x.process") == ""
    assert neutral_value("filter.a.b.clean") == ""  # a filter name holding a dot
    assert neutral_value("filter.x.required") == "false"
    assert neutral_value("pager.log") == "false"
    assert neutral_value("credential.https://h.example.helper") == ""
    assert neutral_value("gpg.ssh.program") == "/dev/null"
    assert neutral_value("protocol.ext.allow") == "never"
    assert neutral_value("user.name") is None and neutral_value("diff.x.xfuncname") is None


# ------------------------------------------------------------------ the real binary


def test_headless_run_with_every_git_tool_runs_no_repository_program(repo: Path, traps: Traps, preloaded_ketch: object) -> None:
    """``ketch -p`` (no --yolo) in a hostile clone: the per-step git summary and all five
    tools run, and none of the programs the repository's config names does. A ketch process of
    its own, forked from the preloaded interpreter (test_git_hostile_e2e runs the binary itself)."""
    from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
    from kettle import adhoc, run_ketch

    (repo / ".gitattributes").write_text("*.txt filter=trap diff=trap\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attrs")
    for key, name in [("filter.trap.clean", "clean"), ("filter.trap.process", "process"),
                      ("diff.trap.textconv", "textconv"), ("diff.trap.command", "diff-driver"),
                      ("diff.external", "diff-external"), ("core.fsmonitor", "fsmonitor"),
                      ("core.pager", "pager"), ("gpg.program", "gpg")]:
        git(repo, "config", key, traps.program(name))
    git(repo, "config", "log.showSignature", "true")
    touch_same_size(repo / "a.txt")
    armed(traps, git(repo, "status", check=False), git(repo, "diff", check=False), git(repo, "blame", "a.txt", check=False))
    touch_same_size(repo / "a.txt")
    calls = [ToolCall("git_status", {}), ToolCall("git_diff", {}), ToolCall("git_diff", {"ref": "HEAD~2"}),
             ToolCall("git_log", {}), ToolCall("git_show", {"ref": "HEAD~1"}), ToolCall("git_blame", {"path": "a.txt"})]
    with FakeProvider([Turn(tool_calls=calls), Turn(text="Looked.")]) as fake:
        run = run_ketch(["-p", "look at the repository", *adhoc(fake, "openai-chat")], repo, forked_from=preloaded_ketch)
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "Looked."
    assert traps.fired() == []
    results = dict(tool_results(fake.model_requests[1]))
    assert len(results) == 6 and all("failed" not in text for text in results.values()), results
    assert any("+again" in text for text in results.values())  # git_diff HEAD~2 really ran


async def test_the_commit_message_helper_runs_no_repository_program(repo: Path, traps: Traps) -> None:
    """``/commit``'s helper reads the staged diff of a hostile repository: the provider gets
    the real diff (no textconv output), and no program the config names runs."""
    from fakeprovider import FakeProvider, Turn, user_texts

    from ketch.core.commit import propose_for_repo
    from ketch.config.settings import load_config, resolve_connection
    from ketch.providers.models import build_model

    (repo / ".gitattributes").write_text("*.txt filter=trap diff=trap\n")
    for key, name in [("filter.trap.clean", "clean"), ("diff.trap.textconv", "textconv"),
                      ("diff.trap.command", "diff-driver"), ("diff.external", "diff-external"),
                      ("core.fsmonitor", "fsmonitor")]:
        git(repo, "config", key, traps.program(name))
    (repo / "b.txt").write_text("bravo\nstaged line\n")
    git(repo, "add", "b.txt", ".gitattributes")
    armed(traps)  # git add ran the clean filter: the trap is live
    touch_same_size(repo / "a.txt")
    with FakeProvider([Turn(text="Add a staged line")]) as fake:
        conn = resolve_connection(load_config(repo, {}), "fake-model", base_url=fake.base_url, wire="openai-chat")
        message = await propose_for_repo(build_model(conn), repo)
    assert message == "Add a staged line\n"
    assert traps.fired() == []
    [request] = fake.model_requests
    assert any("+staged line" in text and "b/b.txt" in text for text in user_texts(request))


async def test_an_embedded_bare_repository_as_the_workspace_is_refused(repo: Path, tmp_path: Path, traps: Traps) -> None:
    """A folder laid out as a bare repository (HEAD, objects/, refs/, a plain ``config`` file
    anyone can commit) is a repository to git; its config names a gpg program here."""
    bare = tmp_path / "vendored"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True, capture_output=True)
    body = git(bare, "cat-file", "commit", "HEAD").stdout
    head, _, message = body.partition("\n\n")
    signed = f"{head}\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n AAAA\n -----END PGP SIGNATURE-----\n\n{message}"
    made = subprocess.run(["git", "-C", str(bare), "hash-object", "-t", "commit", "-w", "--stdin"], input=signed,
                          capture_output=True, text=True, check=True).stdout.strip()
    git(bare, "update-ref", "refs/heads/main", made)
    with open(bare / "config", "a") as config:
        config.write(f"[log]\n\tshowSignature = true\n[gpg]\n\tprogram = {traps.program('bare-gpg')}\n")
    armed(traps, git(bare, "log", check=False))
    ctx = ctx_for(bare)
    for call in (lambda: git_log(ctx), lambda: git_show(ctx)):
        with pytest.raises(ToolFailed):
            await call()
    assert traps.fired() == []


async def test_an_unreadable_config_stops_the_read_with_git_s_reason(repo: Path) -> None:
    with open(repo / ".git" / "config", "a") as config:
        config.write("[broken\n")
    with pytest.raises(ToolFailed, match="git status failed: the repository's git config could not be read"):
        await git_status(ctx_for(repo))


def _gits_in(root: Path) -> list[psutil.Process]:
    found = []
    for proc in own_processes():  # this test's tree: the tool runs git in this process
        try:
            if proc.name() == "git" and str(root) in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture
def hanging(repo: Path) -> Path:
    """A repository whose object store makes git block forever (alternates is a FIFO)."""
    alternates = repo / ".git" / "objects" / "info" / "alternates"
    alternates.unlink(missing_ok=True)
    os.mkfifo(alternates)
    return repo


async def test_a_git_read_that_hangs_is_killed_at_its_timeout(hanging: Path) -> None:
    ctx = ctx_for(hanging)
    ctx.deps.settings.shell_timeout_s = 1.0
    with pytest.raises(ToolFailed, match=r"git log failed: did not finish in 1 s"):
        await git_log(ctx)
    assert _gits_in(hanging) == []


async def test_a_cancelled_git_read_leaves_no_git_running(hanging: Path) -> None:
    task = asyncio.create_task(git_log(ctx_for(hanging)))
    deadline = time.monotonic() + 10
    while not _gits_in(hanging) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert _gits_in(hanging), "git never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 2
    while _gits_in(hanging) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert _gits_in(hanging) == []

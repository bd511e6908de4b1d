"""Read-only git tools: git_status, git_diff, git_log, git_show, git_blame.

Each runs ``git -C <root> --no-pager`` with a fixed argv and no shell, through the hardened
launcher in ``gitsafe`` (no program the repository's config names can run: filters,
fsmonitor, external diff, textconv, pager, hooks, transports and their helpers). Refs and
paths that start with ``-`` are refused (they would be read as options), paths go through
the workspace jail and come after ``--``, and output is capped while it is read (git is
stopped at the cap). ``staged_diff`` is the synchronous helper the commit-message feature uses.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.sandbox.runtime import launch_argv
from ketch.tools.workspace import Workspace
from ketch.tools.base import ToolDeps, ToolSpec
from ketch.tools.gitsafe import DIFF_FLAGS, SUBMODULE_FLAGS, GitLaunchError, GitResult, run_git, stop

LOG_MAX = 200
STAGED_DIFF_TIMEOUT_S = 60.0


class GitError(ToolFailed):
    """git refused an argument or exited with an error."""


def _failure(command: str, stderr: str) -> GitError:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    line = next((l for l in lines if l.startswith(("fatal:", "error:"))), lines[0] if lines else "")
    detail = line.removeprefix("fatal:").removeprefix("error:").strip() or "unknown error"
    return GitError(f"git {command} failed: {detail}")


def _checked(command: str, run: Callable[[], GitResult]) -> GitResult:
    try:
        result = run()
    except GitLaunchError as exc:
        message = str(exc)
        raise GitError(message if message.startswith("git ") else f"git {command} failed: {message}.") from exc
    if result.returncode != 0 and not result.truncated:
        raise _failure(command, result.stderr.decode("utf-8", "replace"))
    return result


def staged_diff(root: Path | str, max_bytes: int = 4 * 1024 * 1024) -> str:
    """The staged changes of the repository at ``root`` as a unified diff ('' when none).

    Runs through the hardened launcher (no repository program runs); at most ``max_bytes``.
    """
    result = _checked("diff --cached", lambda: run_git(
        root, ["diff", "--cached", *DIFF_FLAGS, *SUBMODULE_FLAGS], timeout_s=STAGED_DIFF_TIMEOUT_S,
        max_bytes=max_bytes))
    return result.stdout.decode("utf-8", "replace")


def check_ref(ref: str, what: str = "ref") -> str:
    """Refuse a ref that git could read as an option (leading '-') or that holds a NUL."""
    if not ref.strip():
        raise GitError(f"The {what} is empty.")
    if ref.startswith("-"):
        raise GitError(f"The {what} {ref!r} starts with '-'; options cannot be passed as a {what}.")
    if "\x00" in ref or "\n" in ref:
        raise GitError(f"The {what} {ref!r} contains a control character.")
    return ref


def jailed_pathspec(workspace: Workspace, path: str) -> str:
    """A path argument for git: refused when it starts with '-', jailed, relative to the root."""
    if path.startswith("-"):
        raise GitError(f"The path {path!r} starts with '-'; give a file or directory path.")
    resolved = workspace.resolve(path)
    shown = workspace.relative(resolved)
    return shown


async def _run_git(ctx: RunContext[ToolDeps], command: str, *args: str) -> str:
    """Run one read-only git command at the workspace root; capped output or GitError."""
    root = ctx.deps.workspace.root
    sandbox = getattr(ctx.deps.settings, "sandbox", None)

    def wrap(argv: list[str]) -> list[str]:
        return launch_argv(sandbox, argv, root, read_only=True)

    cap = ctx.deps.settings.shell_output_cap
    started: list[subprocess.Popen[bytes]] = []
    cancelled = threading.Event()

    def on_start(process: subprocess.Popen[bytes]) -> None:
        started.append(process)
        if cancelled.is_set():  # the call was cancelled while this thread was between launches
            stop(process)

    job = asyncio.ensure_future(asyncio.to_thread(
        _checked, command, lambda: run_git(
            root, args, timeout_s=ctx.deps.settings.shell_timeout_s,
            max_bytes=cap * 4 + 4096, on_start=on_start, wrap=wrap if sandbox is not None else None)))
    try:
        result = await asyncio.shield(job)
    except asyncio.CancelledError:
        cancelled.set()
        for process in list(started):
            stop(process)
        raise
    text = result.stdout.decode("utf-8", "replace")
    if len(text) > cap or result.truncated:
        more = f"{len(text) - cap:,}" + ("+" if result.truncated else "")
        text = text[:cap] + f"\n(output truncated: {more} more characters; narrow it with a path or ref)"
    return text


def _paths(ctx: RunContext[ToolDeps], path: str | None) -> list[str]:
    return ["--"] if not path else ["--", jailed_pathspec(ctx.deps.workspace, path)]


async def git_status(ctx: RunContext[ToolDeps]) -> str:
    """Show the current branch and which files are modified, staged or untracked."""
    text = await _run_git(ctx, "status", "status", "--short", "--branch", *SUBMODULE_FLAGS)
    lines = text.rstrip("\n").splitlines()
    if len(lines) <= 1:
        lines.append("(working tree clean)")
    return "\n".join(lines)


async def git_diff(
    ctx: RunContext[ToolDeps], staged: bool = False, ref: str | None = None, path: str | None = None,
    stat: bool = False,
) -> str:
    """Show changes as a unified diff: unstaged by default, staged, or against a ref or range.

    Args:
        staged: Show staged changes (the index) instead of unstaged ones.
        ref: A commit to compare with, or a range such as 'main..HEAD' or 'HEAD~3'.
        path: Limit the diff to this file or directory.
        stat: Show only a summary of changed files.
    """
    args = ["diff", *DIFF_FLAGS, *SUBMODULE_FLAGS]
    if staged:
        args.append("--cached")
    if stat:
        args.append("--stat")
    if ref:
        args.append(check_ref(ref))
    text = await _run_git(ctx, "diff", *args, *_paths(ctx, path))
    return text or "No changes."


async def git_log(
    ctx: RunContext[ToolDeps], ref: str | None = None, path: str | None = None, max_count: int = 20,
) -> str:
    """List commits, newest first: short hash, date, author, refs and subject.

    Args:
        ref: Branch, commit or range to list (default: the current branch).
        path: Only commits that touched this file or directory.
        max_count: Most commits to list (up to 200).
    """
    count = max(1, min(int(max_count), LOG_MAX))
    args = ["log", *DIFF_FLAGS, f"--max-count={count}", "--date=short", "--format=%h %ad %an%d %s"]
    if ref:
        args.append(check_ref(ref))
    text = await _run_git(ctx, "log", *args, *_paths(ctx, path))
    return text.rstrip("\n") or "No commits."


async def git_show(ctx: RunContext[ToolDeps], ref: str = "HEAD", path: str | None = None, stat: bool = False) -> str:
    """Show one commit (message and patch), or a file at a revision with 'REV:path'.

    Args:
        ref: Commit to show, or 'REV:path' for a file's content at that revision.
        path: Limit the patch to this file or directory.
        stat: Show only the changed-files summary instead of the patch.
    """
    args = ["show", *DIFF_FLAGS]
    if stat:
        args.append("--stat")
    args.append(check_ref(ref))
    return await _run_git(ctx, "show", *args, *_paths(ctx, path))


async def git_blame(
    ctx: RunContext[ToolDeps], path: str, start_line: int | None = None, end_line: int | None = None,
    ref: str | None = None,
) -> str:
    """Show who last changed each line of a file, and in which commit.

    Args:
        path: File to annotate.
        start_line: First line (1-based) of the range to annotate.
        end_line: Last line of the range to annotate.
        ref: Annotate the file as of this commit instead of the working tree.
    """
    args = ["blame", "--no-textconv", "--date=short"]
    if start_line is not None or end_line is not None:
        first = max(1, start_line or 1)
        args.append(f"-L{first},{end_line}" if end_line is not None else f"-L{first},")
    if ref:
        args.append(check_ref(ref))
    return await _run_git(ctx, "blame", *args, *_paths(ctx, path))


TOOLS: list[ToolSpec] = [
    ToolSpec("git_status", git_status, "read", ""),
    ToolSpec("git_diff", git_diff, "read", "path"),
    ToolSpec("git_log", git_log, "read", "path"),
    ToolSpec("git_show", git_show, "read", "ref"),
    ToolSpec("git_blame", git_blame, "read", "path"),
]

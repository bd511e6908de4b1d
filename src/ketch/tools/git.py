"""Read-only git tools: git_status, git_diff, git_log, git_show, git_blame.

Each runs ``git -C <root> --no-pager`` with a fixed argv and no shell. Refs and paths that
start with ``-`` are refused (they would be read as options), paths go through the
workspace jail and come after ``--``, and output is capped. Repository configuration that
could run programs on a read (fsmonitor, external diff drivers, textconv filters) is
switched off. ``staged_diff`` is the synchronous helper the commit-message feature uses.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.sandbox.runtime import launch_argv
from ketch.tools.workspace import Workspace
from ketch.tools.base import ToolDeps, ToolSpec

SAFE_CONFIG = ("-c", "core.fsmonitor=false", "-c", "core.quotePath=false", "-c", "color.ui=never")
NO_PROGRAMS = ("--no-ext-diff", "--no-textconv")
LOG_MAX = 200


class GitError(ToolFailed):
    """git refused an argument or exited with an error."""


def _git_argv(root: Path | str, *args: str) -> list[str]:
    return ["git", "-C", str(root), "--no-pager", *SAFE_CONFIG, *args]


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(GIT_PAGER="cat", PAGER="cat", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    return env


def _failure(command: str, stderr: str) -> GitError:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    line = next((l for l in lines if l.startswith(("fatal:", "error:"))), lines[0] if lines else "")
    detail = line.removeprefix("fatal:").removeprefix("error:").strip() or "unknown error"
    return GitError(f"git {command} failed: {detail}")


def staged_diff(root: Path | str) -> str:
    """The staged changes of the repository at ``root`` as a unified diff ('' when none)."""
    try:
        result = subprocess.run(
            _git_argv(root, "diff", "--cached", *NO_PROGRAMS),
            capture_output=True, env=_git_env(), stdin=subprocess.DEVNULL, timeout=60,
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH.") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError("git diff --cached did not finish in 60 s.") from exc
    if result.returncode != 0:
        raise _failure("diff --cached", result.stderr.decode("utf-8", "replace"))
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
    argv = launch_argv(getattr(ctx.deps.settings, "sandbox", None), _git_argv(root, *args), root, read_only=True)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=_git_env(),
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH.") from exc
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), ctx.deps.settings.shell_timeout_s)
    except asyncio.TimeoutError as exc:
        process.kill()
        await process.wait()
        raise GitError(f"git {command} did not finish in {ctx.deps.settings.shell_timeout_s:.0f} s.") from exc
    except asyncio.CancelledError:
        process.kill()
        await process.wait()
        raise
    if process.returncode != 0:
        raise _failure(command, stderr.decode("utf-8", "replace"))
    text = stdout.decode("utf-8", "replace")
    cap = ctx.deps.settings.shell_output_cap
    if len(text) > cap:
        text = text[:cap] + f"\n(output truncated: {len(text) - cap:,} more characters; narrow it with a path or ref)"
    return text


def _paths(ctx: RunContext[ToolDeps], path: str | None) -> list[str]:
    return ["--"] if not path else ["--", jailed_pathspec(ctx.deps.workspace, path)]


async def git_status(ctx: RunContext[ToolDeps]) -> str:
    """Show the current branch and which files are modified, staged or untracked."""
    text = await _run_git(ctx, "status", "status", "--short", "--branch")
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
    args = ["diff", *NO_PROGRAMS]
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
    args = ["log", *NO_PROGRAMS, f"--max-count={count}", "--date=short", "--format=%h %ad %an%d %s"]
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
    args = ["show", *NO_PROGRAMS]
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

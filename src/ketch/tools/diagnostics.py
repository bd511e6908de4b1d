"""Diagnostics from language servers: what an edit adds to its result, the ``diagnostics``
tool, and the wiring that builds the session's pool (``ketch.lsp``) with the sandbox's
launcher and the key-free environment.

A server is started like a read-only command: inside the sandbox policy with no write and
no network, with the environment shell commands get (no provider keys). Where the policy
wants confinement and no mechanism works, servers are not started at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.lsp.client import LaunchPlan, Launcher
from ketch.lsp.pool import LanguageServers, LaunchRefused
from ketch.lsp.servers import settings_from
from ketch.tools.base import ToolDeps, ToolSpec
from ketch.tools.child_env import child_environment
from ketch.tools.disk import exists, read_text

EXTRA = "lsp"
"""The pool's name in ``ToolDeps.extras``."""


def launcher(sandbox: Any, child_env: Any) -> Launcher:
    """How the pool starts a server: the sandbox's read-only, offline argv and the child environment."""

    def plan(argv: Sequence[str], cwd: Path) -> LaunchPlan:
        env = child_environment(child_env)
        if sandbox is None or not sandbox.policy.confined:
            return LaunchPlan(list(argv), env, False)
        if sandbox.fail_closed:
            raise LaunchRefused("no sandbox mechanism works here, and language servers are never started unconfined")
        try:
            launch = sandbox.wrap(argv, cwd=cwd, read_only=True, network=False)
        except (OSError, ValueError) as exc:
            raise LaunchRefused(f"the sandbox could not be set up for it ({exc})") from exc
        return LaunchPlan(launch.argv, env, launch.confined)

    return plan


def language_servers(table: dict[str, Any], root: Path, sandbox: Any, child_env: Any) -> LanguageServers:
    """The session's pool from config's ``[lsp]`` table; nothing starts until a file is edited."""
    return LanguageServers(lambda: settings_from(table), root, launcher(sandbox, child_env))


async def after_edit(ctx: RunContext[ToolDeps], resolved: Path, shown: str, old: str | None, new: str) -> str:
    """The text an edit's result gains (with a blank line before it), '' for nothing to add."""
    pool: LanguageServers | None = ctx.deps.extras.get(EXTRA)
    if pool is None or not pool.serves(resolved) or old == new:
        return ""
    try:
        text = await pool.after_edit(resolved, shown, old, new, ctx.deps.emit)
    except (OSError, ValueError, RuntimeError) as exc:  # the edit is done: say why no diagnostics came, never fail it
        text = f"(no diagnostics: asking the language server failed: {type(exc).__name__}: {exc})"
    return f"\n\n{text}" if text else ""


async def diagnostics(ctx: RunContext[ToolDeps], path: str) -> str:
    """The errors and warnings a language server reports for a file as it is now.

    Args:
        path: File path, relative to the workspace root or absolute.
    """
    pool: LanguageServers | None = ctx.deps.extras.get(EXTRA)
    workspace = ctx.deps.workspace
    resolved = workspace.resolve(path, must_exist=True)
    shown = workspace.relative(resolved)
    if pool is None or not pool.settings.enabled:
        raise ToolFailed("Language servers are turned off ([lsp] enabled = false).")
    place = workspace.where(resolved)
    if not exists(place):
        raise ToolFailed(f"{shown} does not exist.")
    return await pool.current(resolved, shown, read_text(place, shown), ctx.deps.emit)


TOOLS: list[ToolSpec] = [ToolSpec("diagnostics", diagnostics, "read", "path")]

"""The shell tool's side of the sandbox: how a command is launched, and what happens when
the sandbox refused part of it.

A refusal (a write outside the writable places, a network connection with the network off)
is reported to the model as such. Under ``approval = auto`` in an interactive session the
user is offered to run the same command again outside the sandbox, once or for the rest of
the session (an ``ApprovalRequested`` for ``shell`` with ``outside_sandbox`` in its args);
under ``never`` that offer is never made and the result says why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from ketch.protocol.events import Notice
from ketch.sandbox.runtime import Launch

OUTSIDE_MARK = "outside_sandbox_once"


def shell_launch(deps: Any, call_id: str, command: str, argv: Sequence[str], cwd: Path | str) -> Launch:
    """How to start this shell command: sandboxed, unless nothing confines or the user let
    this command (for the session) or this call (once) run outside the sandbox."""
    sandbox = getattr(deps.settings, "sandbox", None)
    if sandbox is None:
        return Launch(list(argv), confined=False)
    once: set[str] = deps.extras.setdefault(OUTSIDE_MARK, set())
    if call_id in once or command.strip() in sandbox.escalated:
        once.discard(call_id)
        return Launch(list(argv), confined=False)
    try:
        return sandbox.wrap(argv, cwd=cwd)
    except (OSError, ValueError) as exc:  # a policy the mechanism cannot express: never run it bare
        from pydantic_ai.exceptions import ToolFailed

        raise ToolFailed(f"The sandbox could not be set up for this command: {exc}") from exc


def _refusal_note(sandbox: Any, what: str) -> str:
    policy = sandbox.policy
    roots = ", ".join(str(r) for r in policy.roots_for_writes()) or "nothing"
    net = "on" if policy.network else "off"
    return (
        f"[the sandbox refused {what}. Commands here may write only: {roots} and a private /tmp "
        f"(run-later paths such as .git stay read-only); the network is {net}.]"
    )


async def after_shell(
    deps: Any, call_id: str, command: str, launch: Launch, output: str, result: str, rerun: Callable[[], Awaitable[str]]
) -> str:
    """The shell tool's result once the sandbox's part is settled (possibly a rerun outside it)."""
    sandbox = getattr(deps.settings, "sandbox", None)
    if sandbox is None or not launch.confined:
        return result
    created = sandbox.created_run_later(launch)
    if created:
        shown = ", ".join(str(p) for p in created)
        warning = (
            f"this command created {shown}: such paths make the repository run code later (git, direnv, an "
            "editor, CI); only those that existed before were read-only. Check them before you run anything there."
        )
        deps.emit(Notice(level="warning", text=f"Sandbox: {warning}"))
        result = f"{result}\n[warning: {warning}]"
    what = sandbox.refusal(output)
    if not what:
        return result
    note = _refusal_note(sandbox, what)
    if sandbox.approval == "never":
        return f"{result}\n{note}\n[approval = never: running it outside the sandbox would need the user's approval, so it was not offered.]"
    escalate = deps.extras.get("escalate")
    if sandbox.approval != "auto" or escalate is None:
        return f"{result}\n{note}\n[to run it unconfined the user must allow it: --approval auto offers that, --sandbox full-access runs every command unconfined.]"
    decision = await escalate(call_id, command, what)
    if decision == "deny":
        return f"{result}\n{note}\n[the user declined to run it outside the sandbox; do not try to get around the sandbox.]"
    if decision == "allow_session":
        sandbox.escalated.add(command.strip())
    deps.extras.setdefault(OUTSIDE_MARK, set()).add(call_id)
    again = await rerun()
    return f"[the sandbox refused {what}; the user let it run again outside the sandbox:]\n{again}"

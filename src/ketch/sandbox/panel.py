"""The ``/sandbox`` (``/permissions``) panel: one answer to "what may ketch change?"."""

from __future__ import annotations

from typing import Any

_APPROVAL = {
    "ask": "ask: every command and file change asks, sandboxed or not, unless a rule allows it",
    "auto": "auto: commands that run sandboxed, and file changes the sandbox allows, need no prompt; "
    "what would leave the sandbox asks",
    "never": "never: nothing asks; sandboxed commands and allowed writes run, what would need a prompt is denied",
    "plan": "plan: only reading tools run; every write, command or other changing call is refused",
}


def permissions_panel(sandbox: Any, *, yolo: bool = False) -> list[str]:
    """The lines of the panel for a session's ``Sandbox``."""
    if sandbox is None:
        return ["No sandbox in this session: commands run unconfined."]
    policy = sandbox.current_policy()
    lines = ["What ketch may change:"]
    lines += [f"  {line}" for line in sandbox.describe()]
    if policy.mode == "read-only":
        files = "file tools: no writes (read-only mode)"
    elif policy.mode == "full-access":
        files = "file tools: the workspace and added directories; run-later paths (.git, .ketch, workflows, ...) ask"
    else:
        files = "file tools: the same writable places; run-later paths (.git, .ketch, workflows, ...) ask"
    lines.append(f"  {files}")
    lines.append("  approvals: " + ("--yolo: nothing asks; guards still refuse" if yolo else _APPROVAL.get(sandbox.approval, sandbox.approval)))
    return lines


async def session_panel_text(session: Any) -> str:
    """``/sandbox`` as the slash actions print it, for a live session."""
    return "\n".join(permissions_panel(getattr(session, "sandbox", None), yolo=bool(getattr(session.gate, "yolo", False))))

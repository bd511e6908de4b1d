"""What a session uses and does not change: built once by the composition root, never reassigned.

``frontends/assemble.py`` (and ``core/subagent.py`` for a child) builds the store, the gate, the
user hooks, the MCP hub, the sandbox, the checkpoints, the background jobs and the closers first,
and hands them to ``Session`` as one frozen :class:`SessionServices`. What ``/model``, ``/agent``,
``/clear`` and ``/fork`` change is the session's own state, not these. The session reads each
service through a read-only attribute (:func:`service`), so ``session.store = …`` after
construction is an error, not a silent rewiring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False)
class SessionServices:
    """The services of one session. A child session (a subagent) gets its own, most of them
    shared with its parent (the gate, the key ring) or narrowed (the hooks)."""

    gate: Any
    """The ``gate.approval.ApprovalGate`` every tool call passes."""
    store: Any = None
    """The ``state.store.Store``; None for a session that is never stored (a subagent)."""
    hooks: Any = None
    """User hooks (``extensions.hooks.HookRunner``): told when a prompt is submitted, a tool
    finished and a turn stopped. Refusals before a tool run through the gate."""
    mcp_hub: Any = None
    sandbox: Any = None
    """The ``sandbox.runtime.Sandbox`` commands run in (its policy is read by the UI's panel)."""
    checkpoints: Any = None
    """Snapshots of the workspace around every turn, for /rewind (``checkpoints.rewind``)."""
    background: Any = None
    """The ``tools.background.BackgroundJobs`` the session lists and stops when it closes."""
    key_ring: Any = None
    """The keys this run holds (``config/keyring.py``): removed from every view derived from a
    tool's input or output (its arguments as shown, a diff, a preview, a summary)."""
    live_search: Any = None
    """What the session's hosted search tool and prompt read per request (``/model`` replaces
    what it holds, not the holder)."""
    claim: Callable[[str], None] | None = None
    """Takes the write lock of a session before the session moves to it (``/resume``, ``/fork``)."""
    closers: tuple[Callable[[], Any], ...] = ()
    """Run in reverse order by ``Session.aclose``, once."""


def service(name: str) -> Any:
    """A read-only attribute of ``Session`` that reads ``self.services.<name>``."""

    def read(self: Any) -> Any:
        return getattr(self.services, name)

    read.__name__ = name
    read.__doc__ = f"``SessionServices.{name}`` (fixed for the session's life)."
    return property(read)


__all__ = ["SessionServices", "service"]

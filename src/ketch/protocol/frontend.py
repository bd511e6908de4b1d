"""What a front end (TUI, headless printer, tests) may call on a session.

Front ends see a session only through this protocol, the events in ``events.py`` and the
operations in ``operations.py`` they send it; they never import the model SDK. ``Session`` in ``session.py`` implements it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from ketch.protocol.events import AgentEvent, Decision
from ketch.protocol.operations import Operation


@dataclass
class SessionStatus:
    """What the status line and panels show."""

    session_id: str = ""
    stored: bool = True
    """Whether the session is in the store: a new one is written with its first message, and
    only then can it be resumed (the farewell names it only then)."""
    model: str = ""
    thinking: str = "off"
    agent: str = "build"
    approval: str = ""
    """The approval mode (ask, auto, plan, never; ``yolo``); empty when the session has no gate."""
    context_used_pct: float = 0.0
    context_tokens: int = 0
    context_window: int = 0
    cost_usd: float | None = 0.0
    """Session total in USD; None once any response had an unknown price."""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    """Of `input_tokens`, served from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Of `input_tokens`, written to the provider's prompt cache."""
    cwd: str = ""
    git_branch: str = ""
    tools: list[str] = field(default_factory=list)
    """Names of the tools offered on the next step."""
    todos: list[dict[str, str]] = field(default_factory=list)
    context_parts: dict[str, int] = field(default_factory=dict)
    """Token estimate by part (instructions, messages, tools) for /context."""
    prefix_break: str = ""
    """Why the last request did not extend the one before (the prompt cache restarted), for /context."""
    background: list[str] = field(default_factory=list)
    """The running background commands, one line each (id, command, how long)."""


class SessionLike(Protocol):
    def run_turn(self, prompt: str) -> AsyncIterator[AgentEvent]:
        """Run one turn; yields events until TurnFinished."""
        ...

    def decide(self, request_id: str, decision: Decision, reason: str = "") -> None:
        """Answer an ApprovalRequested event."""
        ...

    def answer(self, request_id: str, text: str) -> None:
        """Answer an AskRequested event."""
        ...

    def interrupt_command(self) -> bool:
        """Kill running shell commands (whole trees); False when none was running."""
        ...

    def cancel_turn(self) -> None:
        """Abort the running turn (Esc, SIGINT headless). What it did is kept: the prompt, every
        finished step, and the partial answer ending in ``turn_record.CANCELLED_MARKER``
        (``turn_record.is_cancelled_answer`` finds it in a replayed history); the turn ends with
        ``TurnFinished(reason="cancelled")``."""
        ...

    def status(self) -> SessionStatus: ...

    def apply(self, operation: Operation) -> str | None:
        """Change the session between turns as ``operation`` says (``/model``, ``/clear``, ``/fork`` …)."""
        ...

    def take_idle_events(self) -> list[AgentEvent]:
        """Events that happened between turns (a background command that ended), each once."""
        ...

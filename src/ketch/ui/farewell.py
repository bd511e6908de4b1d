"""What stays in the terminal after the app closes: id, cost, how to resume."""

from __future__ import annotations

from ketch.protocol.frontend import SessionStatus
from ketch.ui.statusline import format_cost


def farewell_lines(status: SessionStatus | None, program: str = "ketch") -> list[str]:
    """Session id, cost and the exact command that resumes the session."""
    if status is None or not status.session_id or not status.stored:
        return []  # a session that never stored a message has nothing to resume
    return [
        f"Session {status.session_id} · {format_cost(status.cost_usd)}",
        f"Resume with: {program} --resume {status.session_id}",
    ]

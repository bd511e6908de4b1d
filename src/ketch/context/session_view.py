"""The small view of a session that ``context`` works through, handed over by the session.

Compaction, the request retries and the small-window profile run inside a session's step. They
read a few live values (the id ``/clear`` changes, the model ``/model`` changes, the history, the
turn in progress) and ask for a few effects (an event, a stored history, a recorded prefix break,
an auxiliary call's cost). :class:`SessionView` is exactly that list, built by the session from
its own methods (``core.session.Session.context_view``); ``context`` never sees the session
object, so it cannot reach its private attributes, and ``core`` stays above ``context``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False)
class SessionView:
    """What ``context`` may read and do of one session. Each field is a function of the session,
    so a value read through the view is the session's current one."""

    session_id_now: Callable[[], str]
    model_now: Callable[[], Any]
    messages_now: Callable[[], list[Any]]
    compactor_now: Callable[[], Any]
    interactive: bool
    turn_id_now: Callable[[], str | None]
    """The turn in progress, or None between turns (``/compact``)."""
    delivered_now: Callable[[], bool]
    """Whether output of the turn in progress reached the front end (it cannot be unsent)."""
    first_compaction: Callable[[], bool]
    """Marks the turn in progress as compacted; True the first time in a turn."""
    emit: Callable[[Any], Any]
    persist: Callable[[list[Any]], Any]
    note_break: Callable[[str], None]
    """Records why a request's prefix changed (``core.prefix_keeper``)."""
    rewrote_history: Callable[[], None]
    """Tells the session its history was rewritten in place (the writer finds the changed rows)."""
    charge: Callable[[Any, float | None], None]
    """Adds an auxiliary response's usage and cost (None: unknown price) to the session's totals."""
    forget_request_size: Callable[[], None]
    """The last request's size no longer describes the history (the status estimates it)."""
    ask: Callable[[str, str, Sequence[str]], Awaitable[str]]
    """Asks the user a question with choices (interactive front ends)."""
    narrow_tools: Callable[[Sequence[str]], None]
    """Sets the most tools any step offers (instructions and wire narrow together)."""
    full_profile: Callable[[], tuple[str, list[Any]]]
    """The instructions and tool definitions the session's active tools send today."""

    @property
    def session_id(self) -> str:
        return self.session_id_now()

    @property
    def model(self) -> Any:
        return self.model_now()

    @property
    def messages(self) -> list[Any]:
        return self.messages_now()

    @property
    def compactor(self) -> Any:
        return self.compactor_now()

    def notify(self, level: str, text: str) -> None:
        """A notice to the session's front end."""
        from ketch.protocol import events as ev

        self.emit(ev.Notice(level=level, text=text))  # type: ignore[arg-type]

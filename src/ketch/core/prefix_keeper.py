"""Keeping every request an append-only extension of the one before, and saying why when not.

The provider's prompt cache serves a request's prefix only while it is byte-identical to what
was sent before. :class:`PrefixKeeper` is the session's part of that: before each request it
appends the state reminder that is due (``context.reminders``: the volatile state moved out of
the instructions), and it notices each change of what sits before the history (the
instructions, the tool set, the model) and each compaction, which it reports as a
``PrefixBreak`` event with its cause and keeps as ``last_break`` for ``/context``.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

from ketch.context.reminders import ReminderTracker, ToolTeller, append_reminder, starts_turn
from ketch.protocol import events as ev
from ketch.core import telemetry
from ketch.core.prompt import told_by_tool


def _sections(text: str) -> dict[str, str]:
    """The instructions by their ``# Title`` sections ("" for the text before the first)."""
    out: dict[str, str] = {}
    for index, chunk in enumerate(text.split("\n\n# ")):
        title, _, body = chunk.partition("\n") if index else ("", "", chunk)
        out[title] = out.get(title, "") + body
    return out


class PrefixKeeper:
    """One session's reminders and prefix-break record."""

    def __init__(self, volatile: Callable[[], MutableMapping[str, str]] | None, emit: Callable[..., Any],
                 tell: ToolTeller = told_by_tool) -> None:
        self.volatile = volatile
        """The volatile sections now (None: this session sends no reminders)."""
        self._emit = emit
        self._tracker = ReminderTracker(tell)
        self._instructions: str | None = None
        self._tools: tuple[str, ...] | None = None
        self.last_break: str = ""
        """The cause of the last prefix break in this process ("" when there was none)."""

    def note_break(self, cause: str) -> None:
        """Record a prefix break: the next request's cached prefix ends before ``cause``'s change."""
        self.last_break = cause
        telemetry.event("ketch.prefix_break", **{"ketch.cause": cause})
        self._emit(ev.PrefixBreak(cause=cause))

    @property
    def last_instructions(self) -> str | None:
        """The instructions last sent (None before the first request, or after ``forget``)."""
        return self._instructions

    def instructions(self, text: str) -> None:
        """The instructions about to be sent: a change from the last ones is a break."""
        last, self._instructions = self._instructions, text
        if last is None or last == text:
            return
        before, after = _sections(last), _sections(text)
        changed = [title or "base prompt" for title in dict.fromkeys([*before, *after]) if before.get(title) != after.get(title)]
        self.note_break("instructions changed: " + ", ".join(changed))

    def tools(self, names: Sequence[str]) -> None:
        """The tools about to be offered: another set than the last one is a break."""
        now = tuple(names)
        last, self._tools = self._tools, now
        if last is None or last == now:
            return
        added, removed = sorted(set(now) - set(last)), sorted(set(last) - set(now))
        what = "; ".join(x for x in (f"added {', '.join(added)}" if added else "", f"removed {', '.join(removed)}" if removed else "") if x)
        self.note_break("tool set changed: " + (what or "reordered"))

    def forget(self) -> None:
        """Another history or model follows (``/clear``, a switch, ``/model``): no comparison with before."""
        self._instructions = None
        self._tools = None

    def remind(self, ctx_messages: list[Any], request_messages: list[Any]) -> None:
        """Append the reminder that is due to the newest request of this request's messages and of
        the run's history (the same object in both, usually)."""
        if self.volatile is None:
            return
        text = self._tracker.due(request_messages, self.volatile(), turn_start=starts_turn(request_messages))
        if text is None:
            return
        targets = [request_messages] if ctx_messages is request_messages else [request_messages, ctx_messages]
        part = append_reminder(targets, text)
        if part is not None:
            self._tracker.sent(request_messages, len(request_messages) - 1, part)

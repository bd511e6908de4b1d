"""State reminders: the volatile state the instructions leave out, appended to the history.

The instructions stay byte-identical for a session so the provider's prompt cache serves the
whole prefix (``core.prompt``). What moves (date, git status, memory, task list) reaches the
model as a reminder: a ``UserPromptPart`` holding ``<system-reminder>`` text, added to the newest
request of a step when a section changed since the model last saw it, with only the sections
that changed. It stays in the history like any message, so the next request's cached prefix
holds it and a resumed session sends the same bytes. The instructions say what the block is, so
it carries no lead sentence of its own.

Nothing is said twice: a tool result that shows a section's value exactly (the task list after
``todo_write``) counts as telling the model, and the sections the model's own work moves within
a turn (:data:`AT_TURN_START`: its edits move the git status, its notes the memory) are said
again only at the start of a turn, or whenever the history holds no value of them.

A reminder is told apart from what the user typed by its exact frame (:func:`is_reminder`):
every turn boundary, replay, export and rewind skips it. What the model was last told is read
back from the history itself (:class:`ReminderTracker`), so resume, rewind and a compaction
that summarized old reminders or results away all lead to the state being sent again, never to
a change the model did not see.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart

REMINDER_OPEN = "<system-reminder>\n"
REMINDER_CLOSE = "\n</system-reminder>"
LEGACY_LEAD = "ketch's update of what it tracks for you (not typed by the user); it replaces earlier values of these items:\n"
"""The lead sentence reminders of earlier versions opened with (read back, never written)."""
SECTION_ORDER = ("Date", "Git", "Memory", "Task list", "Background commands")
"""The volatile sections, in the order a reminder lists them."""
AT_TURN_START = frozenset({"Git", "Memory"})
"""Sections the model's own tool calls move within a turn (it knows what it edited or noted):
said again at a turn's first request, or mid-turn only when the history holds no value of them."""

ToolTeller = Callable[[str, str], Mapping[str, str] | None]
"""``(tool name, result text)`` → the sections that result shows the model, exactly as
:func:`render_reminder` would carry them (None: none)."""


def is_reminder(part: Any) -> bool:
    """Whether ``part`` is a state reminder (not something the user typed)."""
    if part.__class__ is not UserPromptPart:
        return False
    content = part.content
    return content.__class__ is str and content.startswith(REMINDER_OPEN) and content.endswith(REMINDER_CLOSE)


def user_parts(message: Any) -> list[UserPromptPart]:
    """The user's own prompt parts of ``message`` (reminders left out)."""
    if not isinstance(message, ModelRequest):
        return []
    return [p for p in message.parts if isinstance(p, UserPromptPart) and not is_reminder(p)]


def starts_turn(messages: Sequence[ModelMessage]) -> bool:
    """Whether the newest message is a request carrying something the user typed (a turn's first
    request, or the user's word mid-turn)."""
    return bool(messages) and bool(user_parts(messages[-1]))


def render_reminder(sections: Mapping[str, str], lead: str = "") -> str:
    """The reminder text for ``sections`` (title → current value), in :data:`SECTION_ORDER`."""
    body = "\n".join(f"# {title}\n{sections[title]}" for title in SECTION_ORDER if title in sections)
    return f"{REMINDER_OPEN}{lead}{body}{REMINDER_CLOSE}"


def parse_reminder(text: str) -> dict[str, str] | None:
    """The sections a reminder's text holds, or None when they cannot be read back exactly
    (its text is not what :func:`render_reminder` makes of them)."""
    if not (text.startswith(REMINDER_OPEN) and text.endswith(REMINDER_CLOSE)):
        return None
    lead = LEGACY_LEAD if text.startswith(REMINDER_OPEN + LEGACY_LEAD) else ""
    head = REMINDER_OPEN + lead
    lines = text[len(head) : len(text) - len(REMINDER_CLOSE)].split("\n")
    sections: dict[str, list[str]] = {}
    order = list(SECTION_ORDER)
    current: str | None = None
    for line in lines:
        title = line[2:] if line.startswith("# ") else None
        if title is not None and title in order:  # a later section's header (each once, in order)
            del order[: order.index(title) + 1]
            current = title
            sections[current] = []
        elif current is None:
            return None
        else:
            sections[current].append(line)
    parsed = {title: "\n".join(body) for title, body in sections.items()}
    return parsed if render_reminder(parsed, lead) == text else None


class ReminderTracker:
    """What the history last told the model of each volatile section, and what is due now.

    The state is read from the history: the reminders in it and the tool results that show a
    section (``tell``). The messages read are remembered (how many, the last one) with the part
    that told each section; the next call reads only the messages added since, and everything
    again when one of those parts is gone or changed (a compaction, a pruned result, a rewind,
    another session).
    """

    def __init__(self, tell: ToolTeller | None = None) -> None:
        self._tell = tell
        self._known: dict[str, str] = {}
        self._sources: dict[str, tuple[int, Any, Any]] = {}
        """title → (message index, the part that told it, its content then)."""
        self._read_upto = 0
        self._last: Any = None

    def _valid(self, messages: Sequence[ModelMessage]) -> bool:
        if not self._read_upto or self._read_upto > len(messages) or messages[self._read_upto - 1] is not self._last:
            return False
        for index, part, content in self._sources.values():
            message = messages[index] if index < len(messages) else None
            if not isinstance(message, ModelRequest) or not any(p is part for p in message.parts) or part.content != content:
                return False
        return True

    def _told(self, part: Any) -> Mapping[str, str]:
        if is_reminder(part):
            return parse_reminder(part.content) or {}
        if self._tell is not None and part.__class__ is ToolReturnPart and part.content.__class__ is str:
            return self._tell(part.tool_name, part.content) or {}
        return {}

    def _read(self, messages: Sequence[ModelMessage], start: int) -> None:
        if start == 0:
            self._known, self._sources = {}, {}
        for index in range(start, len(messages)):
            message = messages[index]
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                for title, value in self._told(part).items():
                    if title in SECTION_ORDER:
                        self._known[title] = value
                        self._sources[title] = (index, part, part.content)
        self._read_upto = len(messages)
        self._last = messages[-1] if messages else None

    def due(self, messages: Sequence[ModelMessage], current: Mapping[str, str], *, turn_start: bool = True) -> str | None:
        """The reminder to append to ``messages`` for ``current`` (the sections as they are now),
        or None when the history already says all of it. Mid-turn (``turn_start`` false) the
        :data:`AT_TURN_START` sections the history already holds a value of are left out."""
        self._read(messages, self._read_upto if self._valid(messages) else 0)
        changed: dict[str, str] = {}
        for title in current:
            if not turn_start and title in AT_TURN_START and title in self._known:
                continue  # not read at all: ``current`` may compute a value only when asked (the git status)
            value = current[title]
            if self._known.get(title) != value:
                changed[title] = value
        return render_reminder(changed) if changed else None

    def sent(self, messages: Sequence[ModelMessage], index: int, part: UserPromptPart) -> None:
        """``part`` was added to ``messages[index]``: it is what the model was last told."""
        for title, value in (parse_reminder(part.content) or {}).items():
            self._known[title] = value
            self._sources[title] = (index, part, part.content)


def append_reminder(targets: Sequence[Sequence[ModelMessage]], text: str) -> UserPromptPart | None:
    """Add a reminder part with ``text`` to the newest request of each history in ``targets``
    (the same request object gets it once); returns the part, or None when a history does not
    end with a request."""
    newest = [messages[-1] if messages else None for messages in targets]
    if not all(isinstance(message, ModelRequest) for message in newest):
        return None
    part = UserPromptPart(text)
    done: list[Any] = []
    for message in newest:
        if not any(message is d for d in done):
            message.parts = [*message.parts, part]  # type: ignore[union-attr]
            done.append(message)
    return part


__all__ = [
    "AT_TURN_START",
    "REMINDER_CLOSE",
    "REMINDER_OPEN",
    "ReminderTracker",
    "SECTION_ORDER",
    "ToolTeller",
    "append_reminder",
    "is_reminder",
    "parse_reminder",
    "render_reminder",
    "starts_turn",
    "user_parts",
]

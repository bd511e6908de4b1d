"""State reminders: the volatile state the instructions leave out, appended to the history.

The instructions stay byte-identical for a session so the provider's prompt cache serves the
whole prefix (``core.prompt``). What moves (date, git status, memory, task list) reaches the
model as a reminder: a ``UserPromptPart`` holding ``<system-reminder>`` text, added to the newest
request of a step when a section changed since the last reminder, with only the sections that
changed. It stays in the history like any message, so the next request's cached prefix holds it
and a resumed session sends the same bytes.

A reminder is told apart from what the user typed by its exact frame (:func:`is_reminder`):
every turn boundary, replay, export and rewind skips it. What the model was last told is read
back from the reminders in the history itself (:class:`ReminderTracker`), so resume, rewind and
a compaction that summarized old reminders away all lead to the state being sent again, never
to a change the model did not see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

REMINDER_OPEN = "<system-reminder>\n"
REMINDER_CLOSE = "\n</system-reminder>"
REMINDER_LEAD = "ketch's update of what it tracks for you (not typed by the user); it replaces earlier values of these items:"
SECTION_ORDER = ("Date", "Git", "Memory", "Task list", "Background commands")
"""The volatile sections, in the order a reminder lists them."""


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


def render_reminder(sections: Mapping[str, str]) -> str:
    """The reminder text for ``sections`` (title → current value), in :data:`SECTION_ORDER`."""
    body = "\n".join(f"# {title}\n{sections[title]}" for title in SECTION_ORDER if title in sections)
    return f"{REMINDER_OPEN}{REMINDER_LEAD}\n{body}{REMINDER_CLOSE}"


def parse_reminder(text: str) -> dict[str, str] | None:
    """The sections a reminder's text holds, or None when they cannot be read back exactly
    (its text is not what :func:`render_reminder` makes of them)."""
    head = REMINDER_OPEN + REMINDER_LEAD + "\n"
    if not (text.startswith(head) and text.endswith(REMINDER_CLOSE)):
        return None
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
    return parsed if render_reminder(parsed) == text else None


class ReminderTracker:
    """What the history last told the model of each volatile section, and what is due now.

    The state is read from the reminders in the messages (newest first, until every section is
    found). It is kept with the part that carried the newest one and its position, and read
    again only when that part is no longer there (a compaction, a rewind, another session).
    """

    def __init__(self) -> None:
        self._known: dict[str, str] = {}
        self._anchor: tuple[int, Any] | None = None

    def _valid(self, messages: Sequence[ModelMessage]) -> bool:
        if self._anchor is None:
            return False
        index, part = self._anchor
        if index >= len(messages):
            return False
        message = messages[index]
        return isinstance(message, ModelRequest) and any(p is part for p in message.parts)

    def _read(self, messages: Sequence[ModelMessage]) -> None:
        self._known, self._anchor = {}, None
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if not isinstance(message, ModelRequest):
                continue
            for part in reversed(message.parts):
                if not is_reminder(part):
                    continue
                if self._anchor is None:
                    self._anchor = (index, part)
                for title, value in (parse_reminder(part.content) or {}).items():
                    self._known.setdefault(title, value)
                if len(self._known) == len(SECTION_ORDER):
                    return

    def due(self, messages: Sequence[ModelMessage], current: Mapping[str, str]) -> str | None:
        """The reminder to append to ``messages`` for ``current`` (the sections as they are now),
        or None when the history already says all of it."""
        if not self._valid(messages):
            self._read(messages)
        changed = {title: value for title, value in current.items() if self._known.get(title) != value}
        return render_reminder(changed) if changed else None

    def sent(self, messages: Sequence[ModelMessage], index: int, part: UserPromptPart) -> None:
        """``part`` was added to ``messages[index]``: it is what the model was last told."""
        self._known.update(parse_reminder(part.content) or {})
        self._anchor = (index, part)


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
    "REMINDER_CLOSE",
    "REMINDER_OPEN",
    "ReminderTracker",
    "SECTION_ORDER",
    "append_reminder",
    "is_reminder",
    "parse_reminder",
    "render_reminder",
    "user_parts",
]

"""Keeping one session's stored history equal to the history in memory, at the cost of what changed.

The writer remembers which message objects (and their JSON) the store holds at each position.
Given the session's current history it serializes only messages that are new or not the very
object stored there, writes the rows whose JSON differs, and cuts rows past the end: a step
appends, and pruning that changed the stored prefix rewrites only the changed rows. The memory
of what is stored moves on only after the store committed, so a failed write is retried whole by
the next one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ketch.state.store_messages import serialize_messages

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

RECHECK_NEWEST = 2
"""The newest stored messages are compared by content even when they are the same objects: the
SDK fills in some fields of the newest request in place (run ids, metadata)."""


class HistoryWriter:
    """Writes one session's history to ``store`` (``None``: nothing is stored)."""

    def __init__(self, store: Any, session_id: str, stored: Sequence[ModelMessage] = ()) -> None:
        self.store = store
        self.session_id = session_id
        self._messages: list[ModelMessage] = list(stored)
        self._rows: list[str | None] = [None] * len(self._messages)  # None: read from the store when needed
        self._whole = False
        self._recheck = False
        if store is not None and self._messages:
            count, top = store.history_shape(session_id)
            self._whole = count != len(self._messages) or top != count - 1

    @property
    def stored_count(self) -> int:
        """How many messages the store holds for this session (as far as this writer knows)."""
        return len(self._messages)

    def stored(self) -> list[ModelMessage]:
        """The history as last committed."""
        return list(self._messages)

    def recheck(self) -> None:
        """The history in memory was changed in place (a repair at load, say): the next commit
        compares every message by content, not only those that are new objects."""
        self._recheck = True

    def commit(self, messages: Sequence[ModelMessage], events: Iterable[Any] = ()) -> None:
        """Make the stored history equal ``messages`` and append ``events``, in one transaction."""
        events = list(events)
        messages = list(messages)
        if self.store is None:  # a session that stores nothing (a subagent) pays nothing
            self._messages = messages
            return
        old = self._messages
        if self._recheck and not self._whole:
            self._rows = self.store.message_rows(self.session_id)[: len(old)]
            self._rows += [None] * (len(old) - len(self._rows))
        recheck = 0 if self._recheck else len(old) - RECHECK_NEWEST
        todo = [
            i for i, message in enumerate(messages)
            if self._whole or i >= len(old) or i >= recheck or message is not old[i]
        ]
        fresh = serialize_messages([messages[i] for i in todo]) if todo else []
        rows = self._rows[: len(messages)] + [None] * (len(messages) - len(old))
        changed: dict[int, str] = {}
        for i, row in zip(todo, fresh, strict=True):
            if not self._whole and i < len(old) and self._stored_row(i) == row:
                rows[i] = row
                continue
            changed[i] = row
            rows[i] = row
        if self.store is not None and (changed or events or len(messages) != len(old) or self._whole):
            self.store.write_history(self.session_id, changed, len(messages), events, whole=self._whole)
        self._messages, self._rows, self._whole, self._recheck = messages, rows, False, False

    def _stored_row(self, i: int) -> str | None:
        row = self._rows[i]
        if row is None and self.store is not None:
            row = self._rows[i] = self.store.message_row(self.session_id, i)
        return row

"""A session's history in the store: its messages (one row each, ``seq`` = position), the events
of its turns, and the tool calls waiting for a decision.

A mixin of ``Store`` (it needs the store's lock, connection, transactions and reserved ids).
Writes append: ``write_history`` stores the rows that are new or changed since the last write
and cuts rows past the history's end, so the cost of a step does not grow with the session.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ketch.protocol import strict_json
from ketch.state.store_errors import StoreError, brief

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

_LOAD_BATCH = 256
"""Rows decoded at a time when a session is loaded."""


def serialize_messages(messages: Sequence[ModelMessage]) -> list[str]:
    """Each message as its own JSON object, in the SDK's serialized form (fields at their plain
    default left out: see ``history_codec.encode_messages``)."""
    if not messages:
        return []
    from ketch.context.history_codec import encode_messages

    return encode_messages(messages)


def deserialize_messages(rows: Sequence[str]) -> list[ModelMessage]:
    """The inverse of ``serialize_messages``: the messages the SDK's adapter would give.

    ``history_codec`` builds the shapes it knows without the adapter's Python hooks and hands
    every other row to the adapter.
    """
    from ketch.context.history_codec import decode_messages

    return decode_messages(rows)


class MessageLog:
    """The history half of ``Store``."""

    _lock: Any
    _conn: sqlite3.Connection
    _reserved: dict[str, Any]
    path: Any

    def append_step(self, session_id: str, messages: Sequence[ModelMessage], events: Iterable[Any] = ()) -> None:
        """Add one finished step's new messages and events, atomically (with the session's
        row, when this is the first message of a reserved session)."""
        message_rows = serialize_messages(messages)
        with self._lock:
            seq, _ = self._last_message(session_id)
            self.write_history(
                session_id, {seq + 1 + i: row for i, row in enumerate(message_rows)}, seq + 1 + len(message_rows), events
            )

    def replace_history(self, session_id: str, messages: Sequence[ModelMessage]) -> None:
        """Swap the whole message history in one transaction (every row rewritten)."""
        message_rows = serialize_messages(messages)
        self.write_history(session_id, dict(enumerate(message_rows)), len(message_rows), whole=True)

    def write_history(
        self,
        session_id: str,
        rows: Mapping[int, str],
        length: int,
        events: Iterable[Any] = (),
        *,
        whole: bool = False,
    ) -> None:
        """In one transaction: store ``rows`` (position -> message JSON, new or changed), drop every
        row at or past ``length``, and append ``events``. ``whole`` first drops all rows (a history
        whose stored positions cannot be trusted). A reserved session that would store no message
        stays unwritten."""
        event_rows = [_event_json(e) for e in events]
        with self._lock:
            if length == 0 and session_id in self._reserved:
                return  # events of a turn that stored no message: the session stays unwritten
            with self.transaction() as conn:  # type: ignore[attr-defined]
                reserved = self._write_reserved(conn, session_id)  # type: ignore[attr-defined]
                _, step = _last_message(conn, session_id)
                if whole:
                    conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
                else:
                    conn.execute("DELETE FROM messages WHERE session_id = ? AND seq >= ?", (session_id, length))
                conn.executemany(  # a changed row keeps the step that first wrote it
                    "INSERT INTO messages (session_id, seq, step, data) VALUES (?,?,?,?)"
                    " ON CONFLICT (session_id, seq) DO UPDATE SET data = excluded.data",
                    [(session_id, seq, step + 1, data) for seq, data in sorted(rows.items())],
                )
                if event_rows:
                    (event_seq,) = conn.execute(
                        "SELECT COALESCE(MAX(seq), -1) FROM events WHERE session_id = ?", (session_id,)
                    ).fetchone()
                    conn.executemany(
                        "INSERT INTO events (session_id, seq, data) VALUES (?,?,?)",
                        [(session_id, event_seq + 1 + i, data) for i, data in enumerate(event_rows)],
                    )
                conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (time.time(), session_id))
            self._written(session_id, reserved)  # type: ignore[attr-defined]

    def history_shape(self, session_id: str) -> tuple[int, int]:
        """(rows, highest seq) of the session's history: positions are trustworthy when the
        highest seq is rows - 1."""
        with self._reading() as conn:  # type: ignore[attr-defined]
            count, top = conn.execute(
                "SELECT COUNT(*), COALESCE(MAX(seq), -1) FROM messages WHERE session_id = ?", (session_id,)
            ).fetchone()
        return int(count), int(top)

    def message_rows(self, session_id: str) -> list[str]:
        """The stored JSON of every message, in order."""
        with self._reading() as conn:  # type: ignore[attr-defined]
            rows = conn.execute("SELECT data FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
        return [row for (row,) in rows]

    def message_row(self, session_id: str, seq: int) -> str | None:
        """The stored JSON of one message, or None."""
        with self._reading() as conn:  # type: ignore[attr-defined]
            row = conn.execute("SELECT data FROM messages WHERE session_id = ? AND seq = ?", (session_id, seq)).fetchone()
        return row[0] if row else None

    def _last_message(self, session_id: str) -> tuple[int, int]:
        with self._reading() as conn:  # type: ignore[attr-defined]
            return _last_message(conn, session_id)

    def load_messages(self, session_id: str) -> list[ModelMessage]:
        """The session's messages in order, exactly as they were appended."""
        from ketch.context.collector import collector_paused

        query = "SELECT data FROM messages WHERE session_id = ? ORDER BY seq"
        messages: list[ModelMessage] = []
        try:
            # Reading and building a long history allocates much and frees nothing to collect.
            # Rows are decoded a few hundred at a time, so the memory of one batch of JSON text is
            # reused for the next instead of holding all of it (megabytes of fresh pages, each
            # one a page fault) until the end.
            with collector_paused(), self._lock:
                cursor = self._conn.execute(query, (session_id,))
                while batch := cursor.fetchmany(_LOAD_BATCH):
                    messages += deserialize_messages([row for (row,) in batch])
                    del batch
            return messages
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise StoreError(
                f"session {session_id} in {self.path} has a message this ketch cannot read ({first}); "
                "start a new session or upgrade ketch"
            ) from exc
        except sqlite3.Error as exc:  # a busy file, or a row SQLite cannot hand over as text
            raise StoreError(
                f"could not read session {session_id} from the session store {self.path} ({exc}); "
                "try again, or start a new session"
            ) from exc

    def load_events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's events in order, as the dicts ``event.to_dict()`` produced."""
        with self._reading() as conn:  # type: ignore[attr-defined]
            rows = conn.execute("SELECT data FROM events WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
        try:
            return [json.loads(r[0]) for r in rows]
        except ValueError as exc:
            raise StoreError(
                f"session {session_id} in {self.path} has an event this ketch cannot read ({brief(exc)}); "
                "the file may be damaged: start a new session, or move the store aside"
            ) from exc

    def set_pending(self, session_id: str, data: Any | None) -> None:
        """Record (or with ``None`` clear) the tool calls awaiting an approval decision."""
        with self.transaction() as conn:  # type: ignore[attr-defined]
            if data is None:
                conn.execute("DELETE FROM pending WHERE session_id = ?", (session_id,))
            else:
                conn.execute(
                    "INSERT OR REPLACE INTO pending (session_id, data) VALUES (?, ?)",
                    (session_id, strict_json.dumps(data, ensure_ascii=False)),
                )

    def get_pending(self, session_id: str) -> Any | None:
        """The pending approval recorded by ``set_pending``, or ``None``."""
        with self._reading() as conn:  # type: ignore[attr-defined]
            row = conn.execute("SELECT data FROM pending WHERE session_id = ?", (session_id,)).fetchone()
        return json.loads(row[0]) if row else None


def _last_message(conn: sqlite3.Connection, session_id: str) -> tuple[int, int]:
    """(seq, step) of the newest message, or (-1, -1): one index probe, whatever the history's length."""
    row = conn.execute(
        "SELECT seq, step FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1", (session_id,)
    ).fetchone()
    return (row[0], row[1]) if row else (-1, -1)


def _event_json(event: Any) -> str:
    """The event as JSON text SQLite can store: a lone surrogate (a file name or output that was
    not UTF-8) is written as its ``\\udcXX`` escape, which reads back as the same string."""
    data = event if isinstance(event, dict) else event.to_dict()
    text = strict_json.dumps(data, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return strict_json.dumps(data)
    return text

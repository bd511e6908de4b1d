"""The session store: one SQLite file holding sessions, their history and prompt history.

Every finished agent step is written in one transaction, so a process killed at any moment
leaves whole steps on disk and never half of one. The file runs in WAL mode with
``synchronous=NORMAL``: a committed transaction survives the process dying; only a power cut
may lose the last few commits, never corrupt older ones. A write that fails (disk full,
read-only, I/O error) is rolled back whole and reported as a one-line ``StoreError``; what was
committed before stays readable.

Messages are pydantic-ai ``ModelMessage`` objects stored one per row as the SDK's own JSON
(``ModelMessagesTypeAdapter``), so opaque provider payloads (ids, signatures, provider
details, native tool parts) come back exactly as they went in (``store_messages``).

A new conversation is only reserved at first (``reserve_session``): its id is chosen up front
and its row is written by the transaction that stores its first message, so a session that
never stored anything (the app quit before a prompt, ``/clear`` then quit, ``--resume``
then a pick) leaves no row behind.

The store refuses a file it cannot trust (not a database, or written by a newer ketch)
with a ``StoreError`` that names the path; such a file is never modified or recreated
(``store_schema``).

It is one thing at this length: the store's file, its sessions and its transactions;
schema, messages, prompt history and errors are modules beside it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ketch.state import store_schema as schema
from ketch.state.prompt_history import PromptHistory
from ketch.state.store_errors import BUSY_TIMEOUT_MS, StoreError, read_only, store_error, write_error
from ketch.state.store_messages import MessageLog, deserialize_messages, serialize_messages
from ketch.state.sql import run_script
from ketch.state.store_schema import DB_FILENAME, MIGRATIONS, SCHEMA_VERSION, SQLITE_HEADER, default_db_path

__all__ = [
    "DB_FILENAME",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "SQLITE_HEADER",
    "SessionRow",
    "Store",
    "StoreError",
    "default_db_path",
    "deserialize_messages",
    "new_session_id",
    "run_script",
    "serialize_messages",
]


@dataclass
class _Reserved:
    """A session whose id was handed out but whose row waits for its first message."""

    cwd: str
    model: str
    agent: str
    created: float
    parent_id: str | None = None
    title: str = ""
    think: str = ""


@dataclass(frozen=True)
class SessionRow:
    """One session as listed by the store (times are Unix seconds)."""

    id: str
    cwd: str
    title: str
    model: str
    agent: str
    created: float
    updated: float
    parent_id: str | None
    message_count: int = 0
    think: str = ""
    """The thinking level it was left at ("" when never recorded)."""


def new_session_id(after: str | None = None) -> str:
    """A short id that sorts by creation time: milliseconds in hex plus 16 random bits.

    Given the newest existing id, the result sorts after it even within one millisecond.
    """
    millis = time.time_ns() // 1_000_000
    if after:
        try:
            millis = max(millis, int(after[:11], 16) + 1)
        except ValueError:
            pass
    return f"{millis:011x}{secrets.token_hex(2)}"


class Store(MessageLog, PromptHistory):
    """A handle on the SQLite file. Methods are synchronous and thread-safe.

    ``write_fault`` is a seam for tests of storage faults: called with the connection inside
    every write transaction, just before it commits; an ``sqlite3.Error`` it raises is handled
    exactly as one SQLite raised (the transaction is rolled back, a ``StoreError`` follows)."""

    def __init__(
        self, conn: sqlite3.Connection, path: Path, *, write_fault: Callable[[sqlite3.Connection], None] | None = None
    ) -> None:
        self._conn = conn
        self._lock = threading.RLock()
        self.path = path
        self._reserved: dict[str, _Reserved] = {}
        self._write_fault = write_fault

    # ----- opening

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        write: bool = True,
        create: bool = True,
        write_fault: Callable[[sqlite3.Connection], None] | None = None,
    ) -> Store:
        """Open (creating and migrating if needed) the store at ``path`` or the default path.

        ``write``: the caller will store sessions, so a store it may only read is refused now,
        before any model request, rather than at the first step (listing and exporting pass
        False and work on a read-only file).

        ``create``: False opens only a file that exists (a ``StoreError`` otherwise) and makes
        neither it nor its folder; see ``open_existing``."""
        db_path = Path(path) if path is not None else default_db_path()
        schema.refuse_foreign_file(db_path)
        schema.refuse_orphan_wal(db_path)
        try:
            if create:
                db_path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
            else:  # mode=rw: SQLite never creates the file (and opens a write-protected one read-only)
                uri = db_path.absolute().as_uri() + "?mode=rw"
                conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the session store {db_path}: {exc}; check the path and its permissions") from exc
        try:
            version = schema.read_schema_version(conn, db_path)
            if version > schema.SCHEMA_VERSION:
                raise schema.newer(db_path, version)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=OFF")
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            schema.migrate(conn, version, db_path)
            if write and not os.access(db_path, os.W_OK):
                raise read_only(db_path, "the file is not writable")
        except StoreError:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise store_error(db_path, exc, "open") from exc
        return cls(conn, db_path, write_fault=write_fault)

    @classmethod
    def open_existing(cls, path: str | os.PathLike[str] | None = None) -> Store | None:
        """The store at ``path`` (or the default path) opened for reading, or ``None`` when there
        is no store yet: commands that only read (listing, exporting) create no file or folder.

        A log left without its store is still refused (it is someone's data), as by ``open``."""
        db_path = Path(path) if path is not None else default_db_path()
        schema.refuse_foreign_file(db_path)
        schema.refuse_orphan_wal(db_path)
        if not db_path.exists():
            return None
        return cls.open(db_path, write=False, create=False)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection under the lock; an SQLite failure becomes a ``StoreError``."""
        with self._lock:
            try:
                yield self._conn
            except sqlite3.Error as exc:
                raise store_error(self.path, exc, "read") from exc

    def close(self) -> None:
        """Close the connection (committed data is already on disk)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """The raw connection, for companions that keep their own tables (memory)."""
        return self._conn

    @property
    def lock(self) -> threading.RLock:
        """Held around every use of the connection."""
        return self._lock

    @contextlib.contextmanager
    def without_waiting(self) -> Iterator[None]:
        """Writes in the block fail at once (``StoreBusy``) if another program holds the store,
        rather than wait for it: for a write right after one that already waited it out. The
        lock is held throughout, so no other thread's write runs without its wait."""
        with self._lock:
            self._conn.execute("PRAGMA busy_timeout=0")
            try:
                yield
            finally:
                with contextlib.suppress(sqlite3.Error):  # a closed connection: its next use reports it
                    self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    def transaction(self) -> _Transaction:
        """``with store.transaction() as conn:`` runs the block as one IMMEDIATE transaction."""
        return _Transaction(self)

    # ----- sessions

    def create_session(self, cwd: str | os.PathLike[str], model: str, agent: str, parent_id: str | None = None) -> str:
        """Start a new, empty session and return its id."""
        now = time.time()
        with self.transaction() as conn:
            session_id = new_session_id(after=conn.execute("SELECT MAX(id) FROM sessions").fetchone()[0])
            conn.execute(
                "INSERT INTO sessions (id, cwd, title, model, agent, created, updated, parent_id) VALUES (?,?,?,?,?,?,?,?)",
                (session_id, str(cwd), "", model, agent, now, now, parent_id),
            )
        return session_id

    def reserve_session(
        self, cwd: str | os.PathLike[str], model: str, agent: str, parent_id: str | None = None,
        session_id: str | None = None,
    ) -> str:
        """The id of a new session whose row is written with its first message (``append_step``
        or ``replace_history``, in the same transaction). Until then nothing is on disk, and the
        store lists, finds and continues it nowhere. ``session_id``: an id already handed out
        (``new_session_id``, an editor told before the session was built); one taken is refused."""
        with self._reading() as conn:
            (newest,) = conn.execute("SELECT MAX(id) FROM sessions").fetchone()
            if session_id is not None:
                taken = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
                if taken or session_id in self._reserved:
                    raise StoreError(f"session id {session_id} is taken")
            else:
                newest = max([i for i in (newest, *self._reserved) if i], default=None)
                session_id = new_session_id(after=newest)
            self._reserved[session_id] = _Reserved(str(cwd), model, agent, time.time(), parent_id)
        return session_id

    def keep_reserved(self, session_id: str) -> None:
        """Write a reserved session's row now, before its first message: an editor was told its
        id and may load it (``ketch acp``). The row holds no message, so nothing lists it."""
        with self._lock:
            if session_id not in self._reserved:
                return
            with self.transaction() as conn:
                reserved = self._write_reserved(conn, session_id)
            self._written(session_id, reserved)

    def is_reserved(self, session_id: str) -> bool:
        """Whether ``session_id`` came from ``reserve_session`` and has stored nothing yet."""
        with self._lock:
            return session_id in self._reserved

    def _write_reserved(self, conn: sqlite3.Connection, session_id: str) -> _Reserved | None:
        """Inside the caller's transaction: the row of a reserved session, if this one is."""
        reserved = self._reserved.get(session_id)
        if reserved is not None:
            conn.execute(
                "INSERT INTO sessions (id, cwd, title, model, agent, created, updated, parent_id, think)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (session_id, reserved.cwd, reserved.title, reserved.model, reserved.agent, reserved.created,
                 time.time(), reserved.parent_id, reserved.think),
            )
        return reserved

    def _written(self, session_id: str, reserved: _Reserved | None) -> None:
        """After the commit (still under the lock): a reserved session now has its row."""
        if reserved is not None:
            self._reserved.pop(session_id, None)

    def get_session(self, id_or_prefix: str) -> SessionRow | None:
        """The session with this id, or the only one whose id starts with it.

        Raises ``StoreError`` when the prefix matches several sessions.
        """
        if not id_or_prefix:
            return None
        with self._reading() as conn:
            exact = conn.execute(_SESSION_SELECT + " WHERE s.id = ?", (id_or_prefix,)).fetchone()
            if exact:
                return _row(exact)
            escaped = id_or_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            rows = conn.execute(
                _SESSION_SELECT + " WHERE s.id LIKE ? ESCAPE '\\' ORDER BY s.id LIMIT 2", (escaped + "%",)
            ).fetchall()
        if len(rows) > 1:
            raise StoreError(f"session id prefix {id_or_prefix!r} matches several sessions; give more characters")
        return _row(rows[0]) if rows else None

    def latest_session(self, cwd: str | os.PathLike[str]) -> SessionRow | None:
        """The most recently updated session started in ``cwd`` that holds a message."""
        with self._reading() as conn:
            row = conn.execute(
                _SESSION_SELECT + " WHERE s.cwd = ? AND " + _HAS_MESSAGES + " ORDER BY s.updated DESC, s.id DESC LIMIT 1",
                (str(cwd),),
            ).fetchone()
        return _row(row) if row else None

    def list_sessions(self, cwd: str | os.PathLike[str] | None = None, limit: int | None = 50) -> list[SessionRow]:
        """Sessions holding a message, most recently updated first, optionally only those of
        ``cwd`` (an empty row, left by a ketch before reserved sessions, is not listed).

        At most ``limit`` of them; ``None`` lists them all."""
        if limit is None:
            limit = -1  # SQLite: a negative LIMIT has no upper bound
        with self._reading() as conn:
            if cwd is None:
                rows = conn.execute(
                    _SESSION_SELECT + " WHERE " + _HAS_MESSAGES + " ORDER BY s.updated DESC, s.id DESC LIMIT ?",
                    (limit,),
                ).fetchall()
            else:
                rows = conn.execute(
                    _SESSION_SELECT + " WHERE s.cwd = ? AND " + _HAS_MESSAGES + " ORDER BY s.updated DESC, s.id DESC LIMIT ?",
                    (str(cwd), limit),
                ).fetchall()
        return [_row(r) for r in rows]

    def count_sessions(self, cwd: str | os.PathLike[str] | None = None) -> int:
        """How many sessions ``list_sessions`` would give without a limit."""
        with self._reading() as conn:
            if cwd is None:
                (count,) = conn.execute("SELECT COUNT(*) FROM sessions s WHERE " + _HAS_MESSAGES).fetchone()
            else:
                (count,) = conn.execute(
                    "SELECT COUNT(*) FROM sessions s WHERE s.cwd = ? AND " + _HAS_MESSAGES, (str(cwd),)
                ).fetchone()
        return int(count)

    def set_title(self, session_id: str, title: str) -> None:
        """Name the session (shown in pickers and exports); a reserved one gets it with its row."""
        with self.transaction() as conn:
            reserved = self._reserved.get(session_id)
            if reserved is not None:
                reserved.title = title
            conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))

    def set_settings(self, session_id: str, model: str, agent: str, think: str) -> None:
        """Record the model, agent and thinking level the session now uses (a later load goes on
        with them); a reserved one gets them with its row."""
        with self.transaction() as conn:
            reserved = self._reserved.get(session_id)
            if reserved is not None:
                reserved.model, reserved.agent, reserved.think = model, agent, think
            conn.execute("UPDATE sessions SET model = ?, agent = ?, think = ? WHERE id = ?", (model, agent, think, session_id))

    def touch(self, session_id: str) -> None:
        """Mark the session as used now."""
        with self.transaction() as conn:
            conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (time.time(), session_id))

    def fork(self, session_id: str) -> str:
        """A new session with a copy of this one's messages and events; returns its id."""
        now = time.time()
        with self.transaction() as conn:
            new_id = new_session_id(after=conn.execute("SELECT MAX(id) FROM sessions").fetchone()[0])
            src = conn.execute("SELECT cwd, title, model, agent, think FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if src is None:
                raise StoreError(f"no session {session_id!r} to fork; list sessions to find its id")
            conn.execute(
                "INSERT INTO sessions (id, cwd, title, model, agent, created, updated, parent_id, think)"
                " VALUES (?,?,?,?,?,?,?,?,?)",
                (new_id, src[0], src[1], src[2], src[3], now, now, session_id, src[4]),
            )
            conn.execute(
                "INSERT INTO messages (session_id, seq, step, data) SELECT ?, seq, step, data FROM messages WHERE session_id = ?",
                (new_id, session_id),
            )
            conn.execute(
                "INSERT INTO events (session_id, seq, data) SELECT ?, seq, data FROM events WHERE session_id = ?",
                (new_id, session_id),
            )
        return new_id

    def delete_session(self, session_id: str) -> bool:
        """Remove the session with exactly this id (no prefix), its messages, events and
        pending step; whether there was one. The caller holds its write lock."""
        with self.transaction() as conn:
            for table in ("messages", "events", "pending"):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))  # noqa: S608 - fixed names
            gone = conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount
        with self._lock:
            self._reserved.pop(session_id, None)
        return bool(gone)

    # ----- export


_HAS_MESSAGES = "EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id)"


_SESSION_SELECT = (
    "SELECT s.id, s.cwd, s.title, s.model, s.agent, s.created, s.updated, s.parent_id,"
    " (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id), s.think FROM sessions s"
)


def _row(r: Sequence[Any]) -> SessionRow:
    return SessionRow(*r)


class _Transaction:
    """One IMMEDIATE transaction under the store's lock; SQLite errors become ``StoreError``.

    SQLite rolls a transaction back by itself on some failures (a full disk, an I/O error), so
    the rollback here runs only while one is still open."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __enter__(self) -> sqlite3.Connection:
        self._store._lock.acquire()
        try:
            self._store._conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._store._lock.release()
            if isinstance(exc, sqlite3.Error):
                raise write_error(self._store.path, exc) from exc
            raise
        return self._store._conn

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        conn = self._store._conn
        try:
            if exc is None:
                try:
                    if self._store._write_fault is not None:
                        self._store._write_fault(conn)
                    conn.execute("COMMIT")
                except sqlite3.Error as commit_exc:
                    _rollback(conn)
                    raise write_error(self._store.path, commit_exc) from commit_exc
            else:
                _rollback(conn)
        finally:
            self._store._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise write_error(self._store.path, exc) from exc


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):  # the connection is unusable: the next use reports it
            conn.execute("ROLLBACK")

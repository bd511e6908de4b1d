"""The session store: one SQLite file holding sessions, their history and prompt history.

Every finished agent step is written in one transaction (``append_step``), so a process
killed at any moment leaves whole steps on disk and never half of one. The file runs in
WAL mode with ``synchronous=NORMAL``: a committed transaction survives the process dying;
only a power cut may lose the last few commits, never corrupt older ones.

Messages are pydantic-ai ``ModelMessage`` objects stored one per row as the SDK's own JSON
(``ModelMessagesTypeAdapter``), so opaque provider payloads (ids, signatures, provider
details, native tool parts) come back exactly as they went in. Loading decodes them with
``history_codec``, which gives the adapter's result several times faster.

A new conversation is only reserved at first (``reserve_session``): its id is chosen up front
and its row is written by the transaction that stores its first message, so a session that
never stored anything (the app quit before a prompt, ``/clear`` then quit, ``--resume``
then a pick) leaves no row behind.

The store refuses a file it cannot trust (not a database, or written by a newer ketch)
with a ``StoreError`` that names the path; such a file is never modified or recreated.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ketch.core import strict_json
from ketch.core.exceptions import ConfigError
from ketch.state.sql import run_script  # noqa: F401 - migrations here and in memory_schema

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

DB_FILENAME = "ketch.db"
SQLITE_HEADER = b"SQLite format 3\x00"


class StoreError(ConfigError):
    """The store cannot be used; the message (one line) names the file and what to do.

    A ``ConfigError``: the user must act (move a damaged file aside, fix permissions, wait for
    another program), so the command line reports it in one line with exit code 2."""


@dataclass
class _Reserved:
    """A session whose id was handed out but whose row waits for its first message."""

    cwd: str
    model: str
    agent: str
    created: float
    parent_id: str | None = None
    title: str = ""


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


# ---------------------------------------------------------------- schema and migrations


def _migrate_core(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            cwd TEXT NOT NULL,
            title TEXT NOT NULL DEFAULT '',
            model TEXT NOT NULL DEFAULT '',
            agent TEXT NOT NULL DEFAULT '',
            created REAL NOT NULL,
            updated REAL NOT NULL,
            parent_id TEXT
        );
        CREATE INDEX sessions_by_cwd ON sessions(cwd, updated);
        CREATE INDEX sessions_by_updated ON sessions(updated);
        CREATE TABLE messages (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            step INTEGER NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        CREATE TABLE events (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        CREATE TABLE pending (
            session_id TEXT PRIMARY KEY,
            data TEXT NOT NULL
        );
        CREATE TABLE prompt_history (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            project TEXT NOT NULL,
            ts REAL NOT NULL,
            text TEXT NOT NULL
        );
        CREATE INDEX prompt_history_by_project ON prompt_history(project, id);
        """
    )


def _migrate_memory(conn: sqlite3.Connection) -> None:
    from ketch.state.memory_schema import create_memory_schema

    create_memory_schema(conn)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_migrate_core, _migrate_memory]
"""Migration ``i`` brings the file from schema version ``i`` to ``i + 1``. Append only."""

SCHEMA_VERSION = len(MIGRATIONS)


def default_db_path() -> Path:
    """``ketch.db`` in the user data dir (``$KETCH_DATA_DIR`` or the platform's)."""
    from ketch.core.config import user_data_dir

    return user_data_dir() / DB_FILENAME


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


def serialize_messages(messages: Sequence[ModelMessage]) -> list[str]:
    """Each message as its own JSON object, in the SDK's serialized form (fields at their plain
    default left out: see ``history_codec.encode_messages``)."""
    if not messages:
        return []
    from ketch.context.history_codec import encode_messages

    return encode_messages(messages)


_LOAD_BATCH = 256
"""Rows decoded at a time when a session is loaded."""


def deserialize_messages(rows: Sequence[str]) -> list[ModelMessage]:
    """The inverse of ``serialize_messages``: the messages the SDK's adapter would give.

    ``history_codec`` builds the shapes it knows without the adapter's Python hooks and hands
    every other row to the adapter.
    """
    from ketch.context.history_codec import decode_messages

    return decode_messages(rows)


# ---------------------------------------------------------------- the store


class Store:
    """A handle on the SQLite file. Methods are synchronous and thread-safe."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._lock = threading.RLock()
        self.path = path
        self._reserved: dict[str, _Reserved] = {}

    # ----- opening

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *, write: bool = True, create: bool = True) -> Store:
        """Open (creating and migrating if needed) the store at ``path`` or the default path.

        ``write``: the caller will store sessions, so a store it may only read is refused now,
        before any model request, rather than at the first step (listing and exporting pass
        False and work on a read-only file).

        ``create``: False opens only a file that exists (a ``StoreError`` otherwise) and makes
        neither it nor its folder; see ``open_existing``."""
        db_path = Path(path) if path is not None else default_db_path()
        _refuse_foreign_file(db_path)
        _refuse_orphan_wal(db_path)
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
            version = _read_schema_version(conn, db_path)
            if version > SCHEMA_VERSION:
                raise _newer(db_path, version)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=OFF")
            conn.execute("PRAGMA busy_timeout=5000")
            _migrate(conn, version, db_path)
            if write and not os.access(db_path, os.W_OK):
                raise _read_only(db_path, "the file is not writable")
        except StoreError:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise _store_error(db_path, exc, "open") from exc
        return cls(conn, db_path)

    @classmethod
    def open_existing(cls, path: str | os.PathLike[str] | None = None) -> Store | None:
        """The store at ``path`` (or the default path) opened for reading, or ``None`` when there
        is no store yet: commands that only read (listing, exporting) create no file or folder.

        A log left without its store is still refused (it is someone's data), as by ``open``."""
        db_path = Path(path) if path is not None else default_db_path()
        _refuse_foreign_file(db_path)
        _refuse_orphan_wal(db_path)
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
                raise _store_error(self.path, exc, "read") from exc

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
        self, cwd: str | os.PathLike[str], model: str, agent: str, parent_id: str | None = None
    ) -> str:
        """The id of a new session whose row is written with its first message (``append_step``
        or ``replace_history``, in the same transaction). Until then nothing is on disk, and the
        store lists, finds and continues it nowhere."""
        with self._reading() as conn:
            (newest,) = conn.execute("SELECT MAX(id) FROM sessions").fetchone()
            newest = max([i for i in (newest, *self._reserved) if i], default=None)
            session_id = new_session_id(after=newest)
            self._reserved[session_id] = _Reserved(str(cwd), model, agent, time.time(), parent_id)
        return session_id

    def is_reserved(self, session_id: str) -> bool:
        """Whether ``session_id`` came from ``reserve_session`` and has stored nothing yet."""
        with self._lock:
            return session_id in self._reserved

    def _write_reserved(self, conn: sqlite3.Connection, session_id: str) -> _Reserved | None:
        """Inside the caller's transaction: the row of a reserved session, if this one is."""
        reserved = self._reserved.get(session_id)
        if reserved is not None:
            conn.execute(
                "INSERT INTO sessions (id, cwd, title, model, agent, created, updated, parent_id) VALUES (?,?,?,?,?,?,?,?)",
                (session_id, reserved.cwd, reserved.title, reserved.model, reserved.agent, reserved.created,
                 time.time(), reserved.parent_id),
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

    def touch(self, session_id: str) -> None:
        """Mark the session as used now."""
        with self.transaction() as conn:
            conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (time.time(), session_id))

    def fork(self, session_id: str) -> str:
        """A new session with a copy of this one's messages and events; returns its id."""
        now = time.time()
        with self.transaction() as conn:
            new_id = new_session_id(after=conn.execute("SELECT MAX(id) FROM sessions").fetchone()[0])
            src = conn.execute("SELECT cwd, title, model, agent FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if src is None:
                raise StoreError(f"no session {session_id!r} to fork; list sessions to find its id")
            conn.execute(
                "INSERT INTO sessions (id, cwd, title, model, agent, created, updated, parent_id) VALUES (?,?,?,?,?,?,?,?)",
                (new_id, src[0], src[1], src[2], src[3], now, now, session_id),
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

    # ----- history

    def append_step(self, session_id: str, messages: Sequence[ModelMessage], events: Iterable[Any] = ()) -> None:
        """Add one finished step's new messages and events, atomically (with the session's
        row, when this is the first message of a reserved session)."""
        message_rows = serialize_messages(messages)
        event_rows = [_event_json(e) for e in events]
        with self._lock:
            if not message_rows and session_id in self._reserved:
                return  # events of a turn that stored no message: the session stays unwritten
            with self.transaction() as conn:
                reserved = self._write_reserved(conn, session_id)
                seq, step = _last_message(conn, session_id)
                conn.executemany(
                    "INSERT INTO messages (session_id, seq, step, data) VALUES (?,?,?,?)",
                    [(session_id, seq + 1 + i, step + 1, data) for i, data in enumerate(message_rows)],
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
            self._written(session_id, reserved)

    def replace_history(self, session_id: str, messages: Sequence[ModelMessage]) -> None:
        """Swap the whole message history (after compaction) in one transaction."""
        message_rows = serialize_messages(messages)
        with self._lock:
            if not message_rows and session_id in self._reserved:
                return
            with self.transaction() as conn:
                reserved = self._write_reserved(conn, session_id)
                _, step = _last_message(conn, session_id)
                conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
                conn.executemany(
                    "INSERT INTO messages (session_id, seq, step, data) VALUES (?,?,?,?)",
                    [(session_id, i, step + 1, data) for i, data in enumerate(message_rows)],
                )
                conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (time.time(), session_id))
            self._written(session_id, reserved)

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
        with self._reading() as conn:
            rows = conn.execute("SELECT data FROM events WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
        try:
            return [json.loads(r[0]) for r in rows]
        except ValueError as exc:
            raise StoreError(
                f"session {session_id} in {self.path} has an event this ketch cannot read ({_brief(exc)}); "
                "the file may be damaged: start a new session, or move the store aside"
            ) from exc

    def set_pending(self, session_id: str, data: Any | None) -> None:
        """Record (or with ``None`` clear) the tool calls awaiting an approval decision."""
        with self.transaction() as conn:
            if data is None:
                conn.execute("DELETE FROM pending WHERE session_id = ?", (session_id,))
            else:
                conn.execute(
                    "INSERT OR REPLACE INTO pending (session_id, data) VALUES (?, ?)",
                    (session_id, strict_json.dumps(data, ensure_ascii=False)),
                )

    def get_pending(self, session_id: str) -> Any | None:
        """The pending approval recorded by ``set_pending``, or ``None``."""
        with self._reading() as conn:
            row = conn.execute("SELECT data FROM pending WHERE session_id = ?", (session_id,)).fetchone()
        return json.loads(row[0]) if row else None

    # ----- prompt history

    def add_prompt(self, project: str | os.PathLike[str], text: str) -> None:
        """Remember a prompt the user submitted in ``project`` (blank prompts are ignored)."""
        if not text.strip():
            return
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO prompt_history (project, ts, text) VALUES (?,?,?)", (str(project), time.time(), text)
            )

    def prompt_history(self, project: str | os.PathLike[str], limit: int = 500) -> list[str]:
        """The last ``limit`` prompts of ``project``, oldest first, repeats in a row collapsed."""
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT text FROM prompt_history WHERE project = ? ORDER BY id DESC LIMIT ?", (str(project), limit)
            ).fetchall()
        history: list[str] = []
        for (text,) in reversed(rows):
            if not history or history[-1] != text:
                history.append(text)
        return history

_HAS_MESSAGES = "EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id)"

_SESSION_SELECT = (
    "SELECT s.id, s.cwd, s.title, s.model, s.agent, s.created, s.updated, s.parent_id,"
    " (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id) FROM sessions s"
)


def _last_message(conn: sqlite3.Connection, session_id: str) -> tuple[int, int]:
    """(seq, step) of the newest message, or (-1, -1): one index probe, whatever the history's length."""
    row = conn.execute(
        "SELECT seq, step FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT 1", (session_id,)
    ).fetchone()
    return (row[0], row[1]) if row else (-1, -1)


def _row(r: Sequence[Any]) -> SessionRow:
    return SessionRow(*r)


def _event_dict(event: Any) -> dict[str, Any]:
    return event if isinstance(event, dict) else event.to_dict()


def _event_json(event: Any) -> str:
    """The event as JSON text SQLite can store: a lone surrogate (a file name or output that was
    not UTF-8) is written as its ``\\udcXX`` escape, which reads back as the same string."""
    data = _event_dict(event)
    text = strict_json.dumps(data, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return strict_json.dumps(data)
    return text


class _Transaction:
    """One IMMEDIATE transaction under the store's lock; SQLite errors become ``StoreError``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __enter__(self) -> sqlite3.Connection:
        self._store._lock.acquire()
        try:
            self._store._conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._store._lock.release()
            if isinstance(exc, sqlite3.Error):
                raise _write_error(self._store.path, exc) from exc
            raise
        return self._store._conn

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            self._store._conn.execute("COMMIT" if exc is None else "ROLLBACK")
        except sqlite3.Error as commit_exc:
            if exc is None:
                self._store._conn.execute("ROLLBACK")
                raise _write_error(self._store.path, commit_exc) from commit_exc
        finally:
            self._store._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise _write_error(self._store.path, exc) from exc


def _write_error(path: Path, exc: sqlite3.Error) -> StoreError:
    return _store_error(path, exc, "write to")


def _brief(exc: BaseException, limit: int = 160) -> str:
    """The first line of an error's text, clipped (SQLite quotes whole rows in some errors)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _aside(path: Path) -> str:
    return f"move it aside (with {path.name}-wal and {path.name}-shm if they are there) or set KETCH_DATA_DIR to start a new store"


def _read_only(path: Path, why: str) -> StoreError:
    return StoreError(
        f"the session store {path} is read-only ({why}); make it (and {path.name}-wal and {path.name}-shm if they "
        f"are there) and the folder {path.parent} writable, or set KETCH_DATA_DIR to use another store"
    )


def _store_error(path: Path, exc: sqlite3.Error, doing: str) -> StoreError:
    """One line for an SQLite failure on the store: what went wrong, and what to do about it."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    detail = _brief(exc)
    if detail.startswith("Could not decode to UTF-8"):  # Python's own error quotes the whole row
        detail = detail.partition(" with text")[0]
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or detail.startswith("Could not decode to UTF-8"):
        return StoreError(f"the session store {path} is damaged ({detail}); {_aside(path)}")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in detail or "busy" in detail:
        return StoreError(
            f"the session store {path} is busy: another program has held it for over 5 seconds ({detail}); "
            "close that program or try again in a moment"
        )
    if name.startswith("SQLITE_READONLY"):
        return _read_only(path, detail)
    if name.startswith("SQLITE_FULL"):
        return StoreError(f"could not write to the session store {path}: the disk is full; free some space and try again")
    return StoreError(f"could not {doing} the session store {path} ({detail}); check free disk space and permissions")


def _refuse_foreign_file(path: Path) -> None:
    """Raise before SQLite touches a file that is not an SQLite database."""
    try:
        with path.open("rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except IsADirectoryError as exc:
        raise StoreError(f"the session store {path} is a directory; pass the path of a file") from exc
    except NotADirectoryError as exc:
        raise StoreError(
            f"the session store {path} cannot be created: a part of its folder {path.parent} is a file; "
            "set KETCH_DATA_DIR to a folder"
        ) from exc
    except OSError as exc:
        raise StoreError(f"cannot read the session store {path}: {exc}; check its permissions") from exc
    if header and header != SQLITE_HEADER:
        raise StoreError(
            f"the session store {path} is not an SQLite database; move it aside or set KETCH_DATA_DIR to start a new store"
        )


def _refuse_orphan_wal(path: Path) -> None:
    """Raise when ``ketch.db-wal`` holds changes but ``ketch.db`` is missing or empty.

    That log belongs to a store moved away without it; SQLite would delete it on opening
    a new store at this path, and with it the last steps of the store it belongs to."""
    wal = path.with_name(path.name + "-wal")
    try:
        if wal.stat().st_size == 0:
            return
    except OSError:
        return  # no log (or one SQLite will report it cannot open)
    try:
        if path.stat().st_size > 0:
            return
    except FileNotFoundError:
        pass
    except OSError:
        return
    raise StoreError(
        f"{wal} holds the last changes of a session store but {path} is missing or empty; put that store back "
        f"at {path}, or move {wal.name} aside to start a new store"
    )


def _newer(path: Path, version: int) -> StoreError:
    return StoreError(
        f"the session store {path} has schema version {version}, newer than this ketch "
        f"understands ({SCHEMA_VERSION}); upgrade ketch, or set KETCH_DATA_DIR to use another store"
    )


def _read_schema_version(conn: sqlite3.Connection, path: Path) -> int:
    """0 for an empty file; reads only, so a file we refuse stays byte-identical."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return 0
    if "meta" not in tables:
        raise StoreError(
            f"{path} is an SQLite database but not a ketch session store; move it aside or set KETCH_DATA_DIR"
        )
    row = conn.execute("SELECT schema_version FROM meta").fetchone()
    if row is None or not isinstance(row[0], int):
        raise StoreError(f"the session store {path} has no schema version; move it aside or set KETCH_DATA_DIR")
    return row[0]


def _migrate(conn: sqlite3.Connection, version: int, path: Path) -> None:
    """Run each missing migration and the version bump in one transaction."""
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Re-read under the write lock: another process (maybe a newer ketch) may have migrated meanwhile.
        has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        if has_meta:
            version = _read_schema_version(conn, path)
            if version > SCHEMA_VERSION:
                raise _newer(path, version)
        else:
            conn.execute("CREATE TABLE meta (schema_version INTEGER NOT NULL)")
            conn.execute("INSERT INTO meta (schema_version) VALUES (0)")
            version = 0
        for migration in MIGRATIONS[version:]:
            migration(conn)
        conn.execute("UPDATE meta SET schema_version = ?", (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


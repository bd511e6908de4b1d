"""The session store's file: what it must look like before SQLite opens it, its schema, and the
migrations that bring an older file up to date (each in one transaction, append only)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from ketch.state.sql import run_script
from ketch.state.store_errors import StoreError

DB_FILENAME = "ketch.db"
SQLITE_HEADER = b"SQLite format 3\x00"


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


def _migrate_think(conn: sqlite3.Connection) -> None:
    """The thinking level a session was left at (its model and agent have their columns)."""
    if "think" not in {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}:
        run_script(conn, "ALTER TABLE sessions ADD COLUMN think TEXT NOT NULL DEFAULT '';")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_migrate_core, _migrate_memory, _migrate_think]
"""Migration ``i`` brings the file from schema version ``i`` to ``i + 1``. Append only."""

SCHEMA_VERSION = len(MIGRATIONS)


def default_db_path() -> Path:
    """``ketch.db`` in the user data dir (``$KETCH_DATA_DIR`` or the platform's)."""
    from ketch.config.dirs import user_data_dir  # not core.config: the UI opens the store before pydantic is imported

    return user_data_dir() / DB_FILENAME


def refuse_foreign_file(path: Path) -> None:
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


def refuse_orphan_wal(path: Path) -> None:
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


def newer(path: Path, version: int) -> StoreError:
    return StoreError(
        f"the session store {path} has schema version {version}, newer than this ketch "
        f"understands ({SCHEMA_VERSION}); upgrade ketch, or set KETCH_DATA_DIR to use another store"
    )


def read_schema_version(conn: sqlite3.Connection, path: Path) -> int:
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


def migrate(conn: sqlite3.Connection, version: int, path: Path) -> None:
    """Run each missing migration and the version bump in one transaction."""
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Re-read under the write lock: another process (maybe a newer ketch) may have migrated meanwhile.
        has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        if has_meta:
            version = read_schema_version(conn, path)
            if version > SCHEMA_VERSION:
                raise newer(path, version)
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

"""The memory tables, created by the store's migrations.

Kept apart from ``memory.py`` (which imports pydantic-ai for its tool) so that opening the
store, which the UI does before its first frame, never imports the model SDK.
"""

from __future__ import annotations

import sqlite3

from ketch.state.sql import run_script

NOTES_DDL = """
CREATE TABLE IF NOT EXISTS memory_notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL CHECK (scope IN ('project', 'global')),
    project TEXT NOT NULL,
    text TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_notes_by_owner ON memory_notes(scope, project, id);
"""

FTS_DDL = """
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(text, content='memory_notes', content_rowid='id');
CREATE TRIGGER IF NOT EXISTS memory_notes_ai AFTER INSERT ON memory_notes BEGIN
    INSERT INTO memory_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS memory_notes_ad AFTER DELETE ON memory_notes BEGIN
    INSERT INTO memory_fts(memory_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER IF NOT EXISTS memory_notes_au AFTER UPDATE ON memory_notes BEGIN
    INSERT INTO memory_fts(memory_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO memory_fts(rowid, text) VALUES (new.id, new.text);
END;
"""

FTS_MISSING_WARNING = "SQLite here has no FTS5: memory search falls back to plain substring matching"


def fts5_available(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite build can create FTS5 tables."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.ketch_fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE temp.ketch_fts5_probe")
        return True
    except sqlite3.OperationalError:
        return False


def create_memory_schema(conn: sqlite3.Connection) -> None:
    """Create the memory tables (called by the store's migration, inside its transaction)."""
    run_script(conn, NOTES_DDL)
    if fts5_available(conn):
        run_script(conn, FTS_DDL)

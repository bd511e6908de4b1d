"""The session store's errors: one line that names the file and says what to do.

SQLite failures (busy, damaged, read-only, full, any other I/O error) are translated here, so
every caller reports the same sentence for the same fault.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ketch.protocol.exceptions import ConfigError


class StoreError(ConfigError):
    """The store cannot be used; the message (one line) names the file and what to do.

    A ``ConfigError``: the user must act (move a damaged file aside, fix permissions, wait for
    another program), so the command line reports it in one line with exit code 2."""


class StoreBusy(StoreError):
    """Another program held the store's write lock for the whole wait (``BUSY_TIMEOUT_MS``)."""


BUSY_TIMEOUT_MS = 5000
"""How long a write waits for another program's lock on the store before it fails."""


def write_error(path: Path, exc: sqlite3.Error) -> StoreError:
    return store_error(path, exc, "write to")


def brief(exc: BaseException, limit: int = 160) -> str:
    """The first line of an error's text, clipped (SQLite quotes whole rows in some errors)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def aside(path: Path) -> str:
    return f"move it aside (with {path.name}-wal and {path.name}-shm if they are there) or set KETCH_DATA_DIR to start a new store"


def read_only(path: Path, why: str) -> StoreError:
    return StoreError(
        f"the session store {path} is read-only ({why}); make it (and {path.name}-wal and {path.name}-shm if they "
        f"are there) and the folder {path.parent} writable, or set KETCH_DATA_DIR to use another store"
    )


def store_error(path: Path, exc: sqlite3.Error, doing: str) -> StoreError:
    """One line for an SQLite failure on the store: what went wrong, and what to do about it."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    detail = brief(exc)
    if detail.startswith("Could not decode to UTF-8"):  # Python's own error quotes the whole row
        detail = detail.partition(" with text")[0]
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or detail.startswith("Could not decode to UTF-8"):
        return StoreError(f"the session store {path} is damaged ({detail}); {aside(path)}")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in detail or "busy" in detail:
        return StoreBusy(
            f"the session store {path} is busy: another program has held it for over {BUSY_TIMEOUT_MS // 1000} seconds ({detail}); "
            "close that program or try again in a moment"
        )
    if name.startswith("SQLITE_READONLY"):
        return read_only(path, detail)
    if name.startswith("SQLITE_FULL") or "disk is full" in detail:
        return StoreError(
            f"could not write to the session store {path}: the disk is full; free some space in {path.parent} "
            "and try again (everything stored before is kept)"
        )
    if name.startswith("SQLITE_IOERR"):
        return StoreError(
            f"could not {doing} the session store {path} ({detail}); check the disk holding {path.parent} "
            "(everything stored before is kept)"
        )
    return StoreError(f"could not {doing} the session store {path} ({detail}); check free disk space and permissions")

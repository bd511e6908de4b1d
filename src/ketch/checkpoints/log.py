"""Which snapshot belongs to which session, prompt and moment, per workspace.

One small SQLite file beside the workspace's private git store (``<data dir>/checkpoints/
<workspace key>/``). Rows: ``before`` (taken as a turn starts), ``step`` (before a step that
writes), ``after`` (as a turn ends), ``rewind`` (the files as a restore found them, so a rewind can be
undone) and ``restored`` (the files as ketch believes it left them after a restore: the
restored ones as restored, the ones it left alone as it last saw them).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from ketch.checkpoints.shadow import Snapshot

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    step INTEGER NOT NULL DEFAULT 0,
    kind TEXT NOT NULL,
    tree TEXT NOT NULL,
    large TEXT NOT NULL DEFAULT '{}',
    prompt TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS checkpoints_session ON checkpoints(session_id, turn, id);
"""


@dataclass(frozen=True)
class Checkpoint:
    id: int
    session_id: str
    turn: int
    """The 1-based number of the prompt whose turn this belongs to."""
    step: int
    kind: str
    tree: str
    large: dict[str, tuple[int, str]]
    prompt: str
    created: float

    @property
    def snapshot(self) -> Snapshot:
        return Snapshot(self.tree, dict(self.large))


def workspace_dir(data_dir: Path, root: Path) -> Path:
    """The folder holding one workspace's checkpoints."""
    key = hashlib.sha256(str(Path(root).resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return Path(data_dir) / "checkpoints" / key


class CheckpointLog:
    def __init__(self, folder: Path, root: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "workspace").write_text(str(root) + "\n", encoding="utf-8", errors="surrogateescape")
        # used from the loop's worker threads one call at a time (the session awaits each)
        self.conn = sqlite3.connect(folder / "log.db", isolation_level=None, timeout=10, check_same_thread=False)
        self.conn.executescript(_SCHEMA)

    def close(self) -> None:
        self.conn.close()

    def add(self, session_id: str, turn: int, kind: str, snap: Snapshot, *, step: int = 0, prompt: str = "") -> int:
        cur = self.conn.execute(
            "INSERT INTO checkpoints(session_id, turn, step, kind, tree, large, prompt, created) VALUES (?,?,?,?,?,?,?,?)",
            (session_id, turn, step, kind, snap.tree, json.dumps(snap.large, allow_nan=False), prompt, time.time()),
        )
        return int(cur.lastrowid or 0)

    def _rows(self, sql: str, args: tuple) -> list[Checkpoint]:
        return [
            Checkpoint(r[0], r[1], r[2], r[3], r[4], r[5], {k: tuple(v) for k, v in json.loads(r[6]).items()}, r[7], r[8])
            for r in self.conn.execute(sql, args)
        ]

    def of_session(self, session_id: str) -> list[Checkpoint]:
        return self._rows(
            "SELECT id, session_id, turn, step, kind, tree, large, prompt, created FROM checkpoints WHERE session_id=? ORDER BY id",
            (session_id,),
        )

    def latest(self) -> Checkpoint | None:
        """The newest snapshot of this workspace, from any session, that shows the files as ketch
        left them: a turn's, or what a rewind restored (not the state a rewind found)."""
        rows = self._rows(
            "SELECT id, session_id, turn, step, kind, tree, large, prompt, created FROM checkpoints "
            "WHERE kind != 'rewind' ORDER BY id DESC LIMIT 1", ()
        )
        return rows[0] if rows else None

    def forget_from_turn(self, session_id: str, turn: int) -> None:
        """The conversation went back before ``turn``: its checkpoints (and later ones) no longer
        belong to any prompt of it. Rewind rows stay, so the rewind itself can be undone."""
        self.conn.execute("DELETE FROM checkpoints WHERE session_id=? AND turn>=? AND kind!='rewind'", (session_id, turn))

    def oldest_first(self) -> list[Checkpoint]:
        return self._rows("SELECT id, session_id, turn, step, kind, tree, large, prompt, created FROM checkpoints ORDER BY id", ())

    def delete(self, ids: list[int]) -> None:
        self.conn.executemany("DELETE FROM checkpoints WHERE id=?", [(i,) for i in ids])

    def delete_sessions_except(self, keep: set[str]) -> list[int]:
        rows = [c.id for c in self.oldest_first() if c.session_id not in keep]
        self.delete(rows)
        return rows

"""Durable notes the agent keeps across sessions, per project and global.

Notes live in the session store's SQLite file (``memory_notes``), indexed for full-text
search by an FTS5 table kept in step by triggers. Where SQLite lacks FTS5, search falls
back to ``LIKE`` matching and ``MemoryBook.warnings`` says so.

When the notes outgrow their prompt budget, ``MemoryBook.compact`` asks a model (through a
callable the caller passes) to rewrite a scope's notes as one summary. The swap happens in
one transaction after the model answered; if the call fails, every note stays.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.state.memory_schema import fts5_available
from ketch.tools.base import ToolDeps, ToolSpec

if TYPE_CHECKING:
    from ketch.state.store import Store

Scope = Literal["project", "global"]
SCOPES: tuple[Scope, ...] = ("global", "project")

FTS_MISSING_WARNING = "SQLite here has no FTS5: memory search falls back to plain substring matching"


@dataclass(frozen=True)
class Note:
    """One durable note."""

    id: int
    scope: Scope
    text: str
    created: float


class MemoryBook:
    """The notes visible from one project: its own plus the global ones."""

    def __init__(self, store: Store, project: str) -> None:
        self._store = store
        self.project = str(project)
        self.warnings: list[str] = []
        with store.lock:
            self._fts = _table_exists(store.connection, "memory_fts") and fts5_available(store.connection)
        if not self._fts:
            self.warnings.append(FTS_MISSING_WARNING)

    def _owner(self, scope: Scope) -> tuple[str, str]:
        if scope not in SCOPES:
            raise ValueError(f"unknown memory scope {scope!r}; use 'project' or 'global'")
        return scope, (self.project if scope == "project" else "")

    def add(self, text: str, scope: Scope = "project") -> int:
        """Store a note and return its id."""
        text = text.strip()
        if not text:
            raise ValueError("a memory note needs some text")
        owner = self._owner(scope)
        with self._store.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO memory_notes (scope, project, text, created) VALUES (?,?,?,?)",
                (*owner, text, time.time()),
            )
        return int(cursor.lastrowid or 0)

    def remove(self, note_id: int) -> bool:
        """Delete a visible note; ``False`` when there was none with that id."""
        with self._store.transaction() as conn:
            cursor = conn.execute(
                "DELETE FROM memory_notes WHERE id = ? AND (scope = 'global' OR project = ?)",
                (note_id, self.project),
            )
        return cursor.rowcount > 0

    def all(self, scope: Scope | None = None) -> list[Note]:
        """Visible notes oldest first (global before project), optionally of one scope."""
        scopes = SCOPES if scope is None else (scope,)
        notes: list[Note] = []
        with self._store.lock:
            for s in scopes:
                rows = self._store.connection.execute(
                    "SELECT id, scope, text, created FROM memory_notes WHERE scope = ? AND project = ? ORDER BY id",
                    self._owner(s),
                ).fetchall()
                notes.extend(Note(*r) for r in rows)
        return notes

    def search(self, query: str, limit: int = 10) -> list[Note]:
        """Visible notes matching any word of ``query``, best match first."""
        words = re.findall(r"\w+", query)
        if not words:
            return []
        visible = "(n.scope = 'global' OR n.project = ?)"
        with self._store.lock:
            conn = self._store.connection
            if self._fts:
                match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
                rows = conn.execute(
                    "SELECT n.id, n.scope, n.text, n.created FROM memory_fts f JOIN memory_notes n ON n.id = f.rowid"
                    f" WHERE memory_fts MATCH ? AND {visible} ORDER BY bm25(memory_fts) LIMIT ?",
                    (match, self.project, limit),
                ).fetchall()
            else:
                like = " OR ".join("n.text LIKE ? ESCAPE '\\'" for _ in words)
                patterns = ["%" + w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" for w in words]
                rows = conn.execute(
                    f"SELECT n.id, n.scope, n.text, n.created FROM memory_notes n WHERE ({like}) AND {visible}"
                    " ORDER BY n.id DESC LIMIT ?",
                    (*patterns, self.project, limit),
                ).fetchall()
        return [Note(*r) for r in rows]

    def render_for_prompt(self, budget_chars: int) -> str:
        """The notes as prompt text within ``budget_chars``, newest kept when they don't all fit."""
        lines: list[str] = []
        used = 0
        for note in sorted(self.all(), key=lambda n: n.id, reverse=True):
            line = f"- [{note.id}] ({note.scope}) {note.text}"
            if used + len(line) + 1 > budget_chars:
                break
            lines.append(line)
            used += len(line) + 1
        if not lines:
            return ""
        return "\n".join(reversed(lines))

    def needs_compaction(self, budget_chars: int) -> bool:
        """Whether the rendered notes would overflow ``budget_chars``."""
        return sum(len(f"- [{n.id}] ({n.scope}) {n.text}") + 1 for n in self.all()) > budget_chars

    async def compact(self, summarize: Callable[[str], Awaitable[str]], scope: Scope | None = None) -> int:
        """Rewrite each scope's notes (or only ``scope``'s) as one model-written note.

        ``summarize`` gets the notes as text and returns the summary. If it raises or returns
        nothing, the notes of that scope stay as they were (the exception propagates).
        Notes added while the model was working are kept. Returns how many notes were replaced.
        """
        replaced = 0
        for s in SCOPES if scope is None else (scope,):
            notes = self.all(s)
            if len(notes) < 2:
                continue
            summary = (await summarize("\n".join(f"- {n.text}" for n in notes))).strip()
            if not summary:
                raise ValueError(f"memory compaction of the {s} notes returned no text; notes kept")
            owner = self._owner(s)
            with self._store.transaction() as conn:
                conn.executemany(
                    "DELETE FROM memory_notes WHERE id = ? AND scope = ? AND project = ?",
                    [(n.id, *owner) for n in notes],
                )
                conn.execute(
                    "INSERT INTO memory_notes (scope, project, text, created) VALUES (?,?,?,?)",
                    (*owner, summary, time.time()),
                )
            replaced += len(notes)
        return replaced


def _table_exists(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def _book(ctx: RunContext[ToolDeps]) -> MemoryBook:
    book = ctx.deps.extras.get("memory")
    if book is None:
        raise ToolFailed("memory is not available in this session")
    return book


async def memory(
    ctx: RunContext[ToolDeps],
    action: Literal["add", "search", "remove"],
    text: str = "",
    scope: Literal["project", "global"] = "project",
    id: int | None = None,
) -> str:
    """Keep durable notes that outlive this session: facts about the project or the user's preferences.

    Add a note when you learn something worth knowing next time (build commands, conventions,
    decisions the user made). Do not store secrets.

    Args:
        action: 'add' stores `text`; 'search' finds notes matching `text`; 'remove' deletes note `id`.
        text: The note to add, or the words to search for.
        scope: 'project' for this project only, 'global' for every project (add only).
        id: The id of the note to remove.
    """
    book = _book(ctx)
    if action == "add":
        try:
            note_id = book.add(text, scope)
        except ValueError as exc:
            raise ToolFailed(str(exc)) from exc
        return f"Saved note {note_id} ({scope})."
    if action == "search":
        if not text.strip():
            raise ToolFailed("search needs `text`: the words to look for")
        found = book.search(text, limit=20)
        if not found:
            return f"No notes match {text!r}."
        return "\n".join(f"[{n.id}] ({n.scope}) {n.text}" for n in found)
    if action == "remove":
        if id is None:
            raise ToolFailed("remove needs `id`: the number shown in brackets before a note")
        if not book.remove(id):
            raise ToolFailed(f"there is no note {id}; search to find its id")
        return f"Removed note {id}."
    raise ToolFailed(f"unknown action {action!r}; use add, search or remove")


TOOLS: list[ToolSpec] = [ToolSpec(name="memory", function=memory, kind="meta", key_arg="action")]

"""Durable notes: rows in the store's SQLite file, FTS search, compaction that never loses notes."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.memory import TOOLS, MemoryBook, memory
from ketch.state.store import Store
from ketch.tools.base import ToolDeps


def rows(path: Path, sql: str, *args: object) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql, args).fetchall()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ketch.db"


@pytest.fixture
def store(db: Path):
    with Store.open(db) as s:
        yield s


@dataclass
class Ctx:
    deps: ToolDeps
    tool_call_id: str = "call_1"


@dataclass
class FakeWorkspace:
    root: Path = field(default_factory=Path.cwd)


def test_notes_are_rows_scoped_by_project(store: Store, db: Path) -> None:
    alpha = MemoryBook(store, "/alpha")
    beta = MemoryBook(store, "/beta")
    a1 = alpha.add("build with `make dev`")
    g1 = alpha.add("user prefers short answers", scope="global")
    b1 = beta.add("beta uses poetry")
    assert rows(db, "SELECT id, scope, project, text FROM memory_notes ORDER BY id") == [
        (a1, "project", "/alpha", "build with `make dev`"),
        (g1, "global", "", "user prefers short answers"),
        (b1, "project", "/beta", "beta uses poetry"),
    ]
    assert [n.text for n in alpha.all()] == ["user prefers short answers", "build with `make dev`"]
    assert [n.text for n in beta.all()] == ["user prefers short answers", "beta uses poetry"]
    assert beta.remove(a1) is False  # another project's note is out of reach
    assert alpha.remove(a1) is True
    assert rows(db, "SELECT id FROM memory_notes ORDER BY id") == [(g1,), (b1,)]


def test_fts_search_ranks_and_respects_visibility(store: Store) -> None:
    book = MemoryBook(store, "/p")
    assert book.warnings == []  # this SQLite has FTS5
    book.add("The tests run with pytest -q from the repo root")
    book.add("Deploys happen on Fridays")
    book.add("pytest fixtures live in conftest; pytest markers are strict")
    MemoryBook(store, "/other").add("pytest is slow here")
    found = [n.text for n in book.search("pytest")]
    assert found[0].startswith("pytest fixtures")  # two hits outrank one
    assert len(found) == 2
    assert [n.text for n in book.search('deploys "OR" (')] == ["Deploys happen on Fridays"]  # query syntax is inert
    assert book.search("  ") == []


def test_search_falls_back_to_like_without_fts(store: Store, db: Path) -> None:
    with sqlite3.connect(db) as conn:  # a store made where SQLite had no FTS5
        for trigger in ("memory_notes_ai", "memory_notes_ad", "memory_notes_au"):
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute("DROP TABLE memory_fts")
    book = MemoryBook(store, "/p")
    assert any("FTS5" in w for w in book.warnings)
    book.add("use 100% of the cache")
    book.add("something else")
    assert [n.text for n in book.search("cache")] == ["use 100% of the cache"]


def test_render_for_prompt_keeps_newest_within_budget(store: Store) -> None:
    book = MemoryBook(store, "/p")
    assert book.render_for_prompt(1000) == ""
    ids = [book.add(f"note number {i}") for i in range(5)]
    full = book.render_for_prompt(10_000)
    assert full.splitlines() == [f"- [{ids[i]}] (project) note number {i}" for i in range(5)]
    assert not book.needs_compaction(len(full) + 1)
    assert book.needs_compaction(len(full) - 1)
    tight = book.render_for_prompt(90)  # three lines of 29 characters and their newlines
    assert tight.splitlines() == [f"- [{ids[i]}] (project) note number {i}" for i in (2, 3, 4)]


async def test_compaction_replaces_a_scope_with_the_summary(store: Store, db: Path) -> None:
    book = MemoryBook(store, "/p")
    book.add("alpha")
    book.add("beta")
    book.add("global one", scope="global")
    seen: list[str] = []

    async def summarize(text: str) -> str:
        seen.append(text)
        book.add("added while summarizing")
        return "  merged summary  "

    replaced = await book.compact(summarize, scope="project")
    assert replaced == 2
    assert seen == ["- alpha\n- beta"]
    assert rows(db, "SELECT scope, text FROM memory_notes ORDER BY id") == [
        ("global", "global one"),
        ("project", "added while summarizing"),
        ("project", "merged summary"),
    ]
    assert [n.text for n in book.search("summarizing")] == ["added while summarizing"]
    assert book.search("beta alpha") == []  # the FTS index followed the delete
    assert [n.text for n in book.search("merged")] == ["merged summary"]


async def test_failed_compaction_keeps_every_note(store: Store, db: Path) -> None:
    book = MemoryBook(store, "/p")
    for text in ["one", "two", "three"]:
        book.add(text)
    before = rows(db, "SELECT * FROM memory_notes ORDER BY id")

    async def broken(text: str) -> str:
        raise ConnectionError("model unreachable")

    async def empty(text: str) -> str:
        return "   "

    with pytest.raises(ConnectionError):
        await book.compact(broken)
    with pytest.raises(ValueError, match="notes kept"):
        await book.compact(empty)
    assert rows(db, "SELECT * FROM memory_notes ORDER BY id") == before


async def test_memory_tool_add_search_remove(store: Store, db: Path) -> None:
    assert [(t.name, t.kind, t.key_arg) for t in TOOLS] == [("memory", "meta", "action")]
    ctx = Ctx(ToolDeps(workspace=FakeWorkspace(), extras={"memory": MemoryBook(store, "/p")}))
    reply = await memory(ctx, "add", text="run ruff before committing", scope="global")
    (note_id,) = rows(db, "SELECT id FROM memory_notes WHERE scope='global'")[0]
    assert reply == f"Saved note {note_id} (global)."
    assert await memory(ctx, "search", text="ruff") == f"[{note_id}] (global) run ruff before committing"
    assert await memory(ctx, "search", text="mypy") == "No notes match 'mypy'."
    assert await memory(ctx, "remove", id=note_id) == f"Removed note {note_id}."
    assert rows(db, "SELECT COUNT(*) FROM memory_notes") == [(0,)]
    with pytest.raises(ToolFailed, match="no note"):
        await memory(ctx, "remove", id=note_id)
    with pytest.raises(ToolFailed, match="needs some text"):
        await memory(ctx, "add", text="  ")
    with pytest.raises(ToolFailed, match="not available"):
        await memory(Ctx(ToolDeps(workspace=FakeWorkspace())), "search", text="x")

"""A full disk at any store write of a turn: the turn stops with one line naming the data dir,
everything committed before stays readable, and once there is room again the session goes on
with every prompt stored and a history each wire accepts."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from durable_session import (
    WIRES,
    DiskFull,
    no_two_responses_in_a_row,
    open_session,
    run,
    scripted_turn,
    stored_messages,
    stored_prompts,
    workdir,
)
from fakeprovider import FakeProvider, Turn
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
from wire_rules import assert_valid

from ketch.protocol import events as ev
from ketch.state import resume
from ketch.state.store import Store, StoreError


def _faulty_store(monkeypatch: pytest.MonkeyPatch, fault: DiskFull) -> None:
    monkeypatch.setattr(resume, "open_store", lambda: Store.open(write_fault=fault))


async def _count_writes(monkeypatch: pytest.MonkeyPatch, fake: FakeProvider, wire: str, cwd: Path) -> int:
    counter = DiskFull(at=None)
    _faulty_store(monkeypatch, counter)
    fake.add(*scripted_turn("count"))
    session = await open_session(fake, wire, cwd)
    assert (await run(session, "count the writes"))[-1].reason == "done"
    await session.aclose()
    return counter.writes


@pytest.mark.parametrize("wire", WIRES)
async def test_a_full_disk_at_every_write_of_a_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wire: str) -> None:
    cwd = workdir(tmp_path)
    with FakeProvider() as fake:
        writes = await _count_writes(monkeypatch, fake, wire, cwd)
        assert writes >= 8  # the prompt, each tool's start and end, each step, the last events
        for k in range(writes):
            data = tmp_path / f"data{k}"
            monkeypatch.setenv("KETCH_DATA_DIR", str(data))
            fault = DiskFull(at=k)
            _faulty_store(monkeypatch, fault)
            fake.script.clear()
            fake.add(*scripted_turn(f"k{k}"))
            session = await open_session(fake, wire, cwd)
            events = await run(session, f"full at {k}")
            errors = [e for e in events if isinstance(e, ev.Error)]
            assert events[-1].reason == "error", (k, events[-1])
            assert errors and "\n" not in errors[0].message and str(data) in errors[0].message, (k, errors)
            assert "the disk is full" in errors[0].message and "cannot rollback" not in errors[0].message
            before = _readable(data)  # what was committed before the fault is there and loads
            assert stored_prompts(before) in ([], [f"full at {k}"]), k

            fault.full = False  # room again: the same session goes on
            fake.script.clear()
            fake.add(Turn(text="one"), Turn(text="two"))
            assert (await run(session, "next one"))[-1].reason == "done", k
            assert (await run(session, "next two"))[-1].reason == "done", k
            await session.aclose()
            resumed = await open_session(fake, wire, cwd, resume=True)
            fake.add(Turn(text="three"))
            assert (await run(resumed, "after the resume"))[-1].reason == "done", k
            await resumed.aclose()
            messages = stored_messages()
            assert stored_prompts(messages) == [f"full at {k}", "next one", "next two", "after the resume"], k
            assert no_two_responses_in_a_row(messages), k
    assert_valid(fake.model_requests)
    assert not fake.rejections, fake.rejections


def _readable(data: Path) -> list[Any]:
    with Store.open(data / "ketch.db", write=False) as store:
        rows = store.list_sessions()
        return store.load_messages(rows[0].id) if rows else []


def test_a_real_full_disk_rolls_back_one_write_and_keeps_the_rest(tmp_path: Path) -> None:
    """SQLite rolls a transaction back by itself on SQLITE_FULL; the store reports one line and
    the next write (with room) stores what the failed one held."""
    fault = DiskFull(at=1)
    path = tmp_path / "ketch.db"
    with Store.open(path, write_fault=fault) as store:
        sid = store.reserve_session("/p", "m", "a")
        first = [ModelRequest(parts=[UserPromptPart("kept")]), ModelResponse(parts=[TextPart("yes")])]
        store.append_step(sid, first)
        with pytest.raises(StoreError) as raised:
            store.append_step(sid, [ModelRequest(parts=[UserPromptPart("lost for now")])])
        message = str(raised.value)
        assert "\n" not in message and str(tmp_path) in message and "disk is full" in message
        assert [m.parts[0].content for m in store.load_messages(sid)] == ["kept", "yes"]
        fault.full = False
        store.append_step(sid, [ModelRequest(parts=[UserPromptPart("stored now")])])
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone() == (3,)
        assert conn.execute("SELECT COUNT(*) FROM prompt_history").fetchone() == (0,)  # the filler never landed


def _read_only_now(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA query_only = ON")  # SQLite itself refuses the write: SQLITE_READONLY
    try:
        conn.execute("INSERT INTO prompt_history (project, ts, text) VALUES ('-', 0, '-')")
    finally:
        conn.execute("PRAGMA query_only = OFF")


def _io_error(conn: sqlite3.Connection) -> None:
    exc = sqlite3.OperationalError("disk I/O error")
    exc.sqlite_errorname = "SQLITE_IOERR_WRITE"  # type: ignore[attr-defined]
    raise exc


@pytest.mark.parametrize(("fault", "words"), [(_read_only_now, "read-only"), (_io_error, "disk I/O error")])
def test_a_read_only_or_failing_disk_mid_session_is_one_line_and_keeps_the_rest(tmp_path: Path, fault: Any, words: str) -> None:
    armed = False

    def maybe(conn: sqlite3.Connection) -> None:
        if armed:
            fault(conn)

    path = tmp_path / "ketch.db"
    with Store.open(path, write_fault=maybe) as store:
        sid = store.reserve_session("/p", "m", "a")
        store.append_step(sid, [ModelRequest(parts=[UserPromptPart("kept")])])
        armed = True
        with pytest.raises(StoreError) as raised:
            store.append_step(sid, [ModelResponse(parts=[TextPart("not stored")])])
        assert words in str(raised.value) and str(tmp_path) in str(raised.value) and "\n" not in str(raised.value)
        assert [m.parts[0].content for m in store.load_messages(sid)] == ["kept"]
        armed = False
        store.append_step(sid, [ModelResponse(parts=[TextPart("stored")])])
        assert len(store.load_messages(sid)) == 2

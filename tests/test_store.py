"""The session store, checked against the bytes and rows of a real SQLite file."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from ketch.protocol.events import ToolCallFinished, TurnStarted
from ketch.state.export import export_session
from ketch.state.store import SCHEMA_VERSION, Store, StoreError

SRC = Path(__file__).resolve().parents[1] / "src"
T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)


def sample_step(n: int) -> list[ModelMessage]:
    """A step with every kind of part whose opaque payload must survive storage."""
    return [
        ModelRequest(
            parts=[SystemPromptPart("be brief", timestamp=T0), UserPromptPart(f"prompt {n}", timestamp=T0)],
            timestamp=T0,
            instructions="ins",
            run_id=f"run-{n}",
        ),
        ModelResponse(
            parts=[
                ThinkingPart("thinking…", id=f"rs_{n}", signature="c2lnbmF0dXJl==", provider_name="openai"),
                TextPart(
                    f"answer {n}",
                    id=f"msg_{n}",
                    provider_name="openai",
                    provider_details={"phase": "final", "nested": [1, {"a": None}]},
                ),
                ToolCallPart("read_file", {"path": "a.py"}, f"call_{n}", id=f"fc_{n}", provider_name="openai"),
                ToolCallPart("shell", '{"command": "ls"}', f"call_{n}b"),
                NativeToolCallPart("web_search", {"query": "q"}, f"ws_{n}", provider_name="openai"),
                NativeToolReturnPart(
                    "web_search",
                    {"status": "completed", "sources": [{"url": "https://example.com"}]},
                    f"ws_{n}",
                    provider_name="openai",
                    provider_details={"opaque": "blob"},
                    timestamp=T0,
                ),
            ],
            usage=RequestUsage(input_tokens=100, output_tokens=20),
            model_name="gpt-x",
            timestamp=T0,
            provider_name="openai",
            provider_details={"finish_reason": "tool_calls"},
            provider_response_id=f"resp_{n}",
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("read_file", "print('hi')\n" * 3, f"call_{n}", timestamp=T0),
                ToolReturnPart("shell", "no such command", f"call_{n}b", outcome="failed", timestamp=T0),
            ],
            timestamp=T0,
        ),
    ]


def rows(path: Path, sql: str, *args: object) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql, args).fetchall()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "ketch.db"


def test_open_creates_dirs_wal_and_schema_version(db: Path) -> None:
    with Store.open(db):
        pass
    assert db.is_file()
    assert rows(db, "SELECT schema_version FROM meta") == [(SCHEMA_VERSION,)]
    assert rows(db, "PRAGMA journal_mode") == [("wal",)]
    tables = {r[0] for r in rows(db, "SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"meta", "sessions", "messages", "events", "pending", "prompt_history", "memory_notes"} <= tables


def test_default_path_follows_ketch_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KETCH_DATA_DIR", str(tmp_path / "kd"))
    with Store.open() as store:
        assert store.path == tmp_path / "kd" / "ketch.db"
    assert (tmp_path / "kd" / "ketch.db").is_file()


def _left_out(row: Any, whole: Any) -> list[Any]:
    """The values ``whole`` holds that ``row`` leaves out; everything ``row`` holds must match."""
    if isinstance(whole, dict):
        assert isinstance(row, dict) and set(row) <= set(whole)
        return [v for k, v in whole.items() if k not in row] + [x for k in row for x in _left_out(row[k], whole[k])]
    if isinstance(whole, list):
        assert isinstance(row, list) and len(row) == len(whole)
        return [x for r, w in zip(row, whole) for x in _left_out(r, w)]
    assert row == whole
    return []


def test_messages_round_trip_exactly_and_rows_hold_sdk_json(db: Path) -> None:
    step0, step1 = sample_step(0), sample_step(1)
    with Store.open(db) as store:
        sid = store.create_session("/proj", "openai:gpt-x", "build")
        store.append_step(sid, step0, [TurnStarted(prompt="prompt 0")])
        store.append_step(sid, step1)
    with Store.open(db) as store:
        assert store.load_messages(sid) == step0 + step1
    stored = rows(db, "SELECT seq, step, data FROM messages WHERE session_id=? ORDER BY seq", sid)
    assert [(s, st) for s, st, _ in stored] == [(0, 0), (1, 0), (2, 0), (3, 1), (4, 1), (5, 1)]
    # Each row is the SDK's JSON less the fields at their plain default, which the SDK fills back in.
    full = json.loads(ModelMessagesTypeAdapter.dump_json(step0 + step1))
    kept = [json.loads(d) for _, _, d in stored]
    assert ModelMessagesTypeAdapter.validate_python(kept) == step0 + step1
    left_out = [left for row, whole in zip(kept, full, strict=True) for left in _left_out(row, whole)]
    assert left_out and {json.dumps(value) for value in left_out} <= {"null", '"complete"', '"conversation"', '"success"', "0", "0.0"}
    assert json.loads(stored[1][2])["parts"][0]["signature"] == "c2lnbmF0dXJl=="
    assert rows(db, "SELECT seq, data FROM events WHERE session_id=?", sid) == [
        (0, json.dumps(TurnStarted(prompt="prompt 0").to_dict()))
    ]


def test_append_step_is_atomic_when_a_row_fails(db: Path) -> None:
    with Store.open(db) as store:
        sid = store.create_session("/proj", "m", "build")
        store.append_step(sid, sample_step(0))
        with sqlite3.connect(db) as conn:  # make the last insert of the next step fail
            conn.execute(
                "CREATE TRIGGER boom BEFORE INSERT ON events WHEN new.data LIKE '%boom%'"
                " BEGIN SELECT RAISE(ABORT, 'disk on fire'); END"
            )
        with pytest.raises(StoreError, match="disk on fire") as info:
            store.append_step(sid, sample_step(1), [TurnStarted(prompt="fine"), TurnStarted(prompt="boom")])
        assert str(db) in str(info.value)
        store.append_step(sid, sample_step(2))  # the store is still usable
    assert rows(db, "SELECT seq, step FROM messages") == [(0, 0), (1, 0), (2, 0), (3, 1), (4, 1), (5, 1)]
    assert rows(db, "SELECT COUNT(*) FROM events") == [(0,)]


def test_events_pending_and_replace_history(db: Path) -> None:
    finished = ToolCallFinished(call_id="c1", name="shell", summary="ok")
    with Store.open(db) as store:
        sid = store.create_session("/proj", "m", "build")
        store.append_step(sid, sample_step(0), [finished])
        assert store.load_events(sid) == [finished.to_dict()]
        store.set_pending(sid, [{"tool_call_id": "c9", "tool_name": "shell", "args": {"command": "rm x"}}])
        assert rows(db, "SELECT session_id FROM pending") == [(sid,)]
        assert store.get_pending(sid)[0]["tool_call_id"] == "c9"
        store.set_pending(sid, None)
        assert store.get_pending(sid) is None
        short = sample_step(5)[:2]
        store.replace_history(sid, short)
        assert store.load_messages(sid) == short
    assert rows(db, "SELECT seq FROM messages ORDER BY seq") == [(0,), (1,)]


def test_sessions_listing_prefix_latest_fork_and_title(db: Path) -> None:
    with Store.open(db) as store:
        a = store.create_session("/p1", "m1", "build")
        time.sleep(0.002)
        b = store.create_session("/p1", "m2", "plan")
        c = store.create_session("/p2", "m1", "build")
        assert a < b < c  # ids sort by creation time
        store.append_step(b, sample_step(0))
        store.append_step(c, sample_step(0))
        store.append_step(a, sample_step(0))  # a becomes the most recently updated in /p1
        store.set_title(a, "fix the bug")
        assert store.latest_session("/p1").id == a
        assert store.latest_session("/nowhere") is None
        assert [s.id for s in store.list_sessions("/p1")] == [a, b]
        assert {s.id for s in store.list_sessions()} == {a, b, c}
        row = store.get_session(a[:-2])
        assert (row.id, row.title, row.message_count, row.parent_id) == (a, "fix the bug", 3, None)
        with pytest.raises(StoreError, match="several"):
            store.get_session(a[:3])
        assert store.get_session("zzzz") is None
        child = store.fork(a)
        assert store.get_session(child).parent_id == a
        assert store.load_messages(child) == store.load_messages(a)
    assert rows(db, "SELECT parent_id, cwd, title FROM sessions WHERE id=?", child) == [(a, "/p1", "fix the bug")]


def test_delete_session_removes_exactly_that_session_and_everything_under_it(db: Path) -> None:
    finished = ToolCallFinished(call_id="c1", name="shell", summary="ok")
    with Store.open(db) as store:
        keep = store.create_session("/p", "m", "build")
        store.append_step(keep, sample_step(0), [finished])
        gone = store.fork(keep)
        store.set_pending(gone, [{"tool_call_id": "c9", "tool_name": "shell", "args": {}}])
        reserved = store.reserve_session("/p", "m", "build")
        assert not store.delete_session(gone[:-1])  # a prefix names nothing here
        assert store.delete_session(gone) and not store.delete_session(gone)
        assert store.delete_session(reserved) is False and not store.is_reserved(reserved)
        assert [s.id for s in store.list_sessions()] == [keep] and store.load_messages(keep) == sample_step(0)
    for table, column in (("sessions", "id"), ("messages", "session_id"), ("events", "session_id"), ("pending", "session_id")):
        assert {r[0] for r in rows(db, f"SELECT DISTINCT {column} FROM {table}")} <= {keep}


def test_a_reserved_session_is_written_with_its_first_message_and_never_before(db: Path) -> None:
    with Store.open(db) as store:
        legacy_empty = store.create_session("/p", "m", "build")  # what an older ketch left behind
        sid = store.reserve_session("/p", "openai:gpt-x", "plan")
        assert sid > legacy_empty and store.is_reserved(sid)
        store.append_step(sid, [], [TurnStarted(prompt="cancelled before the request")])
        store.replace_history(sid, [])
        store.set_title(sid, "named early")
        assert rows(db, "SELECT id FROM sessions") == [(legacy_empty,)]
        assert rows(db, "SELECT COUNT(*) FROM events") == [(0,)]
        assert store.get_session(sid) is None
        assert store.latest_session("/p") is None and store.list_sessions() == []  # empty rows are not offered

        store.append_step(sid, sample_step(0), [TurnStarted(prompt="prompt 0")])
        assert not store.is_reserved(sid)
        store.append_step(sid, sample_step(1))
        assert store.latest_session("/p").id == sid
        assert [s.id for s in store.list_sessions("/p")] == [sid]
        other = store.reserve_session("/p", "m", "build")
        assert other > sid
        store.replace_history(other, sample_step(2))  # a compacted first history writes the row too
    got = rows(db, "SELECT id, cwd, model, agent, title, created <= updated FROM sessions ORDER BY id")
    assert got == [(legacy_empty, "/p", "m", "build", "", 1), (sid, "/p", "openai:gpt-x", "plan", "named early", 1),
                   (other, "/p", "m", "build", "", 1)]
    assert rows(db, "SELECT session_id, COUNT(*) FROM messages GROUP BY session_id ORDER BY session_id") == [
        (sid, 6), (other, 3)]


def test_prompt_history_per_project_oldest_first_collapsing_repeats(db: Path) -> None:
    with Store.open(db) as store:
        for text in ["one", "two", "two", "  ", "three", "two"]:
            store.add_prompt("/p", text)
        store.add_prompt("/other", "elsewhere")
        assert store.prompt_history("/p") == ["one", "two", "three", "two"]
        assert store.prompt_history("/p", limit=2) == ["three", "two"]
    assert rows(db, "SELECT COUNT(*) FROM prompt_history WHERE project='/p'") == [(5,)]


def test_export_markdown_and_json(db: Path) -> None:
    with Store.open(db) as store:
        sid = store.create_session("/proj", "openai:gpt-x", "build")
        store.set_title(sid, "Reading files")
        store.append_step(sid, sample_step(0), [ToolCallFinished(call_id="call_0", name="read_file", summary="3 lines")])
        md = export_session(store, sid, "md")
        record = json.loads(export_session(store, sid[:8], "json"))
    assert md.startswith("# Reading files\n")
    assert "## User\n\nprompt 0" in md
    # the reasoning is kept folded ahead of the answer it led to (9dc6295), the system prompt is not exported
    assert "## Assistant\n\n<details><summary>Thinking</summary>\n\nthinking…\n\n</details>\n\nanswer 0" in md
    assert '**tool** `read_file` `{"path": "a.py"}`' in md
    assert "> read_file → 3 lines" in md  # the event's summary, not the raw result
    assert "**hosted tool** `web_search`" in md
    assert "> error: shell → no such command" in md
    assert md.count("thinking…") == 1 and "be brief" not in md
    assert record["session"]["id"] == sid and record["session"]["title"] == "Reading files"
    assert ModelMessagesTypeAdapter.validate_python(record["messages"]) == sample_step(0)
    assert record["events"][0]["summary"] == "3 lines"


@pytest.mark.parametrize(
    "data",
    [
        '{"parts": [{"content": "cut off',  # not JSON
        '{"parts": [{"content": 7, "timestamp": "2026-01-02T03:04:05Z", "part_kind": "user-prompt"}], "kind": "request"}',
        '{"parts": [], "kind": "telegram"}',
        "[]",
    ],
)
def test_a_message_row_that_cannot_be_read_raises_store_error_naming_session_and_file(db: Path, data: str) -> None:
    with Store.open(db) as store:
        sid = store.create_session("/proj", "m", "build")
        store.append_step(sid, sample_step(0))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE messages SET data = ? WHERE session_id = ? AND seq = 1", (data, sid))
    with Store.open(db) as store, pytest.raises(StoreError) as info:
        store.load_messages(sid)
    assert sid in str(info.value) and str(db) in str(info.value) and "cannot read" in str(info.value)


def test_a_row_that_is_not_utf8_raises_store_error_naming_session_and_file(db: Path) -> None:
    with Store.open(db) as store:
        sid = store.create_session("/proj", "m", "build")
        store.append_step(sid, sample_step(0))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE messages SET data = CAST(X'7B22FF' AS TEXT) WHERE session_id = ? AND seq = 2", (sid,))
    with Store.open(db) as store, pytest.raises(StoreError) as info:
        store.load_messages(sid)
    assert sid in str(info.value) and str(db) in str(info.value)


def test_rows_written_by_older_sdks_load_through_the_adapter(db: Path) -> None:
    """A retry prompt from before the SDK split it, and usage under its old key names."""
    legacy = [
        '{"parts":[{"content":"fix the args","tool_name":"shell","tool_call_id":"c1",'
        '"timestamp":"2025-01-02T03:04:05Z","part_kind":"retry-prompt"}],"kind":"request"}',
        '{"parts":[{"content":"hi","part_kind":"text"}],"usage":{"request_tokens":5,"response_tokens":2,'
        '"details":null},"timestamp":"2025-01-02T03:04:05Z","kind":"response","vendor_id":"r1"}',
    ]
    with Store.open(db) as store:
        sid = store.create_session("/proj", "m", "build")
        store.append_step(sid, sample_step(0))
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO messages (session_id, seq, step, data) VALUES (?, ?, 1, ?)",
            [(sid, 3 + i, row) for i, row in enumerate(legacy)],
        )
    with Store.open(db) as store:
        messages = store.load_messages(sid)
    assert messages[:3] == sample_step(0)
    retry, answer = messages[3:]
    assert isinstance(retry.parts[0], ToolReturnPart) and retry.parts[0].outcome == "retried"
    assert retry.parts[0].content == "fix the args"
    assert (answer.usage.input_tokens, answer.usage.output_tokens, answer.provider_response_id) == (5, 2, "r1")


def test_garbage_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "ketch.db"
    garbage = os.urandom(4096)
    db.write_bytes(garbage)
    with pytest.raises(StoreError) as info:
        Store.open(db)
    assert str(db) in str(info.value) and "KETCH_DATA_DIR" in str(info.value)
    assert db.read_bytes() == garbage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ketch.db"]


def test_corrupt_sqlite_pages_are_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "ketch.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE meta (schema_version INTEGER)")
    data = bytearray(db.read_bytes())
    data[100:] = b"\xff" * (len(data) - 100)  # keep the header, wreck the schema page
    db.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=str(db)):
        Store.open(db)
    assert db.read_bytes() == bytes(data)


def test_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "ketch.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE meta (schema_version INTEGER NOT NULL)")
        conn.execute("INSERT INTO meta VALUES (999)")
    before = db.read_bytes()
    with pytest.raises(StoreError) as info:
        Store.open(db)
    assert str(db) in str(info.value) and "999" in str(info.value) and "upgrade" in str(info.value)
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ketch.db"]


def test_old_schema_is_migrated_in_place(tmp_path: Path) -> None:
    db = tmp_path / "ketch.db"
    with Store.open(db) as store:
        sid = store.create_session("/p", "m", "a")
    with sqlite3.connect(db) as conn:  # pretend the memory migration never ran
        conn.execute("DROP TABLE memory_notes")
        conn.execute("UPDATE meta SET schema_version = 1")
    with Store.open(db) as store:
        assert store.get_session(sid) is not None
    assert rows(db, "SELECT schema_version FROM meta") == [(SCHEMA_VERSION,)]
    assert rows(db, "SELECT name FROM sqlite_master WHERE name='memory_notes'") == [("memory_notes",)]


CRASH_SCRIPT = """
import os, signal, sys
from ketch.state.store import Store
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

store = Store.open(sys.argv[1])
sid, self_kill_after = sys.argv[2], int(sys.argv[3])
big = "x" * 20000

inserts = 0

def die_inside_the_step(statement):
    # SQLite calls this for each statement; dying at the second message row of a step
    # leaves its first row written but not committed.
    global inserts
    if statement.startswith("INSERT INTO messages"):
        inserts += 1
        if inserts == 2:
            os.kill(os.getpid(), signal.SIGKILL)

for n in range(100000):
    if n == self_kill_after + 1:
        store.connection.set_trace_callback(die_inside_the_step)
    store.append_step(sid, [
        ModelRequest(parts=[UserPromptPart(f"step {n}")]),
        ModelResponse(parts=[TextPart(big), ToolCallPart("shell", {"n": n}, f"c{n}")]),
        ModelRequest(parts=[ToolReturnPart("shell", big, f"c{n}")]),
    ], [{"type": "notice", "text": f"step {n}"}])
    print(n, flush=True)
"""


@pytest.mark.parametrize("killer", ["parent", "self"])
def test_kill_9_leaves_a_prefix_of_whole_steps(db: Path, killer: str) -> None:
    """SIGKILL from outside at a random moment, or from inside between two rows of one step."""
    with Store.open(db) as store:
        sid = store.create_session("/p", "m", "a")
    env = {**os.environ, "PYTHONPATH": str(SRC), "PYDANTIC_AI_NO_BANNER": "1"}
    self_kill_after = 30 if killer == "self" else 10**9
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASH_SCRIPT, str(db), sid, str(self_kill_after)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    confirmed = -1
    try:
        assert proc.stdout is not None
        while confirmed < 30:
            line = proc.stdout.readline()
            assert line, "the writer died early"
            confirmed = int(line)
        if killer == "parent":
            time.sleep(0.013)  # land somewhere inside a later step
            proc.send_signal(signal.SIGKILL)
        else:
            proc.wait(timeout=30)  # it kills itself inside the next step
    finally:
        proc.kill()
        assert proc.wait() == -signal.SIGKILL
    with Store.open(db) as store:
        messages = store.load_messages(sid)
        events = store.load_events(sid)
    assert len(messages) % 3 == 0
    steps = len(messages) // 3
    assert steps > confirmed  # every step reported as committed is there
    if killer == "self":
        assert steps == confirmed + 1  # the step being written when it died is gone entirely
    assert [m.parts[0].content for m in messages[::3]] == [f"step {n}" for n in range(steps)]
    assert [e["text"] for e in events] == [f"step {n}" for n in range(steps)]
    assert rows(db, "SELECT step, COUNT(*) FROM messages GROUP BY step HAVING COUNT(*) != 3") == []


def test_append_stays_fast_with_a_long_history(db: Path) -> None:
    """An append's work does not grow with the history: the SQL an append runs (traced on the
    store's connection; numbers aside) is the same at 10 messages as at 10,000. The time target itself is
    bench/resume.py's (appending one step < 5 ms)."""

    def statements_of_an_append(history: int, session: str) -> list[str]:
        sid = store.create_session(f"/p/{session}", "m", "a")
        store.append_step(sid, [ModelRequest(parts=[UserPromptPart("filler " * 50, timestamp=T0)])] * history)
        seen: list[str] = []
        store._conn.set_trace_callback(seen.append)
        try:
            store.append_step(sid, sample_step(0))
        finally:
            store._conn.set_trace_callback(None)
        return [re.sub(r"\d+", "N", " ".join(sql.replace(sid, "SID").split())) for sql in seen]

    with Store.open(db) as store:
        short = statements_of_an_append(10, "short")
        long = statements_of_an_append(10_000, "long")
    assert short and long == short

"""The stored history follows the history in memory at the cost of what changed: a step writes
its new rows whatever the session's length, pruning rewrites only the rows it changed, and a
failed write is retried whole by the next one."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

from ketch.state.history_writer import HistoryWriter
from ketch.state.store import Store, StoreError


def _step(n: int) -> list:
    return [
        ModelResponse(parts=[TextPart(f"step {n}"), ToolCallPart("read_file", {"path": f"f{n}"}, f"c{n}")]),
        ModelRequest(parts=[ToolReturnPart("read_file", f"contents {n}", f"c{n}")]),
    ]


class _Statements:
    """Every statement the store's connection runs, for counting the rows a write touches."""

    def __init__(self, store: Store) -> None:
        self.seen: list[str] = []
        store.connection.set_trace_callback(self.seen.append)

    def rows_written(self) -> int:
        return sum(1 for s in self.seen if s.startswith("INSERT INTO messages"))

    def clear(self) -> None:
        self.seen.clear()


@pytest.mark.parametrize("length", [10, 1000])
def test_a_step_writes_only_its_new_rows_whatever_the_length(tmp_path: Path, length: int) -> None:
    with Store.open(tmp_path / "ketch.db") as store:
        sid = store.reserve_session("/p", "m", "a")
        history = [ModelRequest(parts=[UserPromptPart("go")])]
        for n in range(length // 2):
            history += _step(n)
        writer = HistoryWriter(store, sid)
        writer.commit(history)
        statements = _Statements(store)
        history = [*history, *_step(length)]  # a new list, the same message objects: as the SDK hands them
        writer.commit(history, [{"type": "notice", "text": "x"}])
        assert statements.rows_written() == 2
        assert store.load_messages(sid) == history


def test_pruning_rewrites_only_the_rows_it_changed(tmp_path: Path) -> None:
    with Store.open(tmp_path / "ketch.db") as store:
        sid = store.reserve_session("/p", "m", "a")
        history = [ModelRequest(parts=[UserPromptPart("go")])]
        for n in range(20):
            history += _step(n)
        writer = HistoryWriter(store, sid)
        writer.commit(history)
        pruned = list(history)
        for i in (2, 4):  # two tool results become placeholders, in place
            request = pruned[i]
            pruned[i] = dataclasses.replace(request, parts=[dataclasses.replace(request.parts[0], content="(pruned)")])
        pruned[10] = dataclasses.replace(pruned[10])  # a copy with the same content: not rewritten
        statements = _Statements(store)
        writer.commit(pruned)
        assert statements.rows_written() == 2
        assert store.load_messages(sid) == pruned

        statements.clear()
        shorter = [ModelRequest(parts=[UserPromptPart("summary")]), *pruned[-4:]]  # a summary replaced the start
        writer.commit(shorter)
        assert store.load_messages(sid) == shorter
        assert statements.rows_written() == len(shorter)  # every position changed


def test_a_resumed_history_is_compared_with_the_rows_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "ketch.db"
    with Store.open(path) as store:
        sid = store.reserve_session("/p", "m", "a")
        history = [ModelRequest(parts=[UserPromptPart("go")]), *_step(0), *_step(1)]
        HistoryWriter(store, sid).commit(history)
    with Store.open(path) as store:
        loaded = store.load_messages(sid)
        writer = HistoryWriter(store, sid, loaded)
        statements = _Statements(store)
        writer.commit([*loaded, *_step(2)])
        assert statements.rows_written() == 2
        assert len(store.load_messages(sid)) == 7


def test_a_failed_write_is_retried_whole_by_the_next(tmp_path: Path) -> None:
    failing = True

    def fault(conn: sqlite3.Connection) -> None:
        if failing:
            raise sqlite3.OperationalError("disk I/O error")

    with Store.open(tmp_path / "ketch.db", write_fault=fault) as store:
        sid = store.reserve_session("/p", "m", "a")
        writer = HistoryWriter(store, sid)
        history = [ModelRequest(parts=[UserPromptPart("go")]), *_step(0)]
        with pytest.raises(StoreError):
            writer.commit(history)
        assert store.is_reserved(sid)  # nothing of the failed write reached the disk
        failing = False
        longer = [*history, *_step(1)]
        writer.commit(longer)
        assert store.load_messages(sid) == longer


def test_a_history_changed_in_place_is_found_after_recheck(tmp_path: Path) -> None:
    """A repair at load rewrites tool calls in place (same objects): ``recheck`` makes the next
    write compare every message by content."""
    with Store.open(tmp_path / "ketch.db") as store:
        sid = store.reserve_session("/p", "m", "a")
        history = [ModelRequest(parts=[UserPromptPart("go")]), *_step(0), *_step(1), *_step(2)]
        HistoryWriter(store, sid).commit(history)
        loaded = store.load_messages(sid)
        writer = HistoryWriter(store, sid, loaded)
        loaded[1].parts[1].args = {"repaired": True}  # in place, as strict_args.sanitize_history does
        writer.recheck()
        statements = _Statements(store)
        writer.commit(loaded)
        assert statements.rows_written() == 1
        assert store.load_messages(sid)[1].parts[1].args == {"repaired": True}

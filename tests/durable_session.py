"""Helpers for the tests of what a stopped turn leaves stored: one scripted turn, sessions built
by the real wiring, and readers of the stored history."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fakeprovider import FakeProvider, ToolCall, Turn
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolReturnPart, UserPromptPart

from ketch.protocol import events as ev
from ketch.frontends.assemble import build_session
from ketch.state.store import Store

WIRES = ["openai-chat", "openai-responses", "anthropic-messages"]
LONG_ANSWER = [f"piece{i} " for i in range(12)]


def scripted_turn(tag: str, *, chunk_delay: float = 0.0) -> list[Turn]:
    """One turn of three steps: a call, two parallel calls, then an answer streamed in pieces."""
    return [
        Turn(text=f"Reading ({tag}).", tool_calls=[ToolCall("read_file", {"path": "a.txt"}, id=f"{tag}_1")]),
        Turn(tool_calls=[ToolCall("read_file", {"path": "b.txt"}, id=f"{tag}_2"),
                         ToolCall("list_dir", {"path": "."}, id=f"{tag}_3")]),
        Turn(text="".join(LONG_ANSWER) + tag, text_pieces=[*LONG_ANSWER, tag], chunk_delay=chunk_delay),
    ]


def workdir(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir(exist_ok=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "b.txt").write_text("beta\n")
    return root


def args_for(fake: FakeProvider, wire: str, cwd: Path, **extra: Any) -> argparse.Namespace:
    base = fake.base_url if wire != "anthropic-messages" else fake.base_url.removesuffix("/v1")
    return argparse.Namespace(cwd=str(cwd), model="fake-model", wire=wire, base_url=base, yolo=True, **extra)


async def open_session(fake: FakeProvider, wire: str, cwd: Path, *, resume: bool = False, **extra: Any) -> Any:
    return await build_session(args_for(fake, wire, cwd, continue_=resume, **extra), interactive=False)


async def run(session: Any, prompt: str, *, cancel_at: int | None = None) -> list[ev.AgentEvent]:
    """The events of one turn; with ``cancel_at`` the turn is cancelled (as Esc or SIGINT do) right
    after its event number ``cancel_at`` arrived."""
    seen: list[ev.AgentEvent] = []
    async for event in session.run_turn(prompt):
        seen.append(event)
        if cancel_at is not None and len(seen) == cancel_at + 1:
            session.cancel_turn()
    return seen


def stored_messages(session_id: str | None = None) -> list[Any]:
    with Store.open() as store:
        if session_id is None:
            [row] = store.list_sessions()
            session_id = row.id
        return store.load_messages(session_id)


def stored_prompts(messages: list[Any]) -> list[str]:
    """What the user typed, in order (ketch's state reminders are not prompts)."""
    from ketch.context.reminders import is_reminder

    return [p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts
            if isinstance(p, UserPromptPart) and isinstance(p.content, str) and not is_reminder(p)]


def stored_text(messages: list[Any]) -> str:
    return "\n".join(p.content for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, TextPart))


def stored_results(messages: list[Any]) -> dict[str, str]:
    return {p.tool_call_id: str(p.content) for m in messages if isinstance(m, ModelRequest) for p in m.parts
            if isinstance(p, ToolReturnPart)}


def no_two_responses_in_a_row(messages: list[Any]) -> bool:
    return all(not (isinstance(a, ModelResponse) and isinstance(b, ModelResponse)) for a, b in zip(messages, messages[1:]))


class DiskFull:
    """A ``Store`` write fault: from write number ``at`` on (while ``full``), the write runs out of
    room for real. Just before the commit an SQLite page limit at the file's current size is set
    and a row that needs a new page is inserted, so SQLite itself fails with SQLITE_FULL (and
    rolls the transaction back on its own, as on a full disk)."""

    def __init__(self, at: int | None) -> None:
        self.at = at
        self.writes = 0
        self.full = True
        self.failed = 0

    def __call__(self, conn: Any) -> None:
        n, self.writes = self.writes, self.writes + 1
        if self.at is None or not self.full or n < self.at:
            return
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages}")
        try:
            self.failed += 1
            conn.execute("INSERT INTO prompt_history (project, ts, text) VALUES ('-', 0, ?)", ("x" * 100_000,))
        finally:
            conn.execute("PRAGMA max_page_count = 1073741823")

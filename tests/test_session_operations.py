"""``Session.apply``: the operations front ends send, judged by the conversations the store
holds afterwards (a fresh connection to the database reads them) and by the requests the model
gets. The terminal's ``/clear`` and ``/fork`` move to a new id; an editor's keep theirs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import Turn, user_texts

from ketch.protocol import operations as op


def _prompts(messages: list[Any]) -> list[str]:
    return [p.content for m in messages for p in getattr(m, "parts", []) if getattr(p, "part_kind", "") == "user-prompt"
            and isinstance(p.content, str) and p.content.endswith("question")]


async def test_clear_and_fork_in_place_and_not(tmp_path: Path, isolated_home: Path, fake_provider: Any) -> None:
    from ketch.frontends.assemble import build_session
    from ketch.state.resume import open_store

    fake = fake_provider([Turn(text="one"), Turn(text="two"), Turn(text="three")])
    args = argparse.Namespace(cwd=str(tmp_path), model="fake-model", wire="openai-chat", base_url=fake.base_url, yolo=True)
    session = await build_session(args, interactive=True)
    try:
        assert session.apply(op.Fork()) is None and session.apply(op.Fork(in_place=True)) is None  # nothing stored yet
        [e async for e in session.run_turn("first question")]
        editor_id = session.session_id
        forked_in_place = session.apply(op.Fork(in_place=True))
        cleared_in_place = session.apply(op.Clear(in_place=True))
        assert session.session_id == editor_id and session.messages == []
        probe = open_store()  # what an editor loading the id now would get
        try:
            assert probe.load_messages(editor_id) == [] and probe.get_session(editor_id).title == ""
        finally:
            probe.close()
        [e async for e in session.run_turn("second question")]
        forked = session.apply(op.Fork())
        assert session.session_id == forked
        [e async for e in session.run_turn("third question")]
        cleared = session.apply(op.Clear(str(tmp_path)))
        assert session.session_id == cleared and session.messages == [] and session.store.is_reserved(cleared)
        with pytest.raises(TypeError):
            session.apply("clear")  # type: ignore[arg-type]
    finally:
        await session.aclose()
    asked = [[t for t in user_texts(r) if t.endswith("question")] for r in fake.model_requests]
    assert asked == [["first question"], ["second question"], ["second question", "third question"]]  # /clear emptied it, /fork kept it
    store = open_store()
    try:
        held = {sid: _prompts(store.load_messages(sid)) for sid in (editor_id, forked_in_place, cleared_in_place, forked)}
        unwritten = store.get_session(cleared) is None
    finally:
        store.close()
    assert len({editor_id, forked_in_place, cleared_in_place, forked, cleared}) == 5
    assert held == {editor_id: ["second question"], forked_in_place: ["first question"],
                    cleared_in_place: ["first question"], forked: ["second question", "third question"]}
    assert unwritten  # a terminal /clear's new id is written with its first prompt

"""A session made in the terminal UI (the real ``ketch`` in tmux) is loaded by an editor over
ACP and continued there, then resumed in the terminal UI and continued again: one history,
each prompt once, in the model's requests, the store, the editor's replay and the scrollback.
Driven by both official ACP clients (``test_acp_editor.run_editor``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, Turn, user_texts
from test_acp_editor import editor, run_editor  # noqa: F401 - the fixture both clients run under
from tmux_pane import tmux_pane

acp = pytest.importorskip("acp")


def _prompts_in(screen: str, prompt: str) -> int:
    """How many times the scrollback shows ``prompt`` as a user prompt (``› prompt``)."""
    return sum(1 for line in screen.splitlines() if line.rstrip() == f"› {prompt}")


def test_a_terminal_ui_session_goes_on_in_the_editor_and_back_in_the_terminal_ui(tmp_path: Path, editor: str) -> None:  # noqa: F811
    from ketch.state.store import Store

    script = [Turn(text="answer one"), Turn(text="answer two"), Turn(text="answer three")]
    with FakeProvider(script) as fake, tmux_pane(tmp_path, f"acp-{editor}", columns=120, rows=40) as pane:
        flags = f"--base-url {fake.base_url} --wire openai-chat --model fake-model"
        pane.keys(f"ketch {flags}", "Enter")
        pane.wait("adhoc:fake-model · think off", 60)
        pane.keys("first prompt", "Enter")
        pane.wait("answer one", 60)
        pane.keys("/quit", "Enter")
        shown = pane.wait("Resume with:", 60)
        sid = re.search(r"Resume with: .+ --resume (\w+)", shown).group(1)  # type: ignore[union-attr]

        seen = run_editor({"steps": [
            {"op": "initialize"},
            {"op": "list"},
            {"op": "load", "id": sid},
            {"op": "prompt", "session": sid, "text": "second prompt"},
        ]}, tmp_path / "wire.log", fake.base_url, tmp_path, editor=editor)
        assert not seen["errors"], seen["errors"]

        again = "--continue" if editor == "typescript" else f"--resume {sid}"  # both ways back
        pane.keys(f"ketch {flags} {again}", "Enter")
        pane.wait("Resumed session", 60)
        pane.keys("third prompt", "Enter")
        pane.wait("answer three", 60)
        resumed = pane.screen()
        pane.keys("/quit", "Enter")
        pane.wait(f"--resume {sid}", 60)

    # the editor: listed with its first prompt, replayed once, answered in the same session
    [listed] = [s for s in seen["responses"][1]["result"]["sessions"] if s["sessionId"] == sid]
    assert listed["cwd"] == str(tmp_path)
    updates = [u["update"] for u in seen["updates"] if u["sessionId"] == sid]
    assert [u["content"]["text"] for u in updates if u["sessionUpdate"] == "user_message_chunk"] == ["first prompt"]
    said = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert said.count("answer one") == 1 and said.endswith("answer two")
    assert seen["responses"][-1]["result"]["stopReason"] == "end_turn"

    # the model: one conversation growing by one prompt each time
    assert [user_texts(r) for r in fake.model_requests] == [
        ["first prompt"], ["first prompt", "second prompt"], ["first prompt", "second prompt", "third prompt"]]

    # the terminal UI, resumed: the editor's turn is in its history once, then the new one
    after = resumed[resumed.index("Resumed session"):]
    assert [_prompts_in(after, p) for p in ("first prompt", "second prompt", "third prompt")] == [1, 1, 1], after
    assert after.index("answer two") < after.index("› third prompt") < after.index("answer three")

    # the store: one session, each prompt once
    with Store.open() as store:
        assert [r.id for r in store.list_sessions(str(tmp_path))] == [sid]
        prompts = [p.content for m in store.load_messages(sid) for p in getattr(m, "parts", ())
                   if type(p).__name__ == "UserPromptPart" and isinstance(p.content, str)]
    assert [p for p in prompts if p.endswith("prompt")] == ["first prompt", "second prompt", "third prompt"]

"""A session the provider keeps rejecting for its history can always be continued."""

from __future__ import annotations

import json
from pathlib import Path

from fakeprovider import FakeProvider, ToolCall, Turn, tool_results, user_texts
from kettle import adhoc, run_ketch

from ketch.state.repair import REPAIR_NOTE

REJECTION = {"error": {"code": 500, "message": "Failed to parse messages[3].tool_calls: number out of range",
                       "type": "server_error"}}


def _rejected_session(tmp_path: Path) -> tuple[str, list]:
    """Two good turns, then a third the provider rejects (as it would every later one)."""
    (tmp_path / "a.txt").write_text("alpha\n")
    script = [Turn(text="First answer."), Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]), Turn(text="It says alpha.")]
    with FakeProvider(script) as fake:
        chat = adhoc(fake, "openai-chat")
        runs = [run_ketch(["-p", "one", "--output-format", "json", *chat], tmp_path),
                run_ketch(["-p", "two", "--continue", "--output-format", "json", *chat], tmp_path)]
        fake.fail_path("/chat/completions", 500, REJECTION)
        runs.append(run_ketch(["-p", "three", "--continue", "--output-format", "json", *chat], tmp_path,
                              env={"KETCH_MAX_RETRIES": "0"}))
    return json.loads(runs[0].stdout)["session_id"], runs


def test_a_rejection_names_the_part_and_offers_repair(tmp_path: Path) -> None:
    session, runs = _rejected_session(tmp_path)
    assert [r.code for r in runs] == [0, 0, 1]
    message = json.loads(runs[2].stdout)["error"]["message"]
    assert "it names messages[3] of the request" in message
    assert f"/repair, or ketch repair {session}" in message


def test_ketch_repair_replaces_the_last_exchange_with_a_note_and_keeps_the_rest(tmp_path: Path) -> None:
    session, _ = _rejected_session(tmp_path)
    with FakeProvider([Turn(text="Back on track.")]) as fake:
        repaired = run_ketch(["repair", session], tmp_path)
        after = run_ketch(["-p", "four", "--continue", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path)
    assert repaired.code == 0, repaired.stderr
    assert f"Repaired session {session}" in repaired.stdout and f"ketch --resume {session}" in repaired.stdout
    assert after.code == 0, after.stderr
    assert json.loads(after.stdout)["result"] == "Back on track."
    request = fake.model_requests[0]
    # the last answered exchange ("two", whose tool call the server cannot take) kept its prompt and
    # became a note; the rejected, unanswered "three" went with it; "one" is untouched
    assert user_texts(request) == ["one", "two", "four"]
    assert tool_results(request) == []
    assistant = [m for m in request.body["messages"] if m["role"] == "assistant"]
    assert [m["content"] for m in assistant] == ["First answer.", REPAIR_NOTE]


def test_repair_of_an_unknown_or_empty_session_is_one_line(tmp_path: Path) -> None:
    run = run_ketch(["repair", "nope"], tmp_path)
    assert run.code == 2 and run.stderr.startswith("ketch: no session 'nope'") and "Traceback" not in run.stderr


def test_repair_drops_only_from_the_last_prompt_on() -> None:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

    from ketch.state.repair import repair_last_exchange

    history = [
        ModelRequest(parts=[UserPromptPart("a")]), ModelResponse(parts=[TextPart("A")]),
        ModelRequest(parts=[UserPromptPart("b")]), ModelResponse(parts=[ToolCallPart("shell", {"command": "x"}, "c1")]),
        ModelRequest(parts=[ToolReturnPart("shell", "out", "c1")]), ModelResponse(parts=[TextPart("B")]),
    ]
    unanswered = ModelRequest(parts=[UserPromptPart("c")])
    repair = repair_last_exchange([*history, unanswered])
    assert repair is not None and repair.removed == 5 and repair.prompt == "b"
    assert repair.messages[:2] == history[:2]
    assert repair.messages[2].parts[0].content == "b" and repair.messages[3].parts[0].content == REPAIR_NOTE
    assert len(repair.messages) == 4
    again = repair_last_exchange(repair.messages)  # one exchange further back
    assert again is not None and again.prompt == "a" and len(again.messages) == 2
    assert repair_last_exchange(again.messages) is None and repair_last_exchange([]) is None


def test_the_repair_slash_command_rewrites_the_live_session_and_its_store(tmp_path: Path) -> None:
    import asyncio
    from types import SimpleNamespace

    from ketch.frontends.assemble import build_session
    from ketch.frontends.slash_actions import SlashActions
    from ketch.state.store import Store

    session_id, _ = _rejected_session(tmp_path)

    async def repair_live(base_url: str) -> str:
        args = SimpleNamespace(base_url=base_url, wire="openai-chat", model="fake-model", cwd=str(tmp_path),
                               add_dir=[], continue_=True)
        session = await build_session(args, interactive=True)
        try:
            assert session.session_id == session_id
            reply = await SlashActions(lambda: session, args, tmp_path).run("repair", "")
            assert session.messages[-1].parts[0].content == REPAIR_NOTE
            return reply
        finally:
            await session.aclose()

    with FakeProvider([]) as fake:
        reply = asyncio.run(repair_live(fake.base_url))
    assert reply.startswith(f"Repaired session {session_id}")
    store = Store.open()
    try:
        stored = store.load_messages(session_id)
    finally:
        store.close()
    assert stored[-1].parts[0].content == REPAIR_NOTE and len(stored) == 4  # one, its answer, two, the note

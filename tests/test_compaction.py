"""Context management in the loop, asserted on behaviour against the strict fake Responses server.

- A long tool loop in a small window ends because the model chose to, with every earlier call
  still visible (at least as a placeholder) and one ``compacted`` event for the turn.
- A 404 "Item with id … not found" is answered by one inline resend.
- ``ketch -p --compact --continue`` summarizes a resumed session through a tool-less call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fakeprovider import FakeProvider, RecordedRequest, ToolCall, Turn, tool_results, user_texts
from kettle import run_ketch, write_project_config
from pydantic_ai.messages import ToolReturnPart

from ketch.context.prune import SUMMARY_HEADER
from ketch.state.store import Store

KEY = {"OPENAI_API_KEY": "sk-test-1234567890"}
FILES = 30
PROMPT = "Read every file f00.txt to f29.txt and report."


def _config(root: Path, fake: FakeProvider, extra: str = "") -> None:
    write_project_config(
        root,
        'model = "openai:gpt-5"\n'
        "max_steps = 45\n"
        f"{extra}\n"
        "[connections.openai]\n"
        'preset = "openai"\n'
        'wire = "openai-responses"\n'
        f'base_url = "{fake.base_url}"\n'
        "max_retries = 0\n",
    )


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _items(req: RecordedRequest, kind: str) -> list[dict[str, Any]]:
    return [i for i in (req.body or {}).get("input", []) if isinstance(i, dict) and i.get("type") == kind]


def _reader(req: RecordedRequest) -> Turn:
    """The scripted model: read the next file until 30 results are in the request, then answer."""
    if not (req.body or {}).get("tools"):
        return Turn(text="Summary: the user asked for files to be read.")
    done = len(tool_results(req))
    if done >= FILES:
        return Turn(text=f"Read all {done} files.", reasoning="All files are read.")
    return Turn(reasoning=f"Next I read file {done}.", tool_calls=[ToolCall("read_file", {"path": f"f{done:02}.txt"})])


def _session_messages(tmp_path: Path) -> list[Any]:
    store = Store.open()
    row = store.latest_session(str(tmp_path))
    assert row is not None
    return store.load_messages(row.id)


def test_long_tool_loop_in_a_small_window_keeps_its_memory(tmp_path: Path) -> None:
    for n in range(FILES):
        (tmp_path / f"f{n:02}.txt").write_text("".join(f"file {n} line {i}: {'x' * 60}\n" for i in range(40)))
    with FakeProvider([_reader] * (FILES + 10)) as fake:
        _config(tmp_path, fake, "[compaction]\ncontext_window = 24000")
        run = run_ketch(["-p", PROMPT, "--output-format", "stream-json"], tmp_path, env=KEY)
    assert run.code == 0, run.stderr
    events = _events(run.stdout)
    assert events[-1]["type"] == "turn_finished" and events[-1]["reason"] == "done", events[-1]
    assert events[-1]["text"] == f"Read all {FILES} files."
    assert not fake.rejections, fake.rejections

    requests = fake.model_requests
    assert len(requests) == FILES + 1  # no summary call was needed inside one turn
    for step, req in enumerate(requests):
        assert PROMPT in user_texts(req), f"request {step} lost the user's message"
        calls = {c["call_id"] for c in _items(req, "function_call")}
        outputs = dict(tool_results(req))
        assert len(calls) == step and set(outputs) == calls, f"request {step} lost an earlier call"
        # Every earlier read is still there: whole, or as a placeholder naming the file.
        for n in range(step):
            assert any(f"f{n:02}.txt" in text or f"file {n} line 0" in text for text in outputs.values()), (step, n)

    pruned = [req for req in requests if any(t.startswith("[pruned: read_file") for _, t in tool_results(req))]
    assert pruned and pruned[-1] is requests[-1], "the loop never needed pruning: the window is too large"
    first_pruned = requests.index(pruned[0])
    # After pruning, what was pruned goes inline without item ids; the newest response, and
    # those that came after the last pruning, go back by their ids, each with its reasoning
    # as the reasoning item it was (never as plain text).
    for req in pruned:
        calls, reasoning = _items(req, "function_call"), _items(req, "reasoning")
        with_ids = [("id" in item) for item in calls]
        assert with_ids == sorted(with_ids) and with_ids[-1], with_ids  # stripped prefix, then by id
        assert len(reasoning) == sum(with_ids) and all(r["id"].startswith("rs_") for r in reasoning)
        newest = len(tool_results(req)) - 1
        assert reasoning[-1]["summary"][0]["text"] == f"Next I read file {newest}."
        texts = [i for i in (req.body or {}).get("input", []) if i.get("role") == "assistant"]
        assert not any("Next I read file" in json.dumps(t) for t in texts), "reasoning sent as plain text"

    compacted = [e for e in events if e["type"] == "compacted"]
    assert len(compacted) == 1, compacted
    assert compacted[0]["tokens_after"] < compacted[0]["tokens_before"]
    assert compacted[0]["stage"] == "tool_results"
    assert 0 < first_pruned < FILES

    # The pruned history is what the store holds, not the full one.
    stored = _session_messages(tmp_path)
    returns = [p for m in stored for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(returns) == FILES
    assert any(isinstance(p.content, str) and p.content.startswith("[pruned: read_file f00.txt") for p in returns)


def test_item_not_found_is_answered_by_one_inline_resend(tmp_path: Path) -> None:
    script = [Turn(text="First answer.", reasoning="Thinking about it."), Turn(text="Second answer.")]
    with FakeProvider(script) as fake:
        _config(tmp_path, fake)
        first = run_ketch(["-p", "hello"], tmp_path, env=KEY)
        assert first.code == 0, first.stderr
        assert len(fake.model_requests) == 1
        fake.forget_items()
        second = run_ketch(["-p", "again", "--continue", "--output-format", "stream-json"], tmp_path, env=KEY)
    assert second.code == 0, second.stderr
    assert fake.rejections == {"item_not_found": 1}
    rejected, resent = fake.model_requests[1:]
    assert any("id" in item for item in rejected.body["input"]), "the model sent no item ids: nothing to test"
    assert not any("id" in item for item in resent.body["input"])
    assert "First answer." in json.dumps(resent.body["input"])  # resent by content, not dropped
    events = _events(second.stdout)
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "Second answer."
    assert not [e for e in events if e["type"] == "error"]
    # The session's own history was rewritten: the next turn sends no stale ids either.
    stored = _session_messages(tmp_path)
    assert not any(getattr(p, "id", None) for m in stored[:2] for p in m.parts)


def test_compact_flag_summarizes_a_resumed_session(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("alpha\n" * 50)
    script = [
        Turn(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})], reasoning="Look first."),
        Turn(text="It says alpha."),
        Turn(text="Second turn answer."),
        Turn(text="The user read notes.txt, which repeats alpha."),  # the summary call
        Turn(text="Third turn answer."),
    ]
    with FakeProvider(script) as fake:
        _config(tmp_path, fake)
        assert run_ketch(["-p", "what is in notes.txt?"], tmp_path, env=KEY).code == 0
        assert run_ketch(["-p", "and then?", "--continue"], tmp_path, env=KEY).code == 0
        run = run_ketch(["-p", "go on", "--continue", "--compact", "--output-format", "stream-json"], tmp_path, env=KEY)
    assert run.code == 0, run.stderr
    assert not fake.rejections, fake.rejections
    events = _events(run.stdout)
    compacted = [e for e in events if e["type"] == "compacted"]
    assert len(compacted) == 1 and compacted[0]["stage"] == "summary", compacted
    assert compacted[0]["tokens_after"] < compacted[0]["tokens_before"]
    assert events[-1]["text"] == "Third turn answer."

    summary_call, turn = fake.model_requests[3:]
    assert not summary_call.body.get("tools"), "the summary call must offer no tools"
    assert "what is in notes.txt?" in json.dumps(summary_call.body["input"])
    sent = user_texts(turn)
    assert sent[0].startswith(SUMMARY_HEADER.strip()) and "repeats alpha" in sent[0]
    assert "what is in notes.txt?" not in sent and sent[-1] == "go on"
    stored = _session_messages(tmp_path)
    assert SUMMARY_HEADER.strip() in json.dumps([str(m) for m in stored[:1]])

"""When the window is the problem: a provider's context-length error, and a summary that fails.

- A context-length error (each wire's shape) is answered by one harder prune and one retry of
  that request; when that fails too, the turn ends with a clear error and the stored history
  is what it was.
- A summary call that fails leaves the stored history unchanged, stores no failure text as a
  summary, and emits a warning notice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, RecordedRequest, ToolCall, Turn, default_error_body, tool_results, user_texts
from kettle import run_ketch, write_project_config
from pydantic_ai.messages import ModelMessagesTypeAdapter

from ketch.context.prune import SUMMARY_HEADER
from ketch.state.store import Store

KEY = {"OPENAI_API_KEY": "sk-test-1234567890", "ANTHROPIC_API_KEY": "sk-ant-test-1234567890"}

OPENAI_TOO_LONG = {"error": {
    "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 190000 tokens.",
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
RESPONSES_TOO_LONG = {"error": {
    "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
    "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}
ANTHROPIC_TOO_LONG = default_error_body("anthropic", 400, "prompt is too long: 210503 tokens > 200000 maximum")

WIRES = {
    "openai-chat": ("gpt-4o", OPENAI_TOO_LONG, "openai"),
    "openai-responses": ("gpt-5", RESPONSES_TOO_LONG, "openai"),
    "anthropic-messages": ("claude-sonnet-4-5", ANTHROPIC_TOO_LONG, "anthropic"),
}


def _config(root: Path, fake: FakeProvider, wire: str, extra: str = "") -> None:
    model, _, preset = WIRES[wire]
    base = fake.base_url.removesuffix("/v1") if wire == "anthropic-messages" else fake.base_url
    write_project_config(
        root,
        f'model = "{preset}:{model}"\nmax_steps = 40\n{extra}\n[connections.{preset}]\npreset = "{preset}"\n'
        f'wire = "{wire}"\nbase_url = "{base}"\nmax_retries = 0\n',
    )


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _stored(root: Path) -> bytes:
    store = Store.open()
    row = store.latest_session(str(root))
    assert row is not None
    return ModelMessagesTypeAdapter.dump_json(store.load_messages(row.id))


def _first_turn(root: Path, steps: int = 6) -> list[Turn]:
    for n in range(steps):
        (root / f"f{n}.txt").write_text(f"file {n}\n" + "payload line\n" * 1500)
    return [Turn(tool_calls=[ToolCall("read_file", {"path": f"f{n}.txt"})]) for n in range(steps)] + [Turn(text="Read them.")]


@pytest.mark.parametrize("wire", list(WIRES))
def test_a_context_length_error_is_answered_by_one_harder_prune_and_a_retry(tmp_path: Path, wire: str) -> None:
    _, too_long, _ = WIRES[wire]
    script = [*_first_turn(tmp_path), Turn(status=400, error_body=too_long), Turn(text="Second answer.")]
    with FakeProvider(script, strict_responses=False) as fake:
        _config(tmp_path, fake, wire)
        assert run_ketch(["-p", "read the files"], tmp_path, env=KEY).code == 0
        run = run_ketch(["-p", "and now?", "--continue", "--output-format", "stream-json"], tmp_path, env=KEY)
    assert run.code == 0, run.stderr
    events = _events(run.stdout)
    assert events[-1]["type"] == "turn_finished" and events[-1]["text"] == "Second answer.", events[-1]
    rejected, retried = fake.model_requests[-2:]
    assert len(json.dumps(retried.body)) < 0.75 * len(json.dumps(rejected.body)), "the retry was not pruned harder"
    assert "and now?" in user_texts(retried)
    assert not [e for e in events if e["type"] == "error"]


def test_a_second_context_length_error_ends_the_turn_and_changes_nothing_stored(tmp_path: Path) -> None:
    wire = "openai-responses"
    _, too_long, _ = WIRES[wire]
    script = [*_first_turn(tmp_path), Turn(status=400, error_body=too_long), Turn(status=400, error_body=too_long),
              Turn(text="never")]
    with FakeProvider(script, strict_responses=False) as fake:
        _config(tmp_path, fake, wire)
        assert run_ketch(["-p", "read the files"], tmp_path, env=KEY).code == 0
        before = json.loads(_stored(tmp_path))
        run = run_ketch(["-p", "and now?", "--continue", "--output-format", "stream-json"], tmp_path, env=KEY)
    assert run.code != 0
    errors = [e for e in _events(run.stdout) if e["type"] == "error"]
    assert errors and "context window" in errors[-1]["message"] and "nothing stored was changed" in errors[-1]["message"]
    assert len(fake.model_requests) == 7 + 2  # the first turn, then the request and its one retry
    after = json.loads(_stored(tmp_path))
    assert after[: len(before)] == before, "the stored history was replaced"
    whole = [c for _, c in tool_results(fake.model_requests[-2])]
    assert all(c.startswith("     1\tfile") for c in whole), "the rejected request was not the unpruned history"


def _big_answers(req: RecordedRequest) -> Turn:
    if not (req.body or {}).get("tools"):
        return Turn(status=500, error_body=default_error_body("responses", 500, "summary model is down"))
    return Turn(text="A long answer. " * 1500)


def test_a_failing_summary_replaces_nothing_and_warns(tmp_path: Path) -> None:
    with FakeProvider([_big_answers] * 12, strict_responses=False) as fake:
        _config(tmp_path, fake, "openai-responses", "[compaction]\ncontext_window = 24000")
        for prompt in ("first question", "second question"):
            args = ["-p", prompt] + (["--continue"] if prompt != "first question" else [])
            assert run_ketch(args, tmp_path, env=KEY).code == 0
        before = json.loads(_stored(tmp_path))
        run = run_ketch(["-p", "third question", "--continue", "--output-format", "stream-json"], tmp_path, env=KEY)
    assert run.code == 0, run.stderr
    events = _events(run.stdout)
    warnings = [e for e in events if e["type"] == "notice" and e["level"] == "warning"]
    assert warnings and "summary" in warnings[0]["text"] and "summary model is down" in warnings[0]["text"]
    assert any(not (r.body or {}).get("tools") for r in fake.model_requests), "no summary was attempted"
    stored = _stored(tmp_path).decode()
    assert SUMMARY_HEADER.strip() not in stored and "could not be written" not in stored
    after = json.loads(stored)
    assert after[: len(before)] == before
    sent = [r for r in fake.model_requests if (r.body or {}).get("tools")][-1]
    assert user_texts(sent)[:3] == ["first question", "second question", "third question"]


def test_compact_with_a_failing_summary_keeps_the_session(tmp_path: Path) -> None:
    with FakeProvider([_big_answers] * 6, strict_responses=False) as fake:
        _config(tmp_path, fake, "openai-responses")
        assert run_ketch(["-p", "first question"], tmp_path, env=KEY).code == 0
        assert run_ketch(["-p", "second", "--continue"], tmp_path, env=KEY).code == 0
        before = _stored(tmp_path)
        run = run_ketch(["-p", "third", "--continue", "--compact", "--output-format", "stream-json"], tmp_path, env=KEY)
    assert run.code == 0, run.stderr
    notices = [e for e in _events(run.stdout) if e["type"] == "notice" and e["level"] == "warning"]
    assert any("Nothing was compacted" in n["text"] for n in notices), notices
    assert json.loads(_stored(tmp_path))[: len(json.loads(before))] == json.loads(before)

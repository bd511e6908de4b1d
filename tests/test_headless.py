"""`ketch -p` end to end: the real binary against the fake provider on every wire."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch, wire_args

from ketch.protocol import events

WIRES = ["openai-chat", "openai-responses", "anthropic-messages", "gemini", "openrouter"]
"""The four wires, and OpenRouter connections (Chat Completions on the SDK's OpenRouter model)."""

REAL_EXEC_WIRE = "openai-chat"
"""The wire on which the yolo write runs ``python -m ketch`` itself; on the others it is a ketch
process forked from the preloaded interpreter (``ketch_processes.Preloaded``): the same
``__main__``, argv, environment and cwd in a process of its own, without paying the imports."""


def _write_then_answer() -> list[Turn]:
    return [Turn(tool_calls=[ToolCall("write_file", {"path": "hello.txt", "content": "hi\n"})]), Turn(text="Wrote the file.")]


@pytest.mark.parametrize("wire", WIRES)
def test_yolo_write_lands_on_disk_and_result_goes_back(wire: str, tmp_path: Path, preloaded_ketch: Any) -> None:
    with FakeProvider(_write_then_answer()) as fake:
        args, env = wire_args(fake, wire, tmp_path)
        run = run_ketch(["-p", "create hello.txt", "--yolo", *args], tmp_path, env=env, subprocess_=True,
                        forked_from=None if wire == REAL_EXEC_WIRE else preloaded_ketch)
    assert run.code == 0, run.stderr
    assert (tmp_path / "hello.txt").read_text() == "hi\n"
    assert run.stdout.strip() == "Wrote the file."
    assert len(fake.model_requests) == 2
    results = tool_results(fake.model_requests[1])
    assert len(results) == 1 and "hello.txt" in results[0][1]


@pytest.mark.parametrize("wire", WIRES)
def test_without_yolo_the_write_is_denied_and_the_model_hears_why(wire: str, tmp_path: Path, preloaded_ketch: Any) -> None:
    with FakeProvider(_write_then_answer()) as fake:
        args, env = wire_args(fake, wire, tmp_path)  # a process of its own on openai-chat, in this one on the others
        run = run_ketch(["-p", "create hello.txt", *args], tmp_path, env=env, forked_from=preloaded_ketch if wire == "openai-chat" else None)
    assert run.code == 0, run.stderr
    assert not (tmp_path / "hello.txt").exists()
    [(_, content)] = tool_results(fake.model_requests[1])
    assert "needs the user's approval" in content and "--yolo" in content


@pytest.mark.parametrize("wire", ["openai-chat", "openrouter"])
def test_stream_json_is_one_event_per_line_with_documented_types(wire: str, tmp_path: Path) -> None:
    with FakeProvider(_write_then_answer()) as fake:
        args, env = wire_args(fake, wire, tmp_path)
        run = run_ketch(["-p", "go", "--yolo", "--output-format", "stream-json", *args], tmp_path, env=env)
    assert run.code == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    types = [line["type"] for line in lines]
    assert types[0] == "turn_started" and types[-1] == "turn_finished"
    assert {"tool_call_started", "approval_resolved", "tool_call_finished", "text_delta", "usage"} <= set(types)
    assert set(types) <= set(events.EVENT_TYPES)
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    for event_type in events.EVENT_TYPES:
        assert f"`{event_type}`" in readme, f"README does not document event type {event_type}"
    resolved = next(line for line in lines if line["type"] == "approval_resolved")
    assert resolved["by"] == "yolo" and resolved["decision"] == "allow"
    assert all(line["session_id"] == lines[0]["session_id"] for line in lines)


def test_json_output_is_one_object_with_result_usage_and_calls(tmp_path: Path) -> None:
    with FakeProvider(_write_then_answer()) as fake:
        run = run_ketch(["-p", "go", "--yolo", "--output-format", "json", *adhoc(fake, "anthropic-messages")], tmp_path)
    assert run.code == 0, run.stderr
    payload = json.loads(run.stdout)
    assert payload["result"] == "Wrote the file."
    assert payload["session_id"]
    assert payload["usage"] == {"input_tokens": 20, "output_tokens": 10, "cache_read_tokens": 0, "cache_write_tokens": 0}
    assert [c["name"] for c in payload["tool_calls"]] == ["write_file"]
    assert payload["tool_calls"][0]["is_error"] is False


def test_prompt_from_stdin(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hello back")]) as fake:
        run = run_ketch(["-p", "-", *adhoc(fake, "openai-chat")], tmp_path, input="say hello\n")
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "hello back"
    from fakeprovider import user_texts

    assert any("say hello" in t for t in user_texts(fake.model_requests[0]))


def test_step_limit_ends_the_turn_with_its_own_event(tmp_path: Path) -> None:
    loop = [Turn(tool_calls=[ToolCall("read_file", {"path": "x.txt"})]) for _ in range(5)]
    (tmp_path / "x.txt").write_text("x")
    with FakeProvider(loop) as fake:
        run = run_ketch(["-p", "loop", "--max-steps", "3", "--output-format", "stream-json", *adhoc(fake, "openai-chat")], tmp_path)
    finished = json.loads(run.stdout.splitlines()[-1])
    assert finished == finished | {"type": "turn_finished", "reason": "step_limit"}
    assert len(fake.model_requests) == 3
    assert run.code == 4, run.stderr  # the step limit's own exit code


def test_sigint_with_no_command_running_ends_the_turn_with_130(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from kettle import ketch_env

    with FakeProvider([Turn(text="too late", delay=20)]) as fake:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ketch", "-p", "slow", *adhoc(fake, "openai-chat")],
            cwd=tmp_path, env=ketch_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        deadline = time.monotonic() + 60
        while not fake.model_requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake.model_requests, "ketch never reached the provider"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, (out, err)
    assert "too late" not in out
    assert err.strip() == "ketch: interrupted"


def test_stream_json_keeps_each_event_on_one_line_whatever_separators_the_model_sends(tmp_path: Path) -> None:
    """U+0085, U+2028 and U+2029 are legal raw in a JSON string, but line readers (Python's
    ``splitlines``, JavaScript) end a line there: they are escaped, and the value is unchanged."""
    tricky = "a\x85b\u2028c\u2029d"
    script = [Turn(tool_calls=[ToolCall("todo_read", {"value": {tricky: tricky}})]), Turn(text=tricky)]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "go", "--output-format", "stream-json", "--yolo", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 0, run.stderr
    assert run.stdout.splitlines() == run.stdout.rstrip("\n").split("\n")
    events_out = [json.loads(line) for line in run.stdout.splitlines()]
    assert events_out[-1]["type"] == "turn_finished" and events_out[-1]["text"] == tricky
    [started] = [e for e in events_out if e["type"] == "tool_call_started"]
    assert started["args"] == {"value": {tricky: tricky}}

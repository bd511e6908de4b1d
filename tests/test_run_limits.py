"""A headless run's ceilings end it cleanly: its own exit code, a warning and a final event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn
from kettle import adhoc, run_ketch, write_project_config

# gpt-5: $1.25 per million input tokens, $10 per million output tokens: each answer below costs
# 100,000 * 1.25e-6 + 10,000 * 1e-5 = $0.225.
STEP_COST = 0.225


def _priced(fake: FakeProvider, root: Path) -> tuple[list[str], dict[str, str]]:
    write_project_config(
        root,
        f'[connections.work]\npreset = "openai"\nbase_url = "{fake.base_url}"\napi_key_env = "WORK_KEY"\nwire = "openai-chat"\n',
    )
    return ["-m", "work:gpt-5"], {"WORK_KEY": "k"}


def _loop(n: int) -> list[Turn]:
    return [Turn(tool_calls=[ToolCall("read_file", {"path": "x.txt"}, id=f"call_{i}")], usage=(100_000, 10_000))
            for i in range(n)]


def test_max_cost_stops_the_run_when_the_fake_usage_crosses_the_ceiling(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("x")
    with FakeProvider(_loop(8)) as fake:
        args, env = _priced(fake, tmp_path)
        run = run_ketch(["-p", "loop", "--max-cost", "0.5", "--output-format", "stream-json", *args], tmp_path, env=env)
    assert run.code == 6, run.stderr  # the cost limit's exit code
    events = [json.loads(line) for line in run.stdout.splitlines()]
    costs = [e["session_cost_usd"] for e in events if e["type"] == "usage"]
    assert costs == pytest.approx([STEP_COST, 2 * STEP_COST, 3 * STEP_COST]), costs
    assert len(fake.model_requests) == 3  # the third answer crossed $0.50: no fourth request went out
    *_, notice, finished = events
    assert finished["type"] == "turn_finished" and finished["reason"] == "cost_limit"
    assert notice["type"] == "notice" and notice["level"] == "warning" and "$0.5" in notice["text"]
    assert notice["session_id"] == finished["session_id"] and notice["turn_id"] == finished["turn_id"]


def test_max_cost_below_the_first_answer_reports_json_and_keeps_the_session(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("x")
    with FakeProvider(_loop(3)) as fake:
        args, env = _priced(fake, tmp_path)
        run = run_ketch(["-p", "loop", "--max-cost", "0.1", "--output-format", "json", *args], tmp_path, env=env)
        later = run_ketch(["sessions"], tmp_path)
    assert run.code == 6, run.stderr
    payload = json.loads(run.stdout)
    assert payload["reason"] == "cost_limit" and payload["is_error"] is False
    assert abs(payload["cost_usd"] - STEP_COST) < 1e-9
    assert len(fake.model_requests) == 1
    assert payload["session_id"][:8] in later.stdout  # the stopped run is a stored session


def test_max_cost_with_an_unpriced_model_is_refused_before_any_request(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="never")]) as fake:
        run = run_ketch(["-p", "hi", "--max-cost", "1", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 2, run.stderr
    assert "--max-cost needs a model whose price is known" in run.stderr
    assert fake.model_requests == []


def test_bad_ceilings_are_usage_errors(tmp_path: Path) -> None:
    for flag, value in (("--max-cost", "0"), ("--max-cost", "nan"), ("--time-limit", "-1"), ("--time-limit", "inf")):
        run = run_ketch(["-p", "hi", flag, value, "--base-url", "http://127.0.0.1:9/v1", "--wire", "openai-chat",
                         "--model", "m"], tmp_path)
        assert run.code == 2, (flag, value, run.stderr)
        assert f"{flag} must be a number above zero" in run.stderr


def test_time_limit_ends_a_run_stuck_on_the_provider_with_its_exit_code(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="far too late", delay=120)]) as fake:
        run = run_ketch(["-p", "slow", "--time-limit", "1", "--output-format", "stream-json", *adhoc(fake, "openai-chat")],
                        tmp_path)
    assert run.code == 7, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert events[-1]["type"] == "turn_finished" and events[-1]["reason"] == "time_limit"
    assert "far too late" not in run.stdout
    assert any(e["type"] == "notice" and "time limit of 1 s" in e["text"] for e in events)


def test_max_turns_is_the_step_limit(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("x")
    with FakeProvider(_loop(5)) as fake:
        run = run_ketch(["-p", "loop", "--max-turns", "2", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 4, run.stderr
    assert json.loads(run.stdout)["reason"] == "step_limit"
    assert len(fake.model_requests) == 2


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic-messages"])
def test_a_refusal_ends_the_run_with_its_own_code_and_reason(wire: str, tmp_path: Path) -> None:
    with FakeProvider([Turn(text="I can't help with that.", finish="refusal")]) as fake:
        run = run_ketch(["-p", "do the bad thing", "--output-format", "stream-json", *adhoc(fake, wire)], tmp_path)
    assert run.code == 3, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert events[-1]["type"] == "turn_finished" and events[-1]["reason"] == "refused"
    assert any(e["type"] == "notice" and "declined" in e["text"] for e in events)

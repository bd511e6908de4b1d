"""The native Gemini wire end to end: the real binary against the fake's Gemini endpoints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, one_line_error, run_ketch, write_project_config

from ketch.protocol import events

SECRET = "gm-secret-abcdef0123456789"


def _thinking(body: dict) -> dict | None:
    """``generationConfig.thinkingConfig`` with camelCase keys (google-genai sends its own
    snake_case spelling here, which the API's proto JSON parser accepts alike)."""
    config = (body.get("generationConfig") or {}).get("thinkingConfig")
    if config is None:
        return None
    return {"".join(w.capitalize() if i else w for i, w in enumerate(k.split("_"))): v for k, v in config.items()}


def _gemini_config(root: Path, fake: FakeProvider, extra: str = "") -> None:
    write_project_config(root, f'[connections.gemini]\npreset = "gemini"\nbase_url = "{fake.base_url.removesuffix("/v1")}"\n'
                               f'max_retries = 0\n{extra}')


def test_version_and_help_do_not_import_the_google_sdk() -> None:
    code = ("import sys; from ketch.frontends.cli import main\n"
            "for argv in (['--version'], ['--help']):\n"
            "    try: main(argv)\n"
            "    except SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('google', 'pydantic_ai.models.google'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_preset_posts_to_stream_generate_content_with_the_key_header(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hello from gemini")]) as fake:
        _gemini_config(tmp_path, fake)
        run = run_ketch(["-p", "hi", "-m", "gemini:gemini-2.5-flash"], tmp_path, env={"GEMINI_API_KEY": SECRET})
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "hello from gemini"
    [request] = fake.model_requests
    assert request.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert request.query == "alt=sse"
    assert request.headers["x-goog-api-key"] == SECRET
    [content] = request.body["contents"]  # the prompt, then ketch's state reminder (context.reminders)
    assert content["role"] == "user" and content["parts"][0] == {"text": "hi"}
    assert [p["text"][:18] for p in content["parts"][1:]] == ["<system-reminder>\n"]


def test_google_api_key_is_the_fallback_variable(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="ok")]) as fake:
        _gemini_config(tmp_path, fake)
        run = run_ketch(["-p", "hi", "-m", "gemini:gemini-2.5-flash"], tmp_path, env={"GOOGLE_API_KEY": SECRET})
    assert run.code == 0, run.stderr
    assert fake.model_requests[0].headers["x-goog-api-key"] == SECRET


def test_missing_key_names_both_variables(tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi", "-m", "gemini:gemini-2.5-flash"], tmp_path)
    assert run.code == 2
    line = one_line_error(run.stderr)
    assert "GEMINI_API_KEY" in line and "GOOGLE_API_KEY" in line and "ketch auth login gemini" in line


@pytest.mark.parametrize(
    ("status", "needle"),
    [(401, "rejected the API key"), (429, "rate limiting"), (500, "HTTP 500"), (503, "HTTP 503")],
)
def test_provider_http_errors_end_with_one_line_and_exit_1(status: int, needle: str, tmp_path: Path) -> None:
    with FakeProvider() as fake:
        fake.fail_path("/v1beta/models/fake-model:streamGenerateContent", status=status)
        run = run_ketch(["-p", "hi", *adhoc(fake, "gemini"), "--api-key-env", "MY_KEY"], tmp_path,
                        env={"MY_KEY": SECRET, "KETCH_MAX_RETRIES": "0"})
    assert run.code == 1, (run.stdout, run.stderr)
    line = one_line_error(run.stderr)
    assert needle in line
    assert SECRET not in run.stderr and SECRET not in run.stdout


def test_stream_json_tool_turn_with_thinking_usage_and_cost(tmp_path: Path) -> None:
    script = [Turn(reasoning="plan it", tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x\n"})],
                   usage=(1000, 200)),
              Turn(text="Done.", usage=(1300, 20))]
    with FakeProvider(script) as fake:
        _gemini_config(tmp_path, fake)
        run = run_ketch(["-p", "go", "--yolo", "--think", "high", "--output-format", "stream-json",
                         "-m", "gemini:gemini-2.5-flash"], tmp_path, env={"GEMINI_API_KEY": "k"})
    assert run.code == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    types = [line["type"] for line in lines]
    assert set(types) <= set(events.EVENT_TYPES)
    assert types[0] == "turn_started" and types[-1] == "turn_finished"
    assert "".join(line["text"] for line in lines if line["type"] == "reasoning_delta") == "plan it"
    assert (tmp_path / "a.txt").read_text() == "x\n"
    usage = [line for line in lines if line["type"] == "usage"]
    # Gemini bills thoughts as output: candidates 200 + thoughts 3.
    assert [(u["input_tokens"], u["output_tokens"]) for u in usage] == [(1000, 203), (1300, 20)]
    assert all(u["cost_usd"] > 0 for u in usage)
    # The tool result goes back as a functionResponse with the call's id; the thought signature is replayed.
    second = fake.model_requests[1]
    [(call_id, content)] = tool_results(second)
    assert call_id == next(line["call_id"] for line in lines if line["type"] == "tool_call_started")
    assert "a.txt" in content
    model_turn = next(c for c in second.body["contents"] if c["role"] == "model")
    call_part = next(p for p in model_turn["parts"] if "functionCall" in p)
    assert call_part["functionCall"]["name"] == "write_file" and call_part.get("thoughtSignature")
    thinking = _thinking(fake.model_requests[0].body)
    assert thinking["includeThoughts"] is True and thinking["thinkingBudget"] > 0


@pytest.mark.parametrize("level", ["off", "low", "medium", "high", "max"])
def test_thinking_levels_map_to_the_thinking_budget(level: str, tmp_path: Path) -> None:
    with FakeProvider([Turn(text="ok")]) as fake:
        _gemini_config(tmp_path, fake)
        run = run_ketch(["-p", "hi", "-m", "gemini:gemini-2.5-flash", "--think", level], tmp_path,
                        env={"GEMINI_API_KEY": "k"})
    assert run.code == 0, run.stderr
    thinking = _thinking(fake.model_requests[0].body)
    if level == "off":  # 2.5 Flash thinks by default: off must say so
        assert thinking == {"thinkingBudget": 0}
    else:
        assert thinking["includeThoughts"] is True and thinking["thinkingBudget"] > 0


def test_gemini_3_gets_thinking_levels_instead_of_a_budget(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="ok")]) as fake:
        _gemini_config(tmp_path, fake)
        run = run_ketch(["-p", "hi", "-m", "gemini:gemini-3-pro-preview", "--think", "low"], tmp_path,
                        env={"GEMINI_API_KEY": "k"})
    assert run.code == 0, run.stderr
    assert _thinking(fake.model_requests[0].body) == {"includeThoughts": True, "thinkingLevel": "LOW"}


def test_budget_grows_with_level(tmp_path: Path) -> None:
    budgets = []
    for level in ("low", "medium", "high"):
        with FakeProvider([Turn(text="ok")]) as fake:
            _gemini_config(tmp_path, fake)
            run = run_ketch(["-p", "hi", "-m", "gemini:gemini-2.5-flash", "--think", level], tmp_path,
                            env={"GEMINI_API_KEY": "k"})
        assert run.code == 0, run.stderr
        budgets.append(_thinking(fake.model_requests[0].body)["thinkingBudget"])
    assert budgets == sorted(budgets) and len(set(budgets)) == 3


def test_output_limit_is_reported_as_cut(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="half an answ", finish="length")]) as fake:
        run = run_ketch(["-p", "hi", "--output-format", "stream-json", *adhoc(fake, "gemini")], tmp_path)
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    assert lines, run.stderr
    finished = lines[-1]
    assert (finished["type"], finished["reason"], finished["text"]) == ("turn_finished", "max_tokens", "half an answ")


def test_models_lists_gemini_models_from_v1beta_with_the_key_header(tmp_path: Path) -> None:
    with FakeProvider([], models=("gemini-3-flash-preview", "gemini-2.5-pro")) as fake:
        _gemini_config(tmp_path, fake)
        run = run_ketch(["models", "gemini"], tmp_path, env={"GEMINI_API_KEY": SECRET})
    assert run.code == 0, run.stderr
    assert run.stdout.split() == ["gemini:gemini-2.5-pro", "gemini:gemini-3-flash-preview"]
    [request] = fake.requests
    assert (request.method, request.path, request.headers["x-goog-api-key"]) == ("GET", "/v1beta/models", SECRET)

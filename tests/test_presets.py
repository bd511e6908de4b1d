"""Every preset builds a working connection: a turn with a tool call against the fake provider."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import run_ketch, write_project_config

from ketch.config.presets import PRESETS

KEYS = {p.key_env: "sk-preset-test-0123456789" for p in PRESETS.values() if p.key_env}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_each_preset_runs_a_tool_turn(preset: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    script = [Turn(tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]), Turn(text=f"{preset} ok")]
    with FakeProvider(script) as fake:
        base = fake.base_url.removesuffix("/v1") if PRESETS[preset].wire in ("anthropic-messages", "gemini") else fake.base_url
        write_project_config(tmp_path, f'[connections.{preset}]\npreset = "{preset}"\nbase_url = "{base}"\nmax_retries = 0\n')
        model = {"anthropic": "claude-haiku-4-5", "openrouter": "openai/some-model"}.get(preset, "some-model")
        run = run_ketch(["-p", "read it", "-m", f"{preset}:{model}"], tmp_path, env=KEYS)
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == f"{preset} ok"
    assert "hello" in tool_results(fake.model_requests[1])[0][1]
    if PRESETS[preset].key_env:
        headers = fake.model_requests[0].headers
        auth = headers.get("authorization") or headers.get("x-api-key") or headers.get("x-goog-api-key", "")
        assert "sk-preset-test-0123456789" in auth


def test_a_model_name_the_sdk_refuses_is_a_usage_error(tmp_path: Path) -> None:
    write_project_config(tmp_path, '[connections.openrouter]\npreset = "openrouter"\nbase_url = "http://127.0.0.1:9/v1"\n')
    run = run_ketch(["-p", "hi", "-m", "openrouter:gpt-5"], tmp_path, env=KEYS)
    assert run.code == 2
    assert run.stderr.startswith("ketch: model 'openrouter:gpt-5'") and "Traceback" not in run.stderr

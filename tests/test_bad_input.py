"""Bad input: one line on stderr, the right exit code, never a traceback, nothing lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn
from kettle import adhoc, one_line_error, run_ketch, wire_args, write_project_config


@pytest.mark.parametrize(("model", "variable"), [("openai:gpt-5", "OPENAI_API_KEY"),
                                               ("openrouter:openai/gpt-5", "OPENROUTER_API_KEY")])
def test_missing_key_names_the_variable_and_auth_login(model: str, variable: str, tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi", "-m", model], tmp_path)
    assert run.code == 2
    line = one_line_error(run.stderr)
    connection = model.partition(":")[0]
    assert variable in line and f"ketch auth login {connection}" in line


def test_unknown_connection_says_how_to_list(tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi", "-m", "nosuch:model"], tmp_path)
    assert run.code == 2
    line = one_line_error(run.stderr)
    assert "unknown connection 'nosuch'" in line and "ketch models" in line


def test_model_without_connection_says_how_to_write_it(tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi", "-m", "gpt-5"], tmp_path)
    assert run.code == 2
    assert "CONNECTION:MODEL" in one_line_error(run.stderr)


@pytest.mark.parametrize("wire", ["openai-chat", "openrouter"])
def test_unknown_model_on_the_provider_says_how_to_list(wire: str, tmp_path: Path) -> None:
    body = {"error": {"message": "The model `gpt-9` does not exist", "type": "invalid_request_error", "code": "model_not_found"}}
    with FakeProvider([Turn(status=404, error_body=body)]) as fake:
        args, env = wire_args(fake, wire, tmp_path, "gpt-9")
        run = run_ketch(["-p", "hi", *args], tmp_path, env={**env, "KETCH_MAX_RETRIES": "0"})
    assert run.code == 1
    line = one_line_error(run.stderr)
    assert "gpt-9" in line and "ketch models" in line


def test_unknown_config_key_names_file_and_key(tmp_path: Path) -> None:
    path = write_project_config(tmp_path, 'model = "openai:gpt-5"\nmodle_typo = 1\n')
    run = run_ketch(["-p", "hi"], tmp_path, env={"OPENAI_API_KEY": "sk-x"})
    assert run.code == 2
    line = one_line_error(run.stderr)
    assert str(path) in line and "modle_typo" in line


def test_unknown_nested_config_key(tmp_path: Path) -> None:
    path = write_project_config(tmp_path, '[connections.x]\npreset = "openai"\nbase_urll = "http://x"\n')
    run = run_ketch(["-p", "hi", "-m", "x:y"], tmp_path)
    assert run.code == 2
    line = one_line_error(run.stderr)
    assert str(path) in line and "connections.x.base_urll" in line


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write_project_config(tmp_path, "model = \n")
    run = run_ketch(["-p", "hi"], tmp_path)
    assert run.code == 2
    assert str(path) in one_line_error(run.stderr)


@pytest.mark.parametrize(
    ("status", "needle"),
    [(401, "rejected the API key"), (429, "rate limiting"), (500, "HTTP 500"), (503, "HTTP 503")],
)
def test_provider_http_errors_end_with_one_line_and_exit_1(status: int, needle: str, tmp_path: Path) -> None:
    secret = "sk-secret-abcdef0123456789"
    with FakeProvider() as fake:
        fake.fail_path("/v1/chat/completions", status=status, body={"error": {"message": f"bad key {secret}"}})
        run = run_ketch(
            ["-p", "hi", *adhoc(fake, "openai-chat"), "--api-key-env", "MY_KEY"],
            tmp_path,
            env={"MY_KEY": secret, "KETCH_MAX_RETRIES": "0"},
        )
    assert run.code == 1
    line = one_line_error(run.stderr)
    assert needle in line
    assert secret not in run.stderr and secret not in run.stdout


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses", "anthropic-messages", "gemini", "openrouter"])
@pytest.mark.parametrize("kind", ["truncate", "malformed"])
def test_broken_stream_is_a_provider_error(wire: str, kind: str, tmp_path: Path) -> None:
    turn = Turn(text="partial answer that never ends", **{kind: True})
    with FakeProvider([turn]) as fake:
        args, env = wire_args(fake, wire, tmp_path)
        run = run_ketch(["-p", "hi", *args], tmp_path, env=env)
    assert run.code == 1, (run.stdout, run.stderr)
    one_line_error(run.stderr)


def test_failed_turn_leaves_earlier_files_untouched(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("original")
    script = [Turn(tool_calls=[ToolCall("write_file", {"path": "new.txt", "content": "made"})]), Turn(status=500)]
    with FakeProvider(script) as fake:
        run = run_ketch(["-p", "go", "--yolo", *adhoc(fake, "openai-chat")], tmp_path, env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 1
    assert (tmp_path / "keep.txt").read_text() == "original"
    assert (tmp_path / "new.txt").read_text() == "made"


def test_empty_prompt_is_a_usage_error(tmp_path: Path) -> None:
    run = run_ketch(["-p", "   "], tmp_path)
    assert run.code == 2
    assert "prompt is empty" in one_line_error(run.stderr)


def test_ad_hoc_endpoint_needs_a_wire(tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"], tmp_path)
    assert run.code == 2
    assert "--wire" in one_line_error(run.stderr)


def test_nothing_listening_names_the_url_and_exits_1(tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi", "--base-url", "http://127.0.0.1:9/v1", "--wire", "openai-chat", "--model", "m"], tmp_path, env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 1
    line = one_line_error(run.stderr)
    assert "could not reach" in line and "http://127.0.0.1:9/v1" in line


def test_step_limit_below_one_is_a_usage_error(tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi", "--max-steps", "0", "--base-url", "http://127.0.0.1:9/v1", "--wire", "openai-chat", "--model", "m"], tmp_path)
    assert run.code == 2
    assert "max_steps" in one_line_error(run.stderr)


def test_an_added_directory_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi", "--add-dir", str(tmp_path / "missing"), "--base-url", "http://127.0.0.1:9/v1", "--wire", "openai-chat", "--model", "m"], tmp_path)
    assert run.code == 2
    assert "missing" in one_line_error(run.stderr)

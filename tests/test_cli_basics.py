"""The command line outside a turn: start-up cost, models, auth, secrets."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, Turn
from kettle import adhoc, ketch_env, run_ketch, write_project_config

HEAVY = ("pydantic_ai", "openai", "anthropic", "prompt_toolkit", "rich", "pydantic")


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_neither_sdk_nor_ui(flag: str, tmp_path: Path) -> None:
    code = (
        "import sys\nfrom ketch.frontends.cli import main\n"
        f"try:\n    main([{flag!r}])\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ketch_env(), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout, out.stdout


def test_opening_a_new_store_for_prompt_history_imports_no_sdk(tmp_path: Path) -> None:
    """The UI loads prompt history before its first frame; on a first run that creates and
    migrates the database, which must not pull in pydantic-ai (seconds of imports)."""
    code = (
        "import sys\nfrom ketch.state.store import Store\n"
        f"store = Store.open({str(tmp_path / 'new' / 'ketch.db')!r})\n"
        "store.add_prompt('/p', 'hi')\nassert store.prompt_history('/p') == ['hi']\n"
        "print('TABLES', sorted(r[0] for r in store.connection.execute(\"SELECT name FROM sqlite_master WHERE type='table'\")))\n"
        f"print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ketch_env(), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "memory_notes" in out.stdout, "the memory tables were created by the migration"
    assert "HEAVY []" in out.stdout, out.stdout


def test_models_lists_the_providers_models(tmp_path: Path) -> None:
    with FakeProvider(models=["alpha-1", "beta-2"]) as fake:
        write_project_config(tmp_path, f'[connections.local]\npreset = "openai-compatible"\nbase_url = "{fake.base_url}"\n')
        run = run_ketch(["models", "local"], tmp_path)
    assert run.code == 0, run.stderr
    assert run.stdout.split() == ["local:alpha-1", "local:beta-2"]
    assert fake.requests[0].path == "/v1/models"


def test_models_against_an_anthropic_wire(tmp_path: Path) -> None:
    with FakeProvider(models=["claude-x"]) as fake:
        run = run_ketch(["models", "--base-url", fake.base_url, "--wire", "anthropic-messages"], tmp_path)
    assert run.code == 0, run.stderr
    assert "adhoc:claude-x" in run.stdout
    assert fake.requests[0].headers.get("anthropic-version")


def test_models_reports_an_unreachable_provider_in_one_line(tmp_path: Path) -> None:
    write_project_config(tmp_path, '[connections.gone]\npreset = "openai-compatible"\nbase_url = "http://127.0.0.1:9/v1"\n')
    run = run_ketch(["models", "gone"], tmp_path)
    assert run.code == 1
    assert run.stderr.startswith("ketch: could not reach") and "Traceback" not in run.stderr


def test_models_without_connection_lists_connections(tmp_path: Path) -> None:
    run = run_ketch(["models"], tmp_path)
    assert run.code == 0
    for preset in ("openai", "anthropic", "openrouter", "deepseek", "groq", "xai", "mistral", "ollama", "lmstudio", "llamacpp", "openai-compatible"):
        assert preset in run.stdout


def test_auth_login_stores_the_key_owner_only_and_it_is_used_but_never_shown(tmp_path: Path, isolated_home: Path) -> None:
    secret = "sk-stored-key-0123456789abcdef"
    run = run_ketch(["auth", "login", "work"], tmp_path, input=secret + "\n")
    assert run.code == 0, run.stderr
    assert secret not in run.stdout + run.stderr
    keys = isolated_home / "config" / "keys.json"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    assert json.loads(keys.read_text()) == {"work": secret}

    with FakeProvider([Turn(text="hi")]) as fake:
        write_project_config(tmp_path, f'[connections.work]\npreset = "openai-compatible"\nbase_url = "{fake.base_url}"\napi_key_env = "WORK_KEY"\n')
        run = run_ketch(["-p", "hello", "-m", "work:m1", "--output-format", "stream-json"], tmp_path)
    assert run.code == 0, run.stderr
    assert fake.model_requests[0].headers["authorization"] == f"Bearer {secret}"
    assert secret not in run.stdout and secret not in run.stderr
    db = isolated_home / "data" / "ketch.db"
    assert secret.encode() not in db.read_bytes()
    for side in ("ketch.db-wal",):
        if (isolated_home / "data" / side).exists():
            assert secret.encode() not in (isolated_home / "data" / side).read_bytes()


def test_key_in_an_error_body_never_reaches_stderr_or_events(tmp_path: Path) -> None:
    secret = "sk-echoed-by-provider-abcdef123456"
    with FakeProvider() as fake:
        fake.fail_path("/v1/chat/completions", status=400, body={"error": {"message": f"invalid key {secret} for org"}})
        run = run_ketch(
            ["-p", "hi", "--output-format", "stream-json", *adhoc(fake, "openai-chat"), "--api-key-env", "K"],
            tmp_path,
            env={"K": secret},
        )
    assert run.code == 1
    assert secret not in run.stdout and secret not in run.stderr
    errors = [json.loads(line) for line in run.stdout.splitlines() if '"error"' in line]
    assert errors and "[redacted]" in errors[0]["message"]


def test_api_key_env_that_is_empty_is_a_usage_error(tmp_path: Path) -> None:
    run = run_ketch(["-p", "hi", "--base-url", "http://127.0.0.1:9/v1", "--wire", "openai-chat", "--model", "m", "--api-key-env", "NOPE_KEY"], tmp_path)
    assert run.code == 2
    assert "NOPE_KEY" in run.stderr


def test_python_m_ketch_runs_the_same_entry(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "ketch", "--version"], capture_output=True, text=True, env=ketch_env(), cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("ketch ")
    assert os.environ.get("KETCH_CONFIG_DIR")  # the isolated home is in force

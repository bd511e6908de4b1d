"""First run: no model and no key. The UI offers the local servers that answer on
127.0.0.1 and the key-based providers, writes the choice to the user config and starts."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import Turn, user_texts
from test_interactive import parse
from uifakes import Harness

from ketch.config.settings import PRESETS
from ketch.frontends.interactive import Interactive


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for preset in PRESETS.values():
        if preset.key_env:
            monkeypatch.delenv(preset.key_env, raising=False)
    monkeypatch.delenv("KETCH_MODEL", raising=False)


def harness(tmp_path: Path) -> tuple[Harness, Interactive]:
    runtime = Interactive(parse(tmp_path), tmp_path)
    config = runtime.app_config()
    fields = {name: getattr(config, name) for name in (
        "session_factory", "load_history", "save_history", "commands", "on_command", "command_choices",
        "on_ready", "startup_error", "setup", "display_prompt")}
    return Harness(None, columns=110, rows=30, **fields), runtime


async def _open(h: Harness) -> None:
    from prompt_toolkit.input import create_pipe_input

    from ketch.ui.controller import KetchApp
    from uifakes import make_output

    h._pipe_cm = create_pipe_input()
    h.pipe = h._pipe_cm.__enter__()
    h.app = KetchApp(h.config, input=h.pipe, output=make_output(h.sink))
    import asyncio

    h.task = asyncio.ensure_future(h.app.run())


async def test_a_local_server_is_found_written_to_the_config_and_used(
        tmp_path: Path, fake_provider: Any, no_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_provider([Turn(text="Hello from the local model.")])
    port = int(fake.base_url.rsplit(":", 1)[1].split("/")[0])
    monkeypatch.setenv("KETCH_SETUP_PORTS", f"ollama={port},lmstudio=1,llamacpp=1")
    h, runtime = harness(tmp_path)
    await _open(h)
    try:
        await h.wait_text("No model is set up yet.", timeout=10)
        await h.wait_text(f"ollama on 127.0.0.1:{port} (fake-model)")
        assert "openai (paste an API key" in h.sink.text()
        await h.type("\r")
        await h.wait_text("ollama:fake-model · think off", timeout=15)
        await h.type("hi\r")
        # the fake serves no /api/show: its window is unknown, so ketch sizes it as a 4k server
        # and offers the compact profile first (keeping the full one here)
        await h.wait_text("Keep the full profile", timeout=15)
        assert "The window is unknown: set it with context_window" in h.sink.text()
        await h.type("2")
        await h.wait_text("Hello from the local model.")
    finally:
        await h.__aexit__(None, None, None)
        await runtime.close()
    config = Path(os.environ["KETCH_CONFIG_DIR"]) / "config.toml"
    written = tomllib.loads(config.read_text())
    assert written["model"] == "ollama:fake-model"
    assert written["connections"]["ollama"]["base_url"] == f"http://127.0.0.1:{port}/v1"
    assert user_texts(fake.model_requests[-1]) == ["hi"]


async def test_a_provider_key_is_stored_like_auth_login(tmp_path: Path, no_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KETCH_SETUP_PORTS", "ollama=1,lmstudio=1,llamacpp=1")
    h, runtime = harness(tmp_path)
    await _open(h)
    try:
        await h.wait_text("anthropic (paste an API key", timeout=10)
        await h.type("anthropic")
        await h.type("\r")
        await h.wait_text("API key for anthropic")
        await h.type("sk-test-123\r")
        await h.wait_text('Wrote model = "anthropic:claude-sonnet-4-5"', timeout=10)
        assert "sk-test-123" not in h.sink.transcript
    finally:
        await h.__aexit__(None, None, None)
        await runtime.close()
    keys = Path(os.environ["KETCH_CONFIG_DIR"]) / "keys.json"
    assert json.loads(keys.read_text()) == {"anthropic": "sk-test-123"}
    assert oct(keys.stat().st_mode & 0o777) == "0o600"

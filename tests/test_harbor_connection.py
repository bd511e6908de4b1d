"""Harbor's model choice as ketch's ``harbor`` connection, and ketch running on what it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, Turn
from kettle import run_ketch

from ketch.harbor.connection import ketch_connection


def test_a_known_provider_keeps_its_preset_and_reads_harbors_key_variable() -> None:
    got = ketch_connection("anthropic", "claude-sonnet-4-5", key_env="ANTHROPIC_API_KEY")
    assert got.model == "harbor:claude-sonnet-4-5"
    assert got.config_toml == ('model = "harbor:claude-sonnet-4-5"\n\n[connections.harbor]\npreset = "anthropic"\n'
                               'api_key_env = "ANTHROPIC_API_KEY"\n')


def test_a_base_url_and_an_api_format_become_the_connections_endpoint_and_wire() -> None:
    got = ketch_connection("openai", "gpt-5", key_env="OPENAI_API_KEY", base_url="https://proxy.example/v1",
                           api_format="openai_responses")
    assert 'base_url = "https://proxy.example/v1"' in got.config_toml and 'wire = "openai-responses"' in got.config_toml


@pytest.mark.parametrize(("provider", "kwargs", "message"), [
    ("cohere", {}, "no preset for provider 'cohere'"),
    ("openai", {"api_format": "bedrock_converse"}, "no wire for Harbor's API format"),
    ("openai", {"key_env": "A-B"}, "not an environment variable name"),
    ("openai", {"base_url": "file:///etc/passwd"}, "must be http or https"),
])
def test_what_ketch_cannot_use_is_refused(provider: str, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ketch_connection(provider, "m", **kwargs)


def test_a_model_name_cannot_break_out_of_its_toml_string() -> None:
    with pytest.raises(ValueError, match="control character"):
        ketch_connection("openai", 'gpt-5"\n[connections.evil]\npreset = "x')
    got = ketch_connection("openai", 'odd"name', key_env="OPENAI_API_KEY")
    assert 'model = "harbor:odd\\"name"' in got.config_toml


def test_an_unknown_provider_with_a_base_url_is_an_openai_compatible_server(tmp_path: Path) -> None:
    """The config the agent writes is one ketch reads and runs on: the request reaches that URL with that key."""
    with FakeProvider([Turn(text="hi from the server")]) as fake:
        got = ketch_connection("together", "qwen-coder", key_env="TOGETHER_API_KEY", base_url=fake.base_url)
        config_dir = tmp_path / "cfg"
        config_dir.mkdir()
        (config_dir / "config.toml").write_text(got.config_toml)
        run = run_ketch(["-p", "hi", "-m", got.model, "--output-format", "json"], tmp_path,
                        env={"KETCH_CONFIG_DIR": str(config_dir), "TOGETHER_API_KEY": "tk-1"})
    assert run.code == 0, run.stderr
    assert json.loads(run.stdout)["result"] == "hi from the server"
    [request] = fake.model_requests
    assert request.body["model"] == "qwen-coder" and request.headers.get("authorization") == "Bearer tk-1"

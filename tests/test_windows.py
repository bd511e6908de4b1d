"""Window arithmetic per model, and ``max_tokens`` on every wire as the provider receives it.

- ``limits_for`` takes the window from a server, config, the SDK's profile (genai-prices),
  ketch's table, in that order; GPT-5 gets its 272k input limit, Claude its output maximum.
- Every request's input estimate plus its ``max_tokens`` fits the window with a margin.
- A repo's config may lower ``context_window`` / ``max_output_tokens``, never raise them.
- Chat (``max_completion_tokens``; ``max_tokens`` to a compatible server), Responses (``max_output_tokens``) and Anthropic
  (``max_tokens``) requests all carry the limit, asserted on the recorded bodies.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, Turn
from kettle import adhoc, run_ketch, write_project_config

from ketch.context.windows import DEFAULT_OUTPUT_CAP, MIN_OUTPUT_TOKENS, Limits, limits_for, limits_for_connection
from ketch.config.settings import load_config, resolve_connection

KEY = {"OPENAI_API_KEY": "sk-test-1234567890", "ANTHROPIC_API_KEY": "sk-ant-test-1234567890"}


def test_gpt5_has_a_separate_input_limit_and_its_full_output():
    limits = limits_for("openai:gpt-5")
    assert (limits.window, limits.input_limit, limits.max_output) == (400_000, 272_000, 128_000)
    assert limits.input_budget == 272_000 - limits.margin


def test_claude_reserves_its_output_inside_the_window():
    limits = limits_for("claude-sonnet-4-5")
    assert (limits.window, limits.input_limit, limits.max_output) == (200_000, 200_000, DEFAULT_OUTPUT_CAP)
    assert limits.input_budget == 200_000 - DEFAULT_OUTPUT_CAP - limits.margin
    assert limits_for("claude-3-5-haiku").max_output == 8_192  # below the cap: the model's own maximum


def test_the_sdk_profile_and_genai_prices_are_read_from_a_built_model():
    from ketch.wire.messages import AnthropicMessagesModel

    model = AnthropicMessagesModel("claude-haiku-4-5", base_url="https://api.anthropic.com", api_key="x")
    limits = limits_for("claude-haiku-4-5", model=model)
    assert limits.source == "profile" and limits.window == 200_000
    assert limits.max_output == min(DEFAULT_OUTPUT_CAP, model.profile["anthropic_max_output_tokens"])


def test_server_window_wins_then_config_then_the_table():
    assert limits_for("qwen3:8b").window == 32_768 and limits_for("qwen3:8b").source == "table"
    assert limits_for("qwen3:8b", context_window=65_536).source == "config"
    reported = limits_for("qwen3:8b", context_window=65_536, server_window=16_384)
    assert (reported.window, reported.source) == (16_384, "server")
    assert reported.max_output == 16_384 // 4
    assert limits_for("some-new-model").window == 128_000


@pytest.mark.parametrize("model", ["gpt-5", "claude-opus-4-1", "qwen3", "gpt-4o", "unknown"])
@pytest.mark.parametrize("window", [None, 4_096, 32_768])
def test_input_budget_plus_max_tokens_always_fits_the_window(model: str, window: int | None):
    limits = limits_for(model, context_window=window)
    for used in (0, limits.prune_limit(0.8), limits.input_budget, limits.input_budget + 500):
        out = limits.max_tokens_for(used)
        assert out >= MIN_OUTPUT_TOKENS
        if used <= limits.input_budget:
            assert used + out + limits.margin <= limits.window, (used, out)


def test_max_tokens_shrinks_when_the_input_is_bigger_than_planned():
    limits = Limits(window=10_000, input_limit=10_000, max_output=4_000)
    assert limits.max_tokens_for(1_000) == 4_000
    assert limits.max_tokens_for(7_000) == 10_000 - 500 - 7_000


def _user_config(text: str) -> None:
    import os

    Path(os.environ["KETCH_CONFIG_DIR"], "config.toml").write_text("titles = false\n" + text)


def test_a_repo_config_may_lower_the_limits_but_never_raise_them(tmp_path: Path):
    _user_config('[connections.local]\npreset = "llamacpp"\ncontext_window = 32768\nmax_output_tokens = 4000\n')
    write_project_config(tmp_path, "[connections.local]\ncontext_window = 1000000\nmax_output_tokens = 64000\n")
    conn = resolve_connection(load_config(tmp_path), "local:qwen3")
    limits = limits_for_connection(conn)
    assert (limits.window, limits.max_output) == (32_768, 4_000)

    write_project_config(tmp_path, "[connections.local]\ncontext_window = 16000\nmax_output_tokens = 2000\n")
    limits = limits_for_connection(resolve_connection(load_config(tmp_path), "local:qwen3"))
    assert (limits.window, limits.max_output) == (16_000, 2_000)

    # Without a user value, a repo's window cannot exceed the model's own either.
    _user_config("")
    write_project_config(tmp_path, '[models."openai:gpt-5"]\ncontext_window = 5000000\n')
    conn = resolve_connection(load_config(tmp_path), "openai:gpt-5", environ={"OPENAI_API_KEY": "k"})
    assert limits_for_connection(conn).window == 400_000


def test_a_bad_limit_in_config_is_a_one_line_error(tmp_path: Path):
    write_project_config(tmp_path, "[connections.local]\npreset = 'llamacpp'\nmax_output_tokens = -5\n")
    run = run_ketch(["-p", "hi", "--model", "local:qwen3"], tmp_path)
    assert run.code == 2 and "max_output_tokens" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("wire", "model", "field", "expected"),
    [
        # an OpenAI-compatible server on this machine that says no window: the field all read, and
        # no more than a local server's smallest usual window (4,096) would get
        ("openai-chat", "fake-model", "max_tokens", 1024),
        ("openai-responses", "gpt-5", "max_output_tokens", 128_000),
        ("anthropic-messages", "claude-sonnet-4-5", "max_tokens", DEFAULT_OUTPUT_CAP),
    ],
)
def test_max_tokens_is_sent_on_every_wire(tmp_path: Path, wire: str, model: str, field: str, expected: int):
    with FakeProvider([Turn(text="hello")]) as fake:
        run = run_ketch(["-p", "hi", *adhoc(fake, wire, model)], tmp_path, env=KEY)
    assert run.code == 0, run.stderr
    (request,) = fake.model_requests
    assert request.body[field] == expected, json.dumps(request.body)[:400]


def test_max_output_tokens_of_a_connection_is_what_goes_on_the_wire(tmp_path: Path):
    with FakeProvider([Turn(text="hello")]) as fake:
        write_project_config(
            tmp_path,
            'model = "local:qwen3"\n[connections.local]\npreset = "llamacpp"\n'
            f'base_url = "{fake.base_url}"\nmax_output_tokens = 3000\ncontext_window = 20000\n',
        )
        _user_config('[connections.local]\npreset = "llamacpp"\nmax_output_tokens = 6000\ncontext_window = 65536\n')
        run = run_ketch(["-p", "hi"], tmp_path)
    assert run.code == 0, run.stderr
    body = fake.model_requests[0].body
    assert body.get("max_completion_tokens", body.get("max_tokens")) == 3000


def test_a_window_the_server_reports_replaces_the_assumed_one(tmp_path: Path):
    """The hook the local-server presets use (llama.cpp /props, Ollama /api/show)."""
    from ketch.context.compaction import Compactor

    conn = resolve_connection(load_config(tmp_path), "llamacpp:qwen3-8b")
    compactor = Compactor(connection=conn)
    assert compactor.window == 32_768
    compactor.use_server_window(8_192)
    assert (compactor.window, compactor.limits.max_output, compactor.limits.source) == (8_192, 2_048, "server")
    assert compactor.limit == int((8_192 - 2_048 - 409) * 0.8)

"""Honest endings and forgiving URLs against the fake provider with real servers' behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn
from kettle import adhoc, run_ketch
from servertools import strict_lines

from ketch.providers.endings import CUT_NOTICE, RESUME_HINT

WIRES = ["openai-chat", "openai-responses", "anthropic-messages", "gemini"]


@pytest.mark.parametrize("wire", WIRES)
def test_an_answer_cut_by_the_output_limit_ends_with_max_tokens(wire: str, tmp_path: Path) -> None:
    with FakeProvider([Turn(text="The first half of", finish="length"), Turn(text="the second half.")]) as fake:
        run = run_ketch(["-p", "explain", "--output-format", "json", *adhoc(fake, wire)], tmp_path)
        streamed = run_ketch(["-p", "continue", "--continue", "--output-format", "stream-json", *adhoc(fake, wire)], tmp_path)
    assert run.code == 5, run.stderr  # the token limit's own exit code
    payload = json.loads(run.stdout)
    assert payload["reason"] == "max_tokens" and payload["result"] == "The first half of"
    assert payload["is_error"] is False and payload["error"] is None
    assert CUT_NOTICE in run.stderr  # the warning, on stderr
    # --continue says the last answer was cut, and going on works
    assert streamed.code == 0, streamed.stderr
    events = strict_lines(streamed.stdout)
    assert any(e["type"] == "notice" and e["text"] == RESUME_HINT for e in events)
    assert events[-1] == {**events[-1], "type": "turn_finished", "reason": "done", "text": "the second half."}


def test_text_output_warns_and_exits_with_the_token_limit_code(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="cut", finish="length")]) as fake:
        run = run_ketch(["-p", "go", *adhoc(fake, "openai-chat")], tmp_path)
    assert run.code == 5
    assert run.stdout.strip() == "cut"
    assert f"ketch: {CUT_NOTICE}" in run.stderr


# Gemini sends a function call's arguments as one object, never as streamed JSON text, so no
# call can arrive cut in the middle of its arguments on that wire.
@pytest.mark.parametrize("wire", [w for w in WIRES if w != "gemini"])
def test_a_tool_call_cut_by_the_output_limit_is_not_made_and_not_replayed(wire: str, tmp_path: Path) -> None:
    cut_call = ToolCall("write_file", {}, raw_args='{"path": "x.txt", "content": "unfini')
    with FakeProvider([Turn(text="Writing it.", tool_calls=[cut_call], finish="length"), Turn(text="ok")], strict_json=True) as fake:
        run = run_ketch(["-p", "write", "--yolo", "--output-format", "stream-json", *adhoc(fake, wire)], tmp_path)
        again = run_ketch(["-p", "continue", "--continue", "--yolo", *adhoc(fake, wire)], tmp_path)
    assert run.code == 5, run.stderr
    events = strict_lines(run.stdout)
    assert events[-1]["reason"] == "max_tokens"
    assert not any(e["type"] == "tool_call_started" for e in events)
    assert not (tmp_path / "x.txt").exists()
    assert again.code == 0, again.stderr
    assert fake.json_problems == []
    assert "unfini" not in json.dumps(fake.model_requests[-1].body)


# ---------------------------------------------------------------- base URLs
def test_anthropic_base_url_ending_in_v1_is_corrected_with_a_notice(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hi")], exact_paths=True) as fake:
        url = fake.base_url
        run = run_ketch(["-p", "go", "--base-url", url, "--wire", "anthropic-messages", "--model", "claude-x"], tmp_path)
    assert run.code == 0, run.stderr
    assert run.stdout.strip() == "hi"
    assert [r.path for r in fake.model_requests] == ["/v1/messages"]
    assert f"using base URL {url.removesuffix('/v1')} instead of {url}" in run.stderr


def test_openai_compatible_root_gets_v1_with_a_notice(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hi")], exact_paths=True) as fake:
        root = fake.base_url.removesuffix("/v1")
        run = run_ketch(["-p", "go", "--base-url", root, "--wire", "openai-chat", "--model", "m"], tmp_path)
    assert run.code == 0, run.stderr
    assert [r.path for r in fake.model_requests] == ["/v1/chat/completions"]
    assert f"using base URL {root}/v1 instead of {root}" in run.stderr


def test_a_404_names_the_path_tried_and_what_to_change(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="never")], exact_paths=True) as fake:
        url = fake.base_url
        doubled = url + "/v1"  # .../v1/v1: one /v1 is dropped, the SDK adds another
        run = run_ketch(["-p", "go", "--base-url", doubled, "--wire", "anthropic-messages", "--model", "c",
                         "--output-format", "json"], tmp_path)
        wrong = run_ketch(["-p", "go", "--base-url", fake.base_url.removesuffix("/v1") + "/api", "--wire", "openai-chat",
                           "--model", "m", "--output-format", "json"], tmp_path)
    assert run.code == 1
    message = json.loads(run.stdout)["error"]["message"]
    assert f"no endpoint at {url}/v1/messages (HTTP 404)" in message
    assert "drop the /v1 from --base-url" in message and "File Not Found" in message
    assert wrong.code == 1
    message = json.loads(wrong.stdout)["error"]["message"]
    assert "/api/chat/completions (HTTP 404)" in message and "serve under /v1" in message


# ---------------------------------------------------------------- cost and the resume line
def test_cost_is_null_after_a_connection_error(tmp_path: Path) -> None:
    from isolation import refused_port

    with refused_port() as port:  # bound, never listening: every connection is refused, and no one else binds it
        run = run_ketch(["-p", "go", "--base-url", f"http://127.0.0.1:{port}/v1", "--wire", "openai-chat",
                         "--model", "m", "--output-format", "json"], tmp_path, env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 1
    payload = json.loads(run.stdout)
    assert payload["cost_usd"] is None and payload["error"]["kind"] == "provider"


def test_cost_is_null_when_the_price_is_unknown(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hi")]) as fake:
        run = run_ketch(["-p", "go", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path)
    assert json.loads(run.stdout)["cost_usd"] is None


def test_the_resume_line_carries_every_flag_that_shaped_the_session(tmp_path: Path) -> None:
    from ketch.frontends.cli import _main_parser
    from ketch.frontends.interactive import resume_program

    extra = tmp_path / "other dir"
    args = _main_parser().parse_args([
        "--base-url", "http://127.0.0.1:9/v1", "--wire", "openai-chat", "--model", "m", "--agent", "plan",
        "--think", "high", "--add-dir", str(extra), "--web-search", "--max-steps", "7",
    ])
    line = resume_program(args)
    assert line == (f"ketch --base-url http://127.0.0.1:9/v1 --wire openai-chat --model m --agent plan --think high "
                    f"--add-dir '{extra}' --web-search --max-steps 7")
    assert resume_program(_main_parser().parse_args(["-m", "openai:gpt-5", "--yolo"])) == "ketch -m openai:gpt-5 --yolo"


async def test_the_ui_shows_a_line_for_an_answer_cut_at_the_limit(tmp_path: Path) -> None:
    """The events a real session emits for a cut answer, replayed into the inline UI."""
    from types import SimpleNamespace

    from uifakes import FakeSession, Harness

    from ketch.frontends.assemble import build_session

    with FakeProvider([Turn(text="The first half of", finish="length")]) as fake:
        args = SimpleNamespace(base_url=fake.base_url, wire="openai-chat", model="m", cwd=str(tmp_path), add_dir=[])
        session = await build_session(args, interactive=False)
        try:
            events = [e async for e in session.run_turn("explain")]
        finally:
            await session.aclose()
    assert events[-1].reason == "max_tokens"
    async with Harness(FakeSession([events])) as h:
        await h.type("explain\r")
        await h.wait_text("output limit (max_tokens)")
        await h.idle()
        assert "The first half of" in h.sink.text()


def test_only_local_roots_get_v1() -> None:
    from ketch.providers.base_url import corrected_base_url

    assert corrected_base_url("http://192.168.1.5:8080", "openai-chat", "openai-compatible") == "http://192.168.1.5:8080/v1"
    assert corrected_base_url("https://api.example.ai", "openai-chat", "openai-compatible") is None  # may serve at its root
    assert corrected_base_url("https://gpu.example:8080", "openai-chat", "llamacpp") == "https://gpu.example:8080/v1"
    assert corrected_base_url("http://127.0.0.1:9/api/v1", "openai-chat", "openai-compatible") is None
    assert corrected_base_url("https://api.anthropic.com/v1/", "anthropic-messages", "anthropic") == "https://api.anthropic.com"
    assert corrected_base_url("https://api.anthropic.com", "anthropic-messages", "anthropic") is None

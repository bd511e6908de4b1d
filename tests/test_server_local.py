"""Local servers: streaming refused with tools, the window they report, thinking levels."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch, write_project_config
from servertools import strict_lines

from ketch.providers import stream_refusal

WIRES = ["openai-chat", "openai-responses", "anthropic-messages"]


@pytest.fixture(autouse=True)
def fresh_switches() -> None:
    stream_refusal._SWITCHES.clear()  # sticky per process: each test starts streaming


@pytest.mark.parametrize("mode", ["error", "broken"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_server_that_cannot_stream_tools_gets_whole_requests(mode: str, wire: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    script = [Turn(text="Reading.", tool_calls=[ToolCall("read_file", {"path": "a.txt"})]), Turn(text="It says alpha.")]
    with FakeProvider(script, refuse_stream_with_tools=mode) as fake:
        run = run_ketch(["-p", "read a.txt", "--output-format", "stream-json", *adhoc(fake, wire)], tmp_path,
                        env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 0, run.stderr
    events = strict_lines(run.stdout)
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "It says alpha."
    # the answer is still shown: its text arrives as text deltas
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == "Reading.It says alpha."
    assert sum(1 for e in events if e["type"] == "notice" and "cannot stream answers that may call tools" in e["text"]) == 1
    # streamed once (refused), then the same request whole, and the next step whole at once (sticky)
    assert [r.stream for r in fake.model_requests] == [True, False, False]
    key = "input" if wire == "openai-responses" else "messages"
    assert fake.model_requests[0].body[key] == fake.model_requests[1].body[key]
    assert "alpha" in tool_results(fake.model_requests[2])[0][1]


def test_once_a_server_streamed_tools_a_dropped_stream_is_an_error_not_a_refusal(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")

    def then_drop(request: Any) -> Turn:
        fake.refuse_stream_with_tools = "broken"  # from the next request on
        return Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"})])

    with FakeProvider([then_drop, Turn(text="never")]) as fake:
        run = run_ketch(["-p", "read", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path,
                        env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 1
    assert [r.stream for r in fake.model_requests] == [True, True]
    assert "cannot stream" not in run.stderr + run.stdout


def test_a_stream_that_breaks_after_its_first_event_is_still_an_error(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="a longer answer that breaks", truncate=True), Turn(text="never")]) as fake:
        run = run_ketch(["-p", "go", "--output-format", "json", *adhoc(fake, "openai-chat")], tmp_path,
                        env={"KETCH_MAX_RETRIES": "0"})
    assert run.code == 1
    assert [r.stream for r in fake.model_requests] == [True]


# ---------------------------------------------------------------- windows
_SERVERS: dict[str, tuple[str, Any, int]] = {
    "llamacpp": ("/props", {"default_generation_settings": {"n_ctx": 32768, "params": {}}, "total_slots": 1}, 32768),
    "ollama": ("/api/show", {"parameters": "stop \"<|im_end|>\"\nnum_ctx 8192", "model_info": {
        "general.architecture": "qwen2", "qwen2.context_length": 40960}}, 8192),
    "lmstudio": ("/api/v0/models", {"object": "list", "data": [
        {"id": "other", "type": "llm", "state": "not-loaded", "max_context_length": 4096},
        {"id": "qwen3", "type": "llm", "state": "loaded", "max_context_length": 131072, "loaded_context_length": 16384}]}, 16384),
}


async def _turn_on(tmp_path: Path, ref: str) -> tuple[int, list[Any]]:
    from ketch.frontends.assemble import build_session

    args = SimpleNamespace(model=ref, cwd=str(tmp_path), add_dir=[], yolo=False)
    session = await build_session(args, interactive=False)
    try:
        events = [e async for e in session.run_turn("hello")]
        return session.status().context_window, events
    finally:
        await session.aclose()


@pytest.mark.parametrize("preset", list(_SERVERS))
def test_a_local_server_tells_its_window_at_the_first_request(preset: str, tmp_path: Path) -> None:
    path, answer, window = _SERVERS[preset]
    with FakeProvider([Turn(text="hi")], models=["qwen3"]) as fake:
        fake.serve_json(path, answer)
        write_project_config(tmp_path, f'[connections.local]\npreset = "{preset}"\nbase_url = "{fake.base_url}"\n')
        got, events = asyncio.run(_turn_on(tmp_path, "local:qwen3"))
    assert got == window
    assert any(e.type == "notice" and f"{window:,} tokens" in e.text for e in events)
    asked = [r for r in fake.requests if r.path == path]
    assert len(asked) == 1
    assert asked[0].path == path and fake.model_requests[0].path == "/v1/chat/completions"
    if preset == "ollama":
        assert asked[0].method == "POST" and asked[0].body == {"model": "qwen3"}


def test_a_failed_window_read_falls_back_with_a_notice(tmp_path: Path) -> None:
    from ketch.context.budget import context_window

    with FakeProvider([Turn(text="hi")]) as fake:
        write_project_config(tmp_path, f'[connections.local]\npreset = "llamacpp"\nbase_url = "{fake.base_url}"\n')
        got, events = asyncio.run(_turn_on(tmp_path, "local:qwen3"))
    # the stricter reading: a local server that does not say its window is sized as the smallest
    # usual one (not qwen3's 32k), and the notice says the window is unknown and how to set it
    from ketch.context.windows import LOCAL_UNKNOWN_WINDOW

    assert got == LOCAL_UNKNOWN_WINDOW < context_window("qwen3")
    [notice] = [e for e in events if e.type == "notice" and "could not read the context window" in e.text]
    assert notice.level == "warning" and "/props" in notice.text and "HTTP 404" in notice.text
    assert "context_window = N" in notice.text and "[models.\"local:qwen3\"]" in notice.text
    assert [e for e in events if e.type == "turn_finished"][0].reason == "done"


def test_an_explicit_window_in_config_wins_over_what_the_server_says(tmp_path: Path) -> None:
    """The configured window stands; the local server is asked once only whether it is still
    loading its model (tests/test_local_windows.py waits one out), and its window is not taken."""
    path, answer, _ = _SERVERS["llamacpp"]
    with FakeProvider([Turn(text="hi")]) as fake:
        fake.serve_json(path, answer)
        write_project_config(tmp_path, f'[connections.local]\npreset = "llamacpp"\nbase_url = "{fake.base_url}"\n'
                                       '[models."local:qwen3"]\ncontext_window = 9000\n')
        got, _ = asyncio.run(_turn_on(tmp_path, "local:qwen3"))
    assert got == 9000
    assert len([r for r in fake.requests if r.path == path]) == 1


def test_window_readers_take_only_sane_numbers() -> None:
    from ketch.providers.server_window import llamacpp_window, lmstudio_window, ollama_window, server_root

    assert llamacpp_window({"n_ctx": 4096}) == 4096  # older builds
    assert llamacpp_window({"default_generation_settings": {"n_ctx": True}}) is None
    assert llamacpp_window([1]) is None and ollama_window({"model_info": {"x.context_length": -1}}) is None
    assert ollama_window({"model_info": {"llama.context_length": 131072}}) == 131072
    assert lmstudio_window({"data": [{"id": "m", "max_context_length": 32768}]}, "m") == 32768
    assert lmstudio_window({"data": "nope"}, "m") is None
    assert server_root("http://h:1/v1/") == "http://h:1" and server_root("http://h:1/api/v1") == "http://h:1/api"


# ---------------------------------------------------------------- thinking
_FIELD = {
    "openai-chat": lambda body: body.get("reasoning_effort"),
    "openai-responses": lambda body: (body.get("reasoning") or {}).get("effort"),
    "anthropic-messages": lambda body: body.get("thinking"),
}


def test_the_sdk_sends_anthropic_thinking_for_any_model_name(tmp_path: Path) -> None:
    """The installed SDK's Anthropic profile takes thinking for every model: nothing to correct."""
    with FakeProvider([Turn(text="hi")]) as fake:
        run = run_ketch(["-p", "go", "--think", "high", *adhoc(fake, "anthropic-messages", model="local-model")], tmp_path)
    assert run.code == 0, run.stderr
    assert fake.model_requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert "not applied" not in run.stderr


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
def test_an_unknown_model_gets_no_thinking_field_and_one_notice(wire: str, tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hi")]) as fake:
        run = run_ketch(["-p", "go", "--think", "high", *adhoc(fake, wire, model="local-model")], tmp_path)
    assert run.code == 0, run.stderr
    assert _FIELD[wire](fake.model_requests[0].body) is None
    assert run.stderr.count("--think high is not applied") == 1
    assert 'reasoning = true under [models."local-model"]' in run.stderr


@pytest.mark.parametrize("wire", WIRES)
def test_a_declared_reasoning_model_gets_the_wire_field(wire: str, tmp_path: Path) -> None:
    write_project_config(tmp_path, '[models."local-model"]\nreasoning = true\n')
    with FakeProvider([Turn(text="hi")]) as fake:
        run = run_ketch(["-p", "go", "--think", "high", *adhoc(fake, wire, model="local-model")], tmp_path)
    assert run.code == 0, run.stderr
    expected = {"type": "enabled", "budget_tokens": 16384} if wire == "anthropic-messages" else "high"
    assert _FIELD[wire](fake.model_requests[0].body) == expected
    assert "not applied" not in run.stderr


def test_a_connection_that_declares_reasoning_covers_its_models(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hi")], models=["qwen3"]) as fake:
        write_project_config(tmp_path, f'[connections.local]\npreset = "llamacpp"\nbase_url = "{fake.base_url}"\nreasoning = true\n')
        run = run_ketch(["-p", "go", "-m", "local:qwen3", "--think", "max"], tmp_path)
    assert run.code == 0, run.stderr
    assert fake.model_requests[0].body["reasoning_effort"] == "high"


def test_a_model_the_sdk_knows_gets_the_sdk_field_without_notice(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hi")]) as fake:
        run = run_ketch(["-p", "go", "--think", "low", *adhoc(fake, "openai-chat", model="gpt-5")], tmp_path)
    assert run.code == 0, run.stderr
    assert fake.model_requests[0].body.get("reasoning_effort") == "low"
    assert "not applied" not in run.stderr


def test_think_off_sends_nothing_and_says_nothing(tmp_path: Path) -> None:
    with FakeProvider([Turn(text="hi")]) as fake:
        run = run_ketch(["-p", "go", "--think", "off", *adhoc(fake, "openai-chat", model="local-model")], tmp_path)
    assert "reasoning_effort" not in json.dumps(fake.model_requests[0].body) and "not applied" not in run.stderr


async def test_the_ui_shows_the_answer_of_a_server_that_cannot_stream_tools(tmp_path: Path) -> None:
    """The events a real session emits against such a server, replayed into the inline UI."""
    from uifakes import FakeSession, Harness

    from ketch.frontends.assemble import build_session

    with FakeProvider([Turn(text="A whole answer, not streamed.")], refuse_stream_with_tools="error") as fake:
        args = SimpleNamespace(base_url=fake.base_url, wire="openai-chat", model="m", cwd=str(tmp_path), add_dir=[])
        session = await build_session(args, interactive=False)
        try:
            events = [e async for e in session.run_turn("hello")]
        finally:
            await session.aclose()
    assert [r.stream for r in fake.model_requests][-1] is False
    async with Harness(FakeSession([events])) as h:
        await h.type("hello\r")
        await h.wait_text("A whole answer, not streamed.")
        await h.idle()
        assert "cannot stream answers that may call tools" in h.sink.text()


async def test_switching_model_recomputes_the_thinking_field(tmp_path: Path) -> None:
    """``/model`` to a model the SDK does not know: the level is sent only where it is declared."""
    from ketch.frontends.assemble import build_session
    from ketch.frontends.slash_actions import SlashActions

    write_project_config(tmp_path, '[models."declared"]\nreasoning = true\n')
    with FakeProvider([Turn(text="one"), Turn(text="two")]) as fake:
        args = SimpleNamespace(base_url=fake.base_url, wire="openai-chat", model="gpt-5", cwd=str(tmp_path), add_dir=[],
                               think="medium")
        session = await build_session(args, interactive=True)
        try:
            actions = SlashActions(lambda: session, args, tmp_path)
            [e async for e in session.run_turn("first")]
            reply = await actions.run("model", "plain")
            assert "--think medium is not applied" in reply
            [e async for e in session.run_turn("second")]
            await actions.run("model", "declared")
            fake.add(Turn(text="three"))
            [e async for e in session.run_turn("third")]
        finally:
            await session.aclose()
    efforts = [r.body.get("reasoning_effort") for r in fake.model_requests]
    assert efforts == ["medium", None, "medium"]


async def test_switching_model_sizes_the_requests_for_the_new_models_window(tmp_path: Path) -> None:
    """``/model`` to a model with a smaller window: the next request fits that window (input and
    ``max_tokens``), not the first model's; and back again, the larger window returns."""
    from ketch.frontends.assemble import build_session
    from ketch.frontends.slash_actions import SlashActions

    write_project_config(tmp_path, '[models."small"]\ncontext_window = 8000\n')
    (tmp_path / "big.txt").write_text("".join(f"line {i}: {'word ' * 20}\n" for i in range(400)))  # ~50 kB
    answers = [Turn(tool_calls=[ToolCall("read_file", {"path": "big.txt"})]), Turn(text="read it"),
               Turn(text="on the small one"), Turn(text="back on the big one")]

    def script(request: Any) -> Turn:
        if not (request.body or {}).get("tools"):
            return Turn(text="Summary: the user had big.txt read.")  # the summary call, on the small model
        return answers.pop(0)

    with FakeProvider([script] * 8) as fake:
        args = SimpleNamespace(base_url=fake.base_url, wire="openai-chat", model="gpt-5", cwd=str(tmp_path), add_dir=[],
                               yolo=True)
        session = await build_session(args, interactive=True)
        try:
            actions = SlashActions(lambda: session, args, tmp_path)
            [e async for e in session.run_turn("read big.txt")]
            big_window = session.compactor.window
            await actions.run("model", "small")
            assert session.compactor.window == 8000
            fake.window = 8000  # the small model's server refuses what passes its window (a retry would show)
            [e async for e in session.run_turn("and now?")]
            fake.window = None
            await actions.run("model", "gpt-5")
            assert session.compactor.window == big_window > 100_000
            [e async for e in session.run_turn("and again?")]
        finally:
            await session.aclose()
    bodies = [r.body for r in fake.model_requests if r.body.get("tools")]
    assert [b["model"] for b in bodies] == ["gpt-5", "gpt-5", "small", "gpt-5"]
    assert not answers
    assert "line 399" in json.dumps(bodies[1]), "the first model's window holds the whole file"
    small = bodies[2]
    limit = small.get("max_completion_tokens") or small.get("max_tokens")
    assert limit is not None and limit < 8000
    assert "line 399" not in json.dumps(small)

"""ketch's own Anthropic Messages model (``wire/messages.py``): what crosses the wire.

Request bytes of whole sessions are in ``test_wire_golden.py``; here: the stream → parts mapping
(thinking and its signature, tool input as JSON deltas, usage with cache reads and writes, stop
reasons), a stream without ``message_stop`` and an ``error`` event failing loudly, a 529 retried,
the non-streamed answer, the count endpoint, the headers, the per-message memo sending the same
bodies as encoding everything anew, and no SDK module loaded by a session on this wire.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic_ai.exceptions import ModelConnectionError, ModelHTTPError, ModelOverloadedError
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.native_tools import WebSearchTool

from ketch.wire.messages import AnthropicMessagesModel

ROOT = Path(__file__).resolve().parents[1]


def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


START = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                                              "content": [], "stop_reason": None,
                                              "usage": {"input_tokens": 100, "output_tokens": 1,
                                                        "cache_creation_input_tokens": 30, "cache_read_input_tokens": 500}}}
STOP = {"type": "message_stop"}


def delta(reason: str, out: int = 7) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None}, "usage": {"output_tokens": out}}


class Server:
    """An httpx transport answering each POST with the next scripted response; keeps the requests."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answers.pop(0)


def model(server: Server, **kw: Any) -> AnthropicMessagesModel:
    return AnthropicMessagesModel("claude-sonnet-4-5", base_url="http://anthropic.test/", api_key="sk-test",
                                  transport=httpx.MockTransport(server), **kw)


def streamed(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, content=body, headers={"content-type": "text/event-stream", **(headers or {})})


HISTORY = [ModelRequest(parts=[UserPromptPart("hi")])]


async def read(m: AnthropicMessagesModel, params: ModelRequestParameters | None = None) -> ModelResponse:
    async with m.request_stream(list(HISTORY), None, params or ModelRequestParameters()) as stream:
        async for _ in stream:
            pass
    return stream.get()


async def test_a_stream_becomes_thinking_text_and_a_tool_call_with_usage() -> None:
    server = Server(streamed(sse(
        START, {"type": "ping"},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "look."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-1"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Reading."}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"path": "a'}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '.txt"}'}},
        {"type": "content_block_stop", "index": 2},
        delta("tool_use", 42), STOP)))
    response = await read(model(server))
    thinking, text, call = response.parts
    assert isinstance(thinking, ThinkingPart) and (thinking.content, thinking.signature) == ("Let me look.", "sig-1")
    assert isinstance(text, TextPart) and text.content == "Reading."
    assert isinstance(call, ToolCallPart) and call.args_as_dict() == {"path": "a.txt"} and call.tool_call_id == "toolu_1"
    assert response.finish_reason == "tool_call" and response.provider_response_id == "msg_1"
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (630, 42, 500, 30)
    assert usage.details["cache_creation_input_tokens"] == 30 and usage.details["cache_read_input_tokens"] == 500
    sent = server.requests[0]
    assert str(sent.url) == "http://anthropic.test/v1/messages"
    assert sent.headers["x-api-key"] == "sk-test" and sent.headers["anthropic-version"]
    assert "anthropic-beta" not in sent.headers and "authorization" not in sent.headers
    assert json.loads(sent.content)["stream"] is True


async def test_thinking_and_a_search_go_back_as_the_provider_sent_them() -> None:
    m = model(Server())
    search = WebSearchTool()
    answer = ModelResponse(parts=[
        ThinkingPart("plan", signature="sig", provider_name="anthropic"),
        ThinkingPart("", id="redacted_thinking", signature="opaque", provider_name="anthropic"),
        NativeToolCallPart(tool_name=search.kind, args={"query": "q"}, tool_call_id="srv_1", provider_name="anthropic"),
        NativeToolReturnPart(tool_name=search.kind, content=[{"type": "web_search_result", "url": "u"}],
                             tool_call_id="srv_1", provider_name="anthropic"),
        TextPart("done"),
        ThinkingPart("unsigned idea", provider_name="openai"),
    ], provider_name="anthropic")
    body = json.loads(m.encode([*HISTORY, answer, ModelRequest(parts=[UserPromptPart("more")])], {},
                               ModelRequestParameters(native_tools=[search]), stream=True))
    carried, assistant = body["messages"][1], body["messages"][2]
    assert carried["role"] == "user" and "unsigned idea" in carried["content"][0]["text"]  # never in the assistant turn
    assert [b["type"] for b in assistant["content"]] == ["thinking", "redacted_thinking", "server_tool_use",
                                                         "web_search_tool_result", "text"]
    assert assistant["content"][0] == {"thinking": "plan", "signature": "sig", "type": "thinking"}
    assert assistant["content"][1] == {"data": "opaque", "type": "redacted_thinking"}
    assert body["tools"] == [{"name": "web_search", "type": "web_search_20250305", "max_uses": None,
                              "allowed_domains": None, "blocked_domains": None, "user_location": None}]


def test_the_search_tool_follows_the_profile_and_the_caller_setting() -> None:
    m = AnthropicMessagesModel("claude-sonnet-4-6", base_url="http://a.test", api_key="k",
                               profile={"anthropic_supports_dynamic_filtering": True})
    params = ModelRequestParameters(native_tools=[WebSearchTool(max_uses=2)])
    tool = json.loads(m.encode(list(HISTORY), {}, params, stream=True))["tools"][0]
    assert tool["type"] == "web_search_20260209" and tool["max_uses"] == 2 and "allowed_callers" not in tool
    tool = json.loads(m.encode(list(HISTORY), {"anthropic_web_tools_allowed_callers": ["direct"]}, params,
                               stream=True))["tools"][0]
    assert tool["allowed_callers"] == ["direct"]


async def test_a_stream_cut_before_message_stop_is_an_error_not_an_answer() -> None:
    server = Server(streamed(sse(
        START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "half an ans"}})))
    with pytest.raises(ModelConnectionError):
        await read(model(server))


async def test_an_error_event_is_the_http_error_its_type_names() -> None:
    server = Server(streamed(sse(START, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})))
    with pytest.raises(ModelOverloadedError) as caught:
        await read(model(server))
    assert isinstance(caught.value, ModelHTTPError) and caught.value.status_code == 529
    assert caught.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


async def test_a_529_is_retried_and_a_400_is_not() -> None:
    overloaded = httpx.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "x"}},
                                headers={"retry-after": "0"})
    ok = streamed(sse(START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "hi"}},
                      {"type": "content_block_stop", "index": 0}, delta("end_turn"), STOP))
    server = Server(overloaded, ok)
    response = await read(model(server, max_retries=1))
    assert len(server.requests) == 2 and response.parts == [TextPart("hi")] and response.finish_reason == "stop"
    long = httpx.Response(400, json={"type": "error", "error": {"type": "invalid_request_error",
                                                                "message": "prompt is too long: 300000 tokens"}})
    server = Server(long)
    with pytest.raises(ModelHTTPError) as caught:
        await read(model(server, max_retries=3))
    assert len(server.requests) == 1 and caught.value.status_code == 400
    from pydantic_ai.exceptions import ModelContextWindowExceededError

    assert isinstance(caught.value, ModelContextWindowExceededError)


async def test_a_whole_message_when_not_streamed() -> None:
    message = {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-x", "stop_reason": "max_tokens",
               "content": [{"type": "text", "text": "Summary."},
                           {"type": "tool_use", "id": "t1", "name": "glob", "input": {"pattern": "*"}}],
               "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 4}}
    server = Server(httpx.Response(200, json=message))
    response = await model(server).request(list(HISTORY), {"max_tokens": 99}, ModelRequestParameters())
    assert response.parts[0] == TextPart("Summary.") and response.parts[1].args_as_dict() == {"pattern": "*"}
    assert response.finish_reason == "length" and response.usage.cache_write_tokens == 4
    body = json.loads(server.requests[0].content)
    assert list(body) == ["max_tokens", "messages", "model", "stream"] and body["stream"] is False
    assert body["max_tokens"] == 99
    server = Server(httpx.Response(200, content=b"{not json"))
    with pytest.raises(Exception, match="not JSON"):
        await model(server).request(list(HISTORY), None, ModelRequestParameters())


async def test_count_tokens_asks_the_count_endpoint_with_the_request_itself() -> None:
    server = Server(httpx.Response(200, json={"input_tokens": 1234}))
    m = model(server)
    usage = await m.count_tokens(list(HISTORY), {"max_retries": 0, "timeout": 5.0}, ModelRequestParameters())
    assert usage.input_tokens == 1234
    sent = server.requests[0]
    assert str(sent.url) == "http://anthropic.test/v1/messages/count_tokens"
    assert "token-counting-2024-11-01" in sent.headers["anthropic-beta"]
    assert json.loads(sent.content) == {"messages": [{"role": "user", "content": [{"text": "hi", "type": "text"}]}],
                                        "model": "claude-sonnet-4-5"}
    for bad in ({"input_tokens": "many"}, {"nothing": 1}):
        with pytest.raises(Exception, match="input_tokens"):
            await model(Server(httpx.Response(200, json=bad))).count_tokens(list(HISTORY), None, ModelRequestParameters())


async def test_the_calibration_counts_through_this_model() -> None:
    from types import SimpleNamespace

    from ketch.context.calibration import anthropic_counter

    server = Server(httpx.Response(200, json={"input_tokens": 77}))
    context = SimpleNamespace(messages=list(HISTORY), model_settings={}, model_request_parameters=ModelRequestParameters())
    assert await anthropic_counter(model(server))("", context) == 77
    assert await anthropic_counter(model(Server(httpx.Response(500, json={}))))("", context) is None


async def test_each_settled_message_is_encoded_once_and_the_bytes_stay_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    from ketch.wire import messages_body

    m = model(Server())
    history: list[Any] = [ModelRequest(parts=[UserPromptPart("start")])]
    settings = {"anthropic_cache": True, "anthropic_cache_instructions": True, "anthropic_cache_tool_definitions": True}
    encoded: list[int] = []
    real = messages_body.dumps

    def counting(value: Any) -> str:
        if isinstance(value, dict) and "role" in value:
            encoded.append(1)
        return real(value)

    monkeypatch.setattr(messages_body, "dumps", counting)
    from pydantic_ai.messages import ToolReturnPart

    for step in range(30):
        history.append(ModelResponse(parts=[ToolCallPart("read_file", {"path": f"{step}.txt"}, tool_call_id=f"c{step}")],
                                     provider_name="anthropic"))
        history.append(ModelRequest(parts=[ToolReturnPart("read_file", f"content {step} é", tool_call_id=f"c{step}")]))
        encoded.clear()
        fast = m.encode(history, settings, ModelRequestParameters(), stream=True)
        assert len(encoded) == (3 if step == 0 else 2), f"step {step}: {len(encoded)} turns encoded"
        fresh = model(Server()).encode(history, settings, ModelRequestParameters(), stream=True)
        assert fast == fresh
    # a pruned result (new content object) is encoded again, and the bytes follow
    history[4].parts[0].content = "[pruned]"
    assert b"[pruned]" in m.encode(history, settings, ModelRequestParameters(), stream=True)


def test_a_session_on_this_wire_loads_no_provider_sdk(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import asyncio, sys
        sys.path.insert(0, %r)
        from fakeprovider import FakeProvider, ToolCall, Turn
        from durable_session import open_session, run
        from pathlib import Path
        work = Path(%r)
        work.mkdir()
        (work / "a.txt").write_text("alpha")
        async def main():
            turns = [Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"})], reasoning="look"), Turn(text="done")]
            with FakeProvider(turns) as fake:
                session = await open_session(fake, "anthropic-messages", work)
                events = await run(session, "read a.txt")
                await session.aclose()
            assert events[-1].reason == "done", events[-1]
        asyncio.run(main())
        banned = ("anthropic", "openai", "google.genai", "groq", "mistralai",
                  "pydantic_ai.models.anthropic", "pydantic_ai.models.openai", "pydantic_ai.models.google",
                  "pydantic_ai.models.groq")
        # the ``pydantic_ai.providers`` package itself is pydantic-ai's core (``Provider``); no provider module may load
        loaded = sorted(m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in banned)
                        or m.startswith("pydantic_ai.providers."))
        print("LOADED", loaded)
    """) % (str(ROOT / "tests"), str(tmp_path / "work"))
    env = {"HOME": str(tmp_path), "KETCH_DATA_DIR": str(tmp_path / "data"), "ANTHROPIC_API_KEY": "k",
           "PATH": "/usr/bin:/bin", "KETCH_CONFIG_DIR": str(tmp_path / "config")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LOADED []" in done.stdout, done.stdout[-2000:]

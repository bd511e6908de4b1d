"""ketch's own Responses model (``wire.responses``): no SDK imported, events mapped to parts,
a cut stream refused, errors sorted, usage read, each history message encoded once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakeprovider import FakeProvider, NativeSearch, ToolCall, Turn
from kettle import adhoc, ketch_env, run_ketch, write_project_config
from pydantic_ai.exceptions import ModelConnectionError, ModelHTTPError
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

from ketch.wire import responses_items
from ketch.wire.responses import ResponsesModel

FORBIDDEN = ("openai", "anthropic", "google.genai", "groq", "mistralai", "pydantic_ai.models.openai",
             "pydantic_ai.providers.")
"""SDKs and the SDK-backed pydantic-ai modules (the ``pydantic_ai.providers`` package itself is
imported by ``pydantic_ai.models``; its provider modules are not)."""


def test_a_headless_turn_on_the_responses_wire_imports_no_sdk(tmp_path: Path) -> None:
    """A clean interpreter runs a whole turn (a tool call, then the answer) on the Responses wire."""
    with FakeProvider([Turn(tool_calls=[ToolCall("shell", {"command": "echo hi"}, id="call_1")]),
                       Turn(text="done from responses")]) as fake:
        code = ("import sys\nfrom ketch.frontends.cli import main\n"
                f"try: main({['-p', 'run echo', '--yolo', *adhoc(fake, 'openai-responses')]!r})\n"
                "except SystemExit as e: code = e.code\n"
                f"print('MODULES', sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'anthropic', 'groq', 'mistralai') "
                f"or m.startswith({FORBIDDEN[2:]!r})))\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             cwd=tmp_path, env=ketch_env())
        paths = [r.path for r in fake.model_requests]
    assert out.returncode == 0, out.stderr
    assert "done from responses" in out.stdout
    assert paths == ["/v1/responses", "/v1/responses"]
    assert out.stdout.strip().splitlines()[-1] == "MODULES []", out.stdout[-2000:]


# ---------------------------------------------------------------- a model against a scripted transport
def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


class Script(httpx.AsyncBaseTransport):
    def __init__(self, *bodies: tuple[int, bytes, str]) -> None:
        self.bodies = list(bodies)
        self.sent: list[bytes] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(await request.aread())
        status, body, kind = self.bodies.pop(0)
        return httpx.Response(status, content=body, headers={"content-type": kind})


def model(transport: Script, name: str = "gpt-5") -> ResponsesModel:
    return ResponsesModel(name, base_url="http://fake/v1", api_key="k", max_retries=0, transport=transport)


def params(**kw: Any) -> ModelRequestParameters:
    tool = ToolDefinition(name="shell", parameters_json_schema={"type": "object", "properties": {}}, description="run")
    return ModelRequestParameters(function_tools=[tool], allow_text_output=True, **kw)


async def stream_all(m: ResponsesModel, messages: list[Any]) -> ModelResponse:
    async with m.request_stream(messages, None, params()) as stream:
        async for _ in stream:
            pass
    return stream.get()


RESP = {"id": "resp_1", "model": "gpt-5-2025", "created_at": 1700000000, "status": "completed", "output": [],
        "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60}, "output_tokens": 40,
                  "output_tokens_details": {"reasoning_tokens": 25}, "total_tokens": 140}}


def full_stream() -> bytes:
    rs, msg, fc, ws = "rs_1", "msg_1", "fc_1", "ws_1"
    return sse(
        {"type": "response.created", "response": {**RESP, "status": "in_progress", "usage": None}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": rs, "summary": []}},
        {"type": "response.reasoning_summary_part.added", "item_id": rs, "summary_index": 0, "part": {"type": "summary_text", "text": ""}},
        {"type": "response.reasoning_summary_text.delta", "item_id": rs, "summary_index": 0, "delta": "Think"},
        {"type": "response.reasoning_summary_text.delta", "item_id": rs, "summary_index": 0, "delta": "ing."},
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"type": "reasoning", "id": rs, "summary": [], "encrypted_content": "ENC"}},
        {"type": "response.output_item.added", "output_index": 1,
         "item": {"type": "web_search_call", "id": ws, "status": "in_progress", "action": {"type": "search"}}},
        {"type": "response.web_search_call.completed", "output_index": 1, "item_id": ws},
        {"type": "response.output_item.done", "output_index": 1,
         "item": {"type": "web_search_call", "id": ws, "status": "completed",
                  "action": {"type": "search", "query": "ketch", "sources": [{"type": "url", "url": "https://k.example"}]}}},
        {"type": "response.output_item.added", "output_index": 2, "item": {"type": "message", "id": msg, "role": "assistant", "content": []}},
        {"type": "response.output_text.delta", "item_id": msg, "output_index": 2, "content_index": 0, "delta": "Hel"},
        {"type": "response.output_text.delta", "item_id": msg, "output_index": 2, "content_index": 0, "delta": "lo"},
        {"type": "response.output_text.done", "item_id": msg, "output_index": 2, "content_index": 0, "text": "Hello"},
        {"type": "response.output_item.added", "output_index": 3,
         "item": {"type": "function_call", "id": fc, "call_id": "call_9", "name": "shell", "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "item_id": fc, "output_index": 3, "delta": '{"command":'},
        {"type": "response.function_call_arguments.done", "item_id": fc, "output_index": 3, "arguments": '{"command":"ls"}'},
        {"type": "response.completed", "response": {**RESP, "output": [
            {"type": "web_search_call", "id": ws, "status": "completed", "action": {"type": "search", "query": "ketch"}}]}},
    )


def test_stream_events_become_parts_usage_and_a_finish_reason() -> None:
    transport = Script((200, full_stream(), "text/event-stream"))
    response = asyncio.run(stream_all(model(transport), [ModelRequest(parts=[UserPromptPart("hi")])]))
    kinds = [type(p) for p in response.parts]
    assert kinds == [ThinkingPart, NativeToolCallPart, NativeToolReturnPart, TextPart, ToolCallPart]
    thinking, call, result, text, tool = response.parts
    assert (thinking.content, thinking.id, thinking.signature) == ("Thinking.", "rs_1", "ENC")
    assert call.args == {"type": "search", "query": "ketch"} and call.tool_call_id == "ws_1"
    assert result.content == {"status": "completed", "sources": [{"type": "url", "url": "https://k.example"}]}
    assert (text.content, text.id) == ("Hello", "msg_1")
    # the .done event completes arguments that streamed only in part
    assert (tool.tool_name, tool.args, tool.tool_call_id, tool.id) == ("shell", '{"command":"ls"}', "call_9", "fc_1")
    assert response.provider_response_id == "resp_1" and response.model_name == "gpt-5-2025"
    assert response.finish_reason == "stop"
    assert response.usage.input_tokens == 100 and response.usage.cache_read_tokens == 60
    assert response.usage.output_tokens == 40 and response.usage.details["reasoning_tokens"] == 25
    assert response.usage.details["web_search_requests"] == 1


def test_the_encrypted_reasoning_and_search_go_back_as_items() -> None:
    """gpt-5 keeps reasoning server-side only as encrypted content: it is asked for and sent back."""
    first = Script((200, full_stream(), "text/event-stream"))
    m = model(first)
    history: list[Any] = [ModelRequest(parts=[UserPromptPart("hi")])]
    history.append(asyncio.run(stream_all(m, history)))
    history.append(ModelRequest(parts=[ToolReturnPart("shell", "file.txt", tool_call_id="call_9")]))
    body = m.body(history, {}, m.prepare_request(None, params())[1], stream=True)
    sent = json.loads(body)
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert sent["input"][1] == {"id": "rs_1", "summary": [{"text": "Thinking.", "type": "summary_text"}],
                                "encrypted_content": "ENC", "type": "reasoning"}
    assert sent["input"][2] == {"id": "ws_1", "action": {"type": "search", "query": "ketch"}, "status": "completed",
                                "type": "web_search_call"}
    assert sent["input"][3]["type"] == "message" and sent["input"][3]["id"] == "msg_1"
    assert sent["input"][4] == {"name": "shell", "arguments": '{"command":"ls"}', "call_id": "call_9",
                                "type": "function_call", "id": "fc_1"}
    assert sent["input"][5] == {"type": "function_call_output", "call_id": "call_9", "output": "file.txt"}


def test_a_stream_without_its_end_event_is_an_error() -> None:
    body = full_stream().rsplit(b"event: response.completed", 1)[0]
    with pytest.raises(ModelConnectionError, match="without its end-of-answer event"):
        asyncio.run(stream_all(model(Script((200, body, "text/event-stream"))), [ModelRequest(parts=[UserPromptPart("hi")])]))


def test_a_stream_closed_before_its_first_event_reads_as_a_refused_stream() -> None:
    from ketch.providers.stream_refusal import refuses_streamed_tools

    with pytest.raises(ModelConnectionError) as caught:
        asyncio.run(stream_all(model(Script((200, b": ping\n\n", "text/event-stream"))), [ModelRequest(parts=[UserPromptPart("hi")])]))
    assert refuses_streamed_tools(caught.value)


def test_error_events_and_failed_responses_are_model_errors() -> None:
    error = sse({"type": "error", "code": "rate_limit_exceeded", "message": "slow down"})
    with pytest.raises(ModelHTTPError) as caught:
        asyncio.run(stream_all(model(Script((200, error, "text/event-stream"))), [ModelRequest(parts=[UserPromptPart("hi")])]))
    assert caught.value.status_code == 429
    failed = sse({"type": "response.created", "response": {**RESP, "status": "in_progress"}},
                 {"type": "response.failed", "response": {**RESP, "status": "failed",
                                                          "error": {"code": "server_error", "message": "boom"}}})
    with pytest.raises(ModelHTTPError) as caught:
        asyncio.run(stream_all(model(Script((200, failed, "text/event-stream"))), [ModelRequest(parts=[UserPromptPart("hi")])]))
    assert caught.value.status_code >= 500 and "boom" in str(caught.value.body)
    http = Script((400, json.dumps({"error": {"message": "bad input", "code": "invalid"}}).encode(), "application/json"))
    with pytest.raises(ModelHTTPError) as caught:
        asyncio.run(stream_all(model(http), [ModelRequest(parts=[UserPromptPart("hi")])]))
    assert caught.value.status_code == 400 and caught.value.body == {"error": {"message": "bad input", "code": "invalid"}}


def test_an_incomplete_answer_is_cut_by_length() -> None:
    cut = sse({"type": "response.created", "response": {**RESP, "status": "in_progress"}},
              {"type": "response.output_text.delta", "item_id": "m", "content_index": 0, "delta": "par"},
              {"type": "response.incomplete", "response": {**RESP, "status": "incomplete",
                                                           "incomplete_details": {"reason": "max_output_tokens"}}})
    response = asyncio.run(stream_all(model(Script((200, cut, "text/event-stream"))), [ModelRequest(parts=[UserPromptPart("hi")])]))
    assert response.finish_reason == "length" and response.provider_details["finish_reason"] == "max_output_tokens"


def test_the_whole_answer_fallback_sends_stream_false_and_reads_the_output() -> None:
    whole = {**RESP, "output": [
        {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "hm"}], "encrypted_content": "E2"},
        {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "whole", "annotations": []}]},
        {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "shell", "arguments": "{}"}]}
    transport = Script((200, json.dumps(whole).encode(), "application/json"))
    response = asyncio.run(model(transport).request([ModelRequest(parts=[UserPromptPart("hi")])], None, params()))
    assert json.loads(transport.sent[0])["stream"] is False
    assert [type(p) for p in response.parts] == [ThinkingPart, TextPart, ToolCallPart]
    assert response.parts[0].signature == "E2" and response.parts[2].tool_call_id == "call_2"
    assert response.usage.cache_read_tokens == 60 and response.finish_reason == "stop"


def test_each_history_message_is_encoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Step after step, only the messages new since the previous request are mapped; the bytes are
    those of a model that maps everything afresh."""
    calls: list[Any] = []
    requests, responses = responses_items.request_items, responses_items.response_items
    monkeypatch.setattr("ketch.wire.responses.request_items", lambda message, flags: (calls.append(message), requests(message, flags))[1])
    monkeypatch.setattr("ketch.wire.responses.response_items",
                        lambda message, flags, **kw: (calls.append(message), responses(message, flags, **kw))[1])
    m = model(Script())
    history: list[Any] = [ModelRequest(parts=[UserPromptPart("start")])]
    p = m.prepare_request(None, params())[1]
    for step in range(30):
        calls.clear()
        body = m.body(history, {}, p, stream=True)
        assert calls == history[-2:] if step else calls == history, step  # the newest response and request alone
        calls.clear()
        assert body == model(Script()).body(history, {}, p, stream=True)
        assert len(calls) == len(history)
        history.append(ModelResponse(parts=[TextPart(f"answer {step}"),
                                            ToolCallPart("shell", {"command": f"ls {step}"}, tool_call_id=f"c{step}")]))
        history.append(ModelRequest(parts=[ToolReturnPart("shell", f"out {step}", tool_call_id=f"c{step}")]))
    # a message changed by pruning is a new object: it is mapped afresh
    history[1] = ModelResponse(parts=[TextPart("pruned")])
    body = json.loads(m.body(history, {}, p, stream=True))
    assert body["input"][1] == {"role": "assistant", "content": "pruned"}


def test_hosted_search_on_the_responses_wire_offers_the_tool_and_replays_the_call(tmp_path: Path) -> None:
    sources = [{"title": "Ketch", "url": "https://docs.example.org/ketch", "snippet": "A terminal agent."}]
    with FakeProvider([Turn(text="Found it [1].", native_search=NativeSearch("ketch docs", sources)),
                       Turn(text="again")]) as fake:
        write_project_config(tmp_path, f'model = "c:gpt-5"\n[connections.c]\npreset = "openai"\nwire = "openai-responses"\n'
                                       f'base_url = "{fake.base_url}"\nmax_retries = 0\n'
                                       '[models."c:gpt-5"]\ncapabilities = { web_search = true }\n[web_search]\nenabled = true\n')
        run = run_ketch(["-p", "search ketch", "--web-search"], tmp_path, env={"OPENAI_API_KEY": "sk-x"})
        assert run.code == 0, run.stderr
        again = run_ketch(["--continue", "-p", "and again", "--web-search"], tmp_path, env={"OPENAI_API_KEY": "sk-x"})
        assert again.code == 0, again.stderr
        bodies = [r.body for r in fake.model_requests]
        assert not fake.rejections, fake.rejections
    assert "Found it" in run.stdout
    assert any(t.get("type") == "web_search" for t in bodies[0]["tools"])
    replayed = [i for i in bodies[-1]["input"] if i.get("type") == "web_search_call"]
    assert len(replayed) == 1 and replayed[0]["action"]["query"] == "ketch docs"

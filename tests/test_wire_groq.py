"""Groq on ketch's own Chat model (``wire.chat_groq``): the bytes pydantic-ai's ``GroqModel`` sent
through the ``groq`` SDK, and Groq's answers read without it.

- The profiles equal ``GroqProvider.model_profile`` (the SDK is imported in the test only).
- For the same history (reasoning, tool calls, an image), settings and parameters the request body
  equals the SDK model's byte for byte: gpt-oss (graded effort), qwen3 (reasoning off through
  ``none``), llama (no reasoning), a compound system (no function tools, domain filters as
  ``search_settings``), each thinking level, streamed and whole.
- Reasoning, ``executed_tools`` searches, ``x_groq`` usage and the ``tool_use_failed`` error read
  from bytes a scripted server sends; a compound request that may not search is refused unsent.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

MODELS = ["openai/gpt-oss-120b", "openai/gpt-oss-20b", "qwen/qwen3-32b", "llama-3.3-70b-versatile",
          "meta-llama/llama-4-scout-17b-16e-instruct", "moonshotai/kimi-k2-instruct", "groq/compound",
          "compound-beta-mini", "deepseek-r1-distill-llama-70b", "gemma2-9b-it", "fake-model"]


@pytest.mark.parametrize("model", MODELS)
def test_the_profile_equals_the_sdk_provider(model: str) -> None:
    from pydantic_ai.providers.groq import GroqProvider

    from ketch.wire.chat_groq import groq_profile

    assert groq_profile(model) == GroqProvider.model_profile(model)


def _history():
    from pydantic_ai.messages import (
        BinaryContent,
        ModelRequest,
        ModelResponse,
        NativeToolCallPart,
        NativeToolReturnPart,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082")
    return [
        ModelRequest(parts=[SystemPromptPart("You are ketch. ü"), UserPromptPart("read the file")]),
        ModelResponse(parts=[ThinkingPart("plan"), ToolCallPart("read_file", {"path": "a"}, tool_call_id="c1")],
                      provider_name="groq"),
        ModelRequest(parts=[ToolReturnPart("read_file", "contents\n", tool_call_id="c1")]),
        ModelResponse(parts=[NativeToolCallPart("web_search", {"query": "q"}, tool_call_id="s1", provider_name="groq"),
                             NativeToolReturnPart("web_search", {"results": []}, tool_call_id="s1", provider_name="groq"),
                             TextPart("It says contents."), ToolCallPart("shell", '{"command":"ls"}', tool_call_id="c2")],
                      provider_name="groq"),
        ModelRequest(parts=[ToolReturnPart("shell", {"out": "a b"}, tool_call_id="c2"),
                            UserPromptPart(["look", BinaryContent(png, media_type="image/png")])]),
        ModelResponse(parts=[ToolCallPart("shell", '{"command":"pwd"}', tool_call_id="c3")], provider_name="groq"),
        ModelRequest(parts=[ToolReturnPart("shell", "/w", tool_call_id="c3")]),
    ]


def _params(thinking=None, search=False):
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.native_tools import WebSearchTool
    from pydantic_ai.tools import ToolDefinition

    tools = [ToolDefinition(name="read_file", description="Read a file.", parameters_json_schema={
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False}),
        ToolDefinition(name="shell", description=None, parameters_json_schema={
            "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}, strict=True)]
    native = [WebSearchTool(allowed_domains=["docs.example.org"]) if search == "domains" else WebSearchTool()] if search else []
    return ModelRequestParameters(function_tools=tools, thinking=thinking, native_tools=native)


def _sse(*chunks: object, done: bool = True) -> bytes:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


def _server(sent: list[tuple[str, bytes]], stream: bool):
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append((str(request.url), request.content))
        if stream:
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_sse(
                {"id": "r", "model": "m", "created": 1, "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}))
        return httpx.Response(200, json={"id": "r", "model": "m", "created": 1, "object": "chat.completion",
                                         "choices": [{"index": 0, "finish_reason": "stop",
                                                      "message": {"role": "assistant", "content": "ok"}}]})
    return httpx.MockTransport(handler)


def _own(model_name: str, transport):
    from ketch.providers.groq import api_base_url, compound_refusal
    from ketch.wire.chat_groq import GroqChatModel

    model = GroqChatModel(model_name, base_url=api_base_url("https://api.groq.com/openai/v1"), api_key="k",
                          max_retries=0, compound_refusal=compound_refusal(model_name))
    model._http()._transport = transport
    return model


def _sdk(model_name: str, transport):
    from groq import AsyncGroq
    from pydantic_ai.models.groq import GroqModel
    from pydantic_ai.providers.groq import GroqProvider

    from ketch.providers.groq import is_compound, sdk_base_url

    class KetchGroqModel(GroqModel):  # what providers.groq_model added for compound systems
        def _get_tool_choice(self, model_settings, model_request_parameters):
            if is_compound(self.model_name):
                return [], None
            return super()._get_tool_choice(model_settings, model_request_parameters)

    client = AsyncGroq(api_key="k", base_url=sdk_base_url("https://api.groq.com/openai/v1"), max_retries=0,
                       http_client=httpx.AsyncClient(transport=transport))
    return KetchGroqModel(model_name, provider=GroqProvider(groq_client=client))


def _body(build, model_name, stream, settings, params):
    sent: list[tuple[str, bytes]] = []
    model = build(model_name, _server(sent, stream))

    async def go():
        if stream:
            async with model.request_stream(_history(), dict(settings), params) as response:
                async for _ in response:
                    pass
        else:
            await model.request(_history(), dict(settings), params)

    asyncio.run(go())
    return sent[0]


CASES = [
    ("openai/gpt-oss-120b", {"max_tokens": 100}, "high", False),
    ("openai/gpt-oss-120b", {"max_tokens": 100}, False, False),
    ("openai/gpt-oss-20b", {"max_tokens": 100, "temperature": 0.2, "parallel_tool_calls": False}, None, False),
    ("qwen/qwen3-32b", {"max_tokens": 100}, False, False),
    ("qwen/qwen3-32b", {"max_tokens": 100}, "medium", False),
    ("llama-3.3-70b-versatile", {"max_tokens": 100, "seed": 3, "stop_sequences": ["END"]}, None, False),
    ("deepseek-r1-distill-llama-70b", {"max_tokens": 100}, False, False),
    ("groq/compound", {"max_tokens": 100}, None, True),
    ("groq/compound-mini", {"max_tokens": 100}, "low", "domains"),
]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("model_name, settings, thinking, search", CASES)
def test_the_body_equals_the_sdk_models(model_name, settings, thinking, search, stream) -> None:
    params = _params(thinking, search)
    (sdk_url, sdk), (own_url, own) = (_body(b, model_name, stream, settings, params) for b in (_sdk, _own))
    assert own == sdk, (json.loads(sdk), json.loads(own))
    assert own_url == sdk_url == "https://api.groq.com/openai/v1/chat/completions"


def test_a_compound_request_that_may_not_search_is_refused_unsent() -> None:
    from pydantic_ai.exceptions import UserError

    sent: list = []
    with pytest.raises(UserError, match="searches the web on its own"):
        asyncio.run(_own("groq/compound", _server(sent, False)).request(_history(), {}, _params()))
    assert sent == []


def _run(model, stream: bool):
    from pydantic_ai.messages import ModelRequest
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.native_tools import WebSearchTool

    params = ModelRequestParameters(native_tools=[WebSearchTool()]) if model.compound else ModelRequestParameters()

    async def go():
        messages = [ModelRequest.user_text_prompt("hi")]
        if not stream:
            return await model.request(messages, None, params)
        async with model.request_stream(messages, None, params) as response:
            async for _ in response:
                pass
        return response.get()

    return asyncio.run(go())


def _served(model_name: str, content, status: int = 200):
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(content, dict):
            return httpx.Response(status, json=content)
        return httpx.Response(status, headers={"content-type": "text/event-stream"}, content=content)
    return _own(model_name, httpx.MockTransport(handler))


CALL = {"index": 0, "type": "search", "arguments": '{"query": "ketch"}'}
RESULTS = {"results": [{"title": "Ketch", "url": "https://e.org", "content": "agent", "score": 0.9}]}


@pytest.mark.parametrize("stream", [True, False])
def test_reasoning_searches_and_usage_are_read(stream: bool) -> None:
    from pydantic_ai.messages import NativeToolCallPart, NativeToolReturnPart, TextPart, ThinkingPart

    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
             "prompt_tokens_details": {"cached_tokens": 5}}
    if stream:
        served = _served("groq/compound", _sse(
            {"id": "q", "model": "groq/compound", "created": 5, "choices": [{"index": 0, "delta": {"reasoning": "hm"}}]},
            {"id": "q", "choices": [{"index": 0, "delta": {"executed_tools": [CALL]}}]},
            {"id": "q", "choices": [{"index": 0, "delta": {"executed_tools": [{**CALL, "output": "o", "search_results": RESULTS}]}}]},
            {"id": "q", "choices": [{"index": 0, "delta": {"content": "Found."}, "finish_reason": "stop"}]},
            {"id": "q", "choices": [], "x_groq": {"id": "req", "usage": usage}}))
    else:
        served = _served("groq/compound", {"id": "q", "model": "groq/compound", "created": 5, "usage": usage, "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Found.", "reasoning": "hm",
                                                               "executed_tools": [{**CALL, "output": "o", "search_results": RESULTS}]}}]})
    response = _run(served, stream)
    kinds = [type(p) for p in response.parts]
    assert kinds == [ThinkingPart, NativeToolCallPart, NativeToolReturnPart, TextPart], response.parts
    call, result = response.parts[1], response.parts[2]
    assert call.args == {"query": "ketch"} and call.tool_call_id == result.tool_call_id
    assert result.content == {"images": None, "results": [{"content": "agent", "score": 0.9, "title": "Ketch",
                                                           "url": "https://e.org"}]}
    assert response.usage.input_tokens == 12 and response.usage.cache_read_tokens == 5
    assert response.finish_reason == "stop" and response.model_name == "groq/compound"


def test_unreadable_search_arguments_are_kept_as_text() -> None:
    bad = {"index": 0, "type": "search", "arguments": "{not json", "output": "o", "search_results": RESULTS}
    served = _served("groq/compound", {"id": "q", "model": "groq/compound", "created": 5, "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "x", "executed_tools": [bad]}}]})
    response = _run(served, False)
    assert response.parts[0].args == {"unreadable_arguments": "{not json"}


@pytest.mark.parametrize("stream", [True, False])
def test_a_failed_tool_generation_comes_back_as_the_call_to_retry(stream: bool) -> None:
    from pydantic_ai.messages import ToolCallPart

    error = {"error": {"message": "Tool call validation failed", "type": "invalid_request_error",
                       "code": "tool_use_failed", "failed_generation": '{"name": "shell", "arguments": {"cmd": "ls"}}'}}
    if stream:
        served = _served("openai/gpt-oss-120b", _sse(
            {"id": "q", "model": "openai/gpt-oss-120b", "created": 5, "choices": [{"index": 0, "delta": {"content": ""}}]},
            error))
    else:
        served = _served("openai/gpt-oss-120b", error, status=400)
    response = _run(served, stream)
    assert [(type(p), p.tool_name, p.args) for p in response.parts] == [(ToolCallPart, "shell", {"cmd": "ls"})]


def test_another_error_in_a_stream_is_an_http_error() -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    served = _served("openai/gpt-oss-120b", _sse(
        {"id": "q", "model": "openai/gpt-oss-120b", "created": 5, "choices": [{"index": 0, "delta": {"content": "a"}}]},
        {"error": {"message": "over capacity", "type": "server_error", "code": 503}}))
    with pytest.raises(ModelHTTPError) as caught:
        _run(served, True)
    assert caught.value.status_code == 503


_FAILED = {"error": {"message": "Tool call validation failed", "type": "invalid_request_error", "code": "tool_use_failed",
                     "failed_generation": '{"name": "shell", "arguments": {"cmd": "ls"}}'}}
_HEAD = {"id": "q", "model": "openai/gpt-oss-120b", "created": 5, "choices": [{"index": 0, "delta": {"content": "a"}}]}


def _outcome(build, content: bytes):
    """What ``build``'s model makes of a streamed answer: its parts and finish reason, or the error's status."""
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import ModelRequest
    from pydantic_ai.models import ModelRequestParameters

    model = build("openai/gpt-oss-120b", httpx.MockTransport(
        lambda request: httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content)))

    async def go():
        async with model.request_stream([ModelRequest.user_text_prompt("hi")], None, ModelRequestParameters()) as response:
            async for _ in response:
                pass
        return response.get()

    try:
        response = asyncio.run(go())
    except ModelHTTPError as exc:
        return ("error", exc.status_code)
    return ([(type(p).__name__, getattr(p, "tool_name", None), getattr(p, "args", None), getattr(p, "content", None))
             for p in response.parts], response.finish_reason)


@pytest.mark.parametrize("content", [
    _sse(_HEAD, _FAILED),  # after an event: the malformed call, for a retry
    _sse(_HEAD),  # no finish reason: none is made up
    _sse(_HEAD, {"id": "q", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
], ids=["failed-later", "no-finish", "length"])
def test_a_stream_ends_as_the_sdk_model_ended_it(content: bytes) -> None:
    assert _outcome(_own, content) == _outcome(_sdk, content)


def test_a_failed_tool_generation_as_the_first_event_fails_the_request() -> None:
    """Before any event the request fails as a 400 (the status Groq gives the same error unstreamed),
    where ``providers.stream_refusal`` can still act on it."""
    assert _outcome(_own, _sse(_FAILED)) == ("error", 400)

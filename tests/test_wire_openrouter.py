"""OpenRouter on ketch's own Chat model (``wire.chat_openrouter``): the bytes pydantic-ai's
``OpenRouterModel`` sent through the ``openai`` SDK, and OpenRouter's answers read without it.

- The route profiles equal ``OpenRouterProvider.model_profile`` (the SDK is imported in the test only).
- For the same history (reasoning from OpenRouter's ``reasoning_details`` and from elsewhere, tool
  calls, an image), settings and parameters, the request body equals the SDK model's byte for byte:
  OpenAI, Anthropic, Gemini and mandatory-reasoning routes, every thinking level, the unified cache
  setting (``cache_control`` breakpoints, TTLs, the four-breakpoint limit), hosted search.
- ``reasoning_details``, annotations, the downstream provider, cost and an ``error`` inside a 200
  answer or a stream, read from bytes a scripted server sends.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

MODELS = ["openai/gpt-5", "anthropic/claude-sonnet-4.5", "google/gemini-2.5-pro", "z-ai/glm-5.3", "x-ai/grok-4",
          "openai/gpt-5.6", "~anthropic/claude-opus-latest", "anthropic/claude-opus-5", "openai/gpt-oss-120b",
          "perplexity/sonar-deep-research", "meta-llama/llama-3.3-70b:free", "foo/bar"]


@pytest.mark.parametrize("model", MODELS)
def test_the_route_profile_equals_the_sdk_provider(model: str) -> None:
    from pydantic_ai.providers.openrouter import OpenRouterProvider

    from ketch.wire.openrouter_profile import openrouter_profile

    own, sdk = dict(openrouter_profile(model) or {}), dict(OpenRouterProvider.model_profile(model) or {})
    # the Gemini routes' schema transformer is a copy of pydantic-ai's class (its module imports the SDK)
    a, b = own.pop("json_schema_transformer", None), sdk.pop("json_schema_transformer", None)
    assert (a.__qualname__, a.__mro__[1]) == (b.__qualname__, b.__mro__[1])
    assert own == sdk


def _history(system_mid: bool = False):
    from pydantic_ai.messages import (
        BinaryContent,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082")
    signed = ThinkingPart("plan", id="r1", signature="sig==", provider_name="openrouter",
                          provider_details={"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0})
    encrypted = ThinkingPart("", id="r2", signature="enc==", provider_name="openrouter",
                             provider_details={"type": "reasoning.encrypted", "format": "openai-responses-v1", "index": 1})
    return [
        ModelRequest(parts=[SystemPromptPart("You are ketch. ü"), UserPromptPart("read the file")]),
        ModelResponse(parts=[signed, encrypted, ToolCallPart("read_file", {"path": "a"}, tool_call_id="c1")],
                      provider_name="openrouter"),
        ModelRequest(parts=[ToolReturnPart("read_file", "contents\n", tool_call_id="c1")]),
        ModelResponse(parts=[ThinkingPart("elsewhere", id="reasoning", provider_name="openai"), TextPart("It says contents."),
                             ToolCallPart("shell", '{"command":"ls"}', tool_call_id="c2")], provider_name="openrouter"),
        ModelRequest(parts=[ToolReturnPart("shell", {"out": "a b"}, tool_call_id="c2"),
                            *([SystemPromptPart("Mind the tests.")] if system_mid else []),
                            UserPromptPart(["look", BinaryContent(png, media_type="image/png")])]),
        ModelResponse(parts=[TextPart("An image.")], provider_name="openrouter"),
        ModelRequest(parts=[UserPromptPart("and now?")]),
    ]


def _params(thinking=None, cache=None, search=False):
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.native_tools import WebSearchTool
    from pydantic_ai.tools import ToolDefinition

    tools = [ToolDefinition(name="read_file", description="Read a file.", parameters_json_schema={
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False}),
        ToolDefinition(name="shell", description=None, parameters_json_schema={
            "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}, strict=True)]
    return ModelRequestParameters(function_tools=tools, thinking=thinking, cache=cache,
                                  native_tools=[WebSearchTool()] if search else [])


def _sse(*chunks: object, done: bool = True) -> bytes:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


def _server(sent: list[bytes], stream: bool):
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        if stream:
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_sse(
                {"id": "r", "model": "m", "created": 1, "object": "chat.completion.chunk", "provider": "P",
                 "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}))
        return httpx.Response(200, json={"id": "r", "model": "m", "created": 1, "object": "chat.completion",
                                         "provider": "P", "choices": [{"index": 0, "finish_reason": "stop",
                                                                       "message": {"role": "assistant", "content": "ok"}}]})
    return httpx.MockTransport(handler)


def _own(model_name: str, transport):
    from ketch.wire.chat_openrouter import OpenRouterChatModel

    model = OpenRouterChatModel(model_name, base_url="http://x.test/v1", api_key="k", max_retries=0)
    model._http()._transport = transport
    return model


def _sdk(model_name: str, transport):
    from openai import AsyncOpenAI
    from pydantic_ai.models.openrouter import OpenRouterModel
    from pydantic_ai.providers.openrouter import OpenRouterProvider

    client = AsyncOpenAI(base_url="http://x.test/v1", api_key="k", max_retries=0,
                         http_client=httpx.AsyncClient(transport=transport))
    # as ketch built it (providers.openrouter before the own wire)
    return OpenRouterModel(model_name, provider=OpenRouterProvider(openai_client=client),
                           settings={"openai_include_raw_annotations": True})


def _body(build, model_name, stream, settings, params, history):
    sent: list[bytes] = []
    model = build(model_name, _server(sent, stream))

    async def go():
        if stream:
            async with model.request_stream(history, dict(settings), params) as response:
                async for _ in response:
                    pass
        else:
            await model.request(history, dict(settings), params)

    asyncio.run(go())
    return sent[0]


CASES = [
    ("openai/gpt-5", {"max_tokens": 100}, "high", None, False, False),
    ("openai/gpt-5", {"max_tokens": 100, "cache": True}, None, True, True, False),
    ("openai/gpt-5.6", {"max_tokens": 100}, "medium", True, False, True),
    ("anthropic/claude-sonnet-4.5", {"max_tokens": 100}, "high", True, True, True),
    ("anthropic/claude-sonnet-4.5", {"max_tokens": 100}, False, "1h", False, False),
    ("anthropic/claude-sonnet-4.5", {"max_tokens": 100, "temperature": 0.3}, None, None, False, True),
    ("~anthropic/claude-opus-latest", {"max_tokens": 100}, False, True, True, False),
    ("google/gemini-2.5-pro", {"max_tokens": 100}, "low", True, False, False),
    ("google/gemini-2.5-pro", {"max_tokens": 100}, None, True, True, True),
    ("z-ai/glm-5.3", {"max_tokens": 100}, False, None, False, False),
    ("x-ai/grok-4", {"max_tokens": 100}, "max", None, True, False),
    ("openai/gpt-oss-120b", {"max_tokens": 100}, "minimal", None, False, True),
    ("openai/gpt-5", {"max_tokens": 100, "openai_reasoning_effort": "low"}, None, None, False, False),
    ("meta-llama/llama-3.3-70b:free", {"max_tokens": 100, "parallel_tool_calls": False}, None, None, False, False),
]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("model_name, settings, thinking, cache, search, system_mid", CASES)
def test_the_body_equals_the_sdk_models(model_name, settings, thinking, cache, search, system_mid, stream) -> None:
    params = _params(thinking, cache, search)
    bodies = [_body(build, model_name, stream, settings, params, _history(system_mid)) for build in (_sdk, _own)]
    assert bodies[1] == bodies[0], (json.loads(bodies[0]), json.loads(bodies[1]))


def test_a_growing_history_moves_its_breakpoint_and_the_memo_stays_unmarked() -> None:
    """On an Anthropic route the conversation's breakpoint follows the history as the SDK placed it,
    request after request on one model; a later request sees no marker left on an earlier message
    (the encoded history is memoized, the markers are put on copies)."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    history = _history()
    for n in range(6):
        history += [ModelResponse(parts=[TextPart(f"answer {n}")], provider_name="openrouter"),
                    ModelRequest(parts=[UserPromptPart(f"question {n}")])]
    params = _params("high", True, False)
    sent: list[bytes] = []
    model = _own("anthropic/claude-sonnet-4.5", _server(sent, False))  # one model: its memo is reused

    def reuse(_name, _transport):
        return model

    for end in (len(history) - 2, len(history)):
        before = len(sent)
        with pytest.raises(IndexError):  # _body's own list stays empty: the bytes went to `sent`
            _body(reuse, "anthropic/claude-sonnet-4.5", False, {}, params, history[:end])
        assert len(sent) == before + 1
        assert sent[-1] == _body(_sdk, "anthropic/claude-sonnet-4.5", False, {}, params, history[:end])
    first, last = (json.loads(b) for b in sent)
    assert json.dumps(last).count("cache_control") == 3, last  # the tools, the instructions, the newest message
    # the breakpoint the first request put on its newest message is gone from that message now
    assert first["messages"][-1]["content"][-1].get("cache_control") and not any(
        "cache_control" in p for p in last["messages"][len(first["messages"]) - 1]["content"])


def _run(model, stream: bool):
    from pydantic_ai.messages import ModelRequest
    from pydantic_ai.models import ModelRequestParameters

    async def go():
        messages = [ModelRequest.user_text_prompt("hi")]
        if not stream:
            return await model.request(messages, None, ModelRequestParameters())
        async with model.request_stream(messages, None, ModelRequestParameters()) as response:
            async for _ in response:
                pass
        return response.get()

    return asyncio.run(go())


def _served(content: bytes | dict, status: int = 200):
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(content, dict):
            return httpx.Response(status, json=content)
        return httpx.Response(status, headers={"content-type": "text/event-stream"}, content=content)
    return _own("anthropic/claude-sonnet-4.5", httpx.MockTransport(handler))


CITE = {"type": "url_citation", "url_citation": {"url": "https://e.org/a", "title": "A", "content": "x",
                                                 "start_index": 0, "end_index": 3}}
DETAILS = [{"type": "reasoning.text", "text": "think", "signature": "s1", "format": "anthropic-claude-v1", "index": 0}]
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "cost": 0.0012,
         "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 2},
         "cost_details": {"upstream_inference_cost": 0.001}}


@pytest.mark.parametrize("stream", [True, False])
def test_answers_read_reasoning_details_annotations_usage_and_cost(stream: bool) -> None:
    from pydantic_ai.messages import TextPart, ThinkingPart

    if stream:
        served = _served(_sse(
            {"id": "g1", "model": "anthropic/claude-sonnet-4.5", "provider": "Anthropic", "choices": [
                {"index": 0, "delta": {"reasoning": "think", "reasoning_details": DETAILS}}]},
            {"id": "g1", "provider": "Anthropic", "choices": [{"index": 0, "delta": {"content": "See A."}}]},
            {"id": "g1", "provider": "Anthropic", "choices": [{"index": 0, "delta": {"annotations": [CITE]},
                                                               "finish_reason": "stop", "native_finish_reason": "end_turn"}]},
            {"id": "g1", "provider": "Anthropic", "choices": [], "usage": USAGE}))
    else:
        served = _served({"id": "g1", "model": "anthropic/claude-sonnet-4.5", "provider": "Anthropic", "usage": USAGE,
                          "choices": [{"index": 0, "finish_reason": "stop", "native_finish_reason": "end_turn",
                                       "message": {"role": "assistant", "content": "See A.", "reasoning": "think",
                                                   "reasoning_details": DETAILS, "annotations": [CITE]}}]})
    response = _run(served, stream)
    thinking, text = response.parts
    assert isinstance(thinking, ThinkingPart) and (thinking.content, thinking.signature) == ("think", "s1")
    assert thinking.provider_details == {"format": "anthropic-claude-v1", "index": 0, "type": "reasoning.text"}
    assert isinstance(text, TextPart) and text.content == "See A."
    assert text.provider_details["annotations"] == [CITE]
    assert response.usage.input_tokens == 10 and response.usage.cache_read_tokens == 4
    assert response.usage.cache_write_tokens == 2
    details = response.provider_details
    assert details["cost"] == 0.0012 and details["downstream_provider"] == "Anthropic"
    assert details["finish_reason"] == "end_turn" and details["upstream_inference_cost"] == 0.001
    # and it goes back as reasoning_details, signature included
    from pydantic_ai.messages import ModelRequest

    carry, assistant = served._encoder.response(response)
    assert carry is None and assistant["reasoning_details"][0]["signature"] == "s1"
    assert "reasoning" not in assistant and ModelRequest  # the text went as a detail, not the field


@pytest.mark.parametrize("stream", [True, False])
def test_an_error_inside_a_200_is_the_http_error_its_code_names(stream: bool) -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    error = {"error": {"code": 429, "message": "Rate limit exceeded upstream", "metadata": {"provider_name": "X"}}}
    served = _served(_sse(error) if stream else error)
    with pytest.raises(ModelHTTPError) as caught:
        _run(served, stream)
    assert caught.value.status_code == 429 and "Rate limit" in str(caught.value.body)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("model_name", ["anthropic/claude-opus-5", "openai/gpt-6-sol", "openai/gpt-5",
                                        "anthropic/claude-sonnet-4.5"])
def test_a_mid_conversation_level_change_equals_the_sdk_models(model_name: str, stream: bool) -> None:
    """A ``/think`` change mid-session: on a route that takes it, a ``configuration_update`` where it
    happened and the window's opening level as ``reasoning.effort``; elsewhere the current level."""
    from pydantic_ai.messages import ModelRequest, ModelSettingsDeltaPart, UserPromptPart

    def history():
        messages = _history()
        first, *rest = messages
        first = ModelRequest(parts=[*first.parts, ModelSettingsDeltaPart(settings={"thinking": "high"}, top_level=True)])
        return [first, *rest[:-1], ModelRequest(parts=[*rest[-1].parts,
                                                        ModelSettingsDeltaPart(settings={"thinking": "low"}, top_level=False)])]

    params = _params("low", True, False)
    bodies = [_body(build, model_name, stream, {"max_tokens": 100}, params, history()) for build in (_sdk, _own)]
    assert bodies[1] == bodies[0], (json.loads(bodies[0]), json.loads(bodies[1]))
    sent = json.loads(bodies[1])
    takes_it = model_name in ("anthropic/claude-opus-5", "openai/gpt-6-sol")
    assert ("configuration_update" in bodies[1].decode()) == takes_it
    assert sent["reasoning"]["effort"] == ("high" if takes_it else "low")

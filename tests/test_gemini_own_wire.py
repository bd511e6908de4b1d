"""ketch's own Gemini model (``ketch.wire.gemini``) against a real local server.

What the server received (URL, headers, body bytes) and what the model made of the bytes it
sent back: finish reasons, usage, thought signatures, errors in Google's shape, a stream cut
before its finishReason, the whole-answer fallback, and that each history message is encoded
once. End to end runs (the golden bytes, search, cost) are in test_wire_golden.py,
test_gemini_wire.py and test_websearch_gemini.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.direct import model_request, model_request_stream
from pydantic_ai.exceptions import (
    ModelAuthenticationError,
    ModelConnectionError,
    ModelHTTPError,
    ModelRateLimitError,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters

from ketch.wire.gemini import GeminiModel

SDK_MODULES = ("google.genai", "google.auth", "openai", "anthropic", "groq", "mistralai", "pydantic_ai.models.google",
               "pydantic_ai.providers.")
"""Provider SDKs and pydantic-ai's SDK-backed models and providers (its ``pydantic_ai.providers``
package itself is loaded by ``pydantic_ai.models``; none of its provider modules may be)."""


class Server:
    """Answers each POST with the next scripted (status, content type, body) and keeps what came."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, str, bytes]] = []
        self.seen: list[tuple[str, dict[str, str], bytes]] = []
        self.url = ""


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            state.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            status, kind, answer = state.answers.pop(0)
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(answer)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(answer)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def sse(*chunks: dict[str, Any]) -> tuple[int, str, bytes]:
    return 200, "text/event-stream", b"".join(b"data: " + json.dumps(c).encode() + b"\r\n\r\n" for c in chunks)


def chunk(*parts: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None,
          grounding: dict[str, Any] | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    if grounding:
        candidate["groundingMetadata"] = grounding
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-2.5-flash", "responseId": "r1"}
    if usage:
        out["usageMetadata"] = usage
    return out


def model(server: Server, name: str = "gemini-2.5-flash", **kwargs: Any) -> GeminiModel:
    return GeminiModel(name, base_url=server.url, api_key="k-123", max_retries=0, **kwargs)


async def stream(m: GeminiModel, messages: list[Any] | None = None) -> ModelResponse:
    messages = messages or [ModelRequest(parts=[UserPromptPart("hi")])]
    async with model_request_stream(m, messages) as response:
        async for _ in response:
            pass
    return response.get()


async def test_streams_to_the_sse_url_with_the_key_header_and_maps_parts_and_usage(server: Server) -> None:
    server.answers.append(sse(
        chunk({"text": "Let me", "thought": True}, usage={"promptTokenCount": 10, "totalTokenCount": 10}),
        chunk({"text": "Hello", "thoughtSignature": "c2lnLTE_"}),
        chunk({"text": " there"}, {"functionCall": {"id": "c1", "name": "add", "args": {"a": 1}}},
              finish="MAX_TOKENS", usage={"promptTokenCount": 1000, "candidatesTokenCount": 20, "thoughtsTokenCount": 5,
                                          "cachedContentTokenCount": 600, "totalTokenCount": 1025}),
    ))
    response = await stream(model(server))
    path, headers, body = server.seen[0]
    assert path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert headers["x-goog-api-key"] == "k-123" and headers["content-type"] == "application/json"
    assert json.loads(body)["contents"] == [{"parts": [{"text": "hi"}], "role": "user"}]
    assert [type(p).__name__ for p in response.parts] == ["ThinkingPart", "TextPart", "ToolCallPart"]
    text = response.parts[1]
    assert isinstance(text, TextPart) and text.content == "Hello there"
    assert text.provider_details == {"thought_signature": "c2lnLTE/"}  # stored in the standard alphabet
    call = response.parts[2]
    assert isinstance(call, ToolCallPart) and (call.tool_call_id, call.args) == ("c1", {"a": 1})
    assert response.finish_reason == "length" and response.provider_details["finish_reason"] == "MAX_TOKENS"
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.cache_read_tokens) == (1000, 25, 600)
    assert response.usage.details["cached_content_tokens"] == 600 and response.usage.details["thoughts_tokens"] == 5
    assert response.provider_name == "google" and response.model_name == "gemini-2.5-flash"


async def test_a_stream_without_a_finish_reason_is_a_broken_connection(server: Server) -> None:
    server.answers.append(sse(chunk({"text": "half an"})))
    with pytest.raises(ModelConnectionError):
        await stream(model(server))


async def test_safety_is_a_content_filter(server: Server) -> None:
    server.answers.append(sse(chunk({"text": ""}, finish="SAFETY")))
    response = await stream(model(server))
    assert response.finish_reason == "content_filter" and response.parts == []


@pytest.mark.parametrize(("status", "google_status", "category"), [
    (429, "RESOURCE_EXHAUSTED", ModelRateLimitError), (400, "INVALID_ARGUMENT", ModelAuthenticationError)])
async def test_errors_in_googles_shape_keep_status_and_body(server: Server, status: int, google_status: str,
                                                            category: type[Exception]) -> None:
    details = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}] if status == 400 else []
    body = {"error": {"code": status, "message": "no", "status": google_status, "details": details}}
    server.answers.append((status, "application/json", json.dumps(body).encode()))
    with pytest.raises(ModelHTTPError) as raised:
        await stream(model(server))
    assert isinstance(raised.value, category)
    assert raised.value.status_code == status and raised.value.body == body


async def test_an_error_inside_the_stream_is_raised_with_its_code(server: Server) -> None:
    server.answers.append(sse(chunk({"text": "a"}), {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}))
    with pytest.raises(ModelHTTPError) as raised:
        await stream(model(server))
    assert raised.value.status_code == 503


async def test_the_whole_answer_fallback_posts_generate_content(server: Server) -> None:
    whole = chunk({"text": "Hmm", "thought": True}, {"text": "Done."}, finish="STOP",
                  usage={"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7})
    server.answers.append((200, "application/json", json.dumps(whole).encode()))
    response = await model_request(model(server), [ModelRequest(parts=[UserPromptPart("hi")])])
    assert server.seen[0][0] == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert [(type(p).__name__, p.content) for p in response.parts] == [("ThinkingPart", "Hmm"), ("TextPart", "Done.")]
    assert (response.usage.input_tokens, response.usage.output_tokens, response.finish_reason) == (5, 2, "stop")


async def test_grounding_without_server_side_parts_becomes_a_search_call_and_its_sources(server: Server) -> None:
    grounding = {"webSearchQueries": ["what is ketch"],
                 "groundingChunks": [{"web": {"uri": "https://a.example/x", "title": "A", "domain": "a.example"}}]}
    server.answers.append(sse(chunk({"text": "Ketch [1]."}, finish="STOP", grounding=grounding,
                                    usage={"promptTokenCount": 5, "candidatesTokenCount": 2})))
    response = await stream(model(server))
    kinds = [type(p).__name__ for p in response.parts]
    assert kinds == ["TextPart", "NativeToolCallPart", "NativeToolReturnPart"]
    assert response.parts[1].args == {"queries": ["what is ketch"]}
    assert response.parts[2].content == [{"domain": "a.example", "title": "A", "uri": "https://a.example/x"}]
    assert response.usage.details["web_search_requests"] == 1


def _history(steps: int) -> list[Any]:
    history: list[Any] = [ModelRequest(parts=[UserPromptPart("go")])]
    for n in range(steps):
        history.append(ModelResponse(parts=[ThinkingPart("t"), ToolCallPart("read", {"n": n}, tool_call_id=f"c{n}")],
                                     provider_name="google"))
        history.append(ModelRequest(parts=[ToolReturnPart("read", f"result {n}", tool_call_id=f"c{n}")]))
    return history


def test_each_settled_message_is_encoded_once_and_the_bytes_do_not_change() -> None:
    m = GeminiModel("gemini-2.5-flash", base_url="http://127.0.0.1:9", api_key="k")
    params = ModelRequestParameters()
    history = _history(50)
    first = m.body(history, {}, params)
    assert m.encoder.encoded == len(history)
    history += _history(51)[-2:]  # one more step
    second = m.body(history, {}, params)
    assert m.encoder.encoded == len(history)  # only the two new messages were encoded
    fresh = GeminiModel("gemini-2.5-flash", base_url="http://127.0.0.1:9", api_key="k").body(history, {}, params)
    assert second == fresh and second.startswith(first[: first.index(b"]")])
    contents = json.loads(second)["contents"]
    # the first call of a turn carries the skip signature; the tool result is a functionResponse
    assert contents[1]["parts"][0] == {"text": "t", "thought": True}
    assert contents[1]["parts"][1]["functionCall"] == {"id": "c0", "args": {"n": 0}, "name": "read"}
    assert contents[1]["parts"][1]["thoughtSignature"] == "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I="
    assert contents[2] == {"parts": [{"functionResponse": {"id": "c0", "name": "read",
                                                           "response": {"return_value": "result 0"}}}], "role": "user"}


def test_a_changed_message_is_encoded_again() -> None:
    m = GeminiModel("gemini-2.5-flash", base_url="http://127.0.0.1:9", api_key="k")
    history = _history(3)
    m.body(history, {}, ModelRequestParameters())
    history[2] = ModelRequest(parts=[ToolReturnPart("read", "[pruned]", tool_call_id="c0")])  # pruning makes a new message
    body = json.loads(m.body(history, {}, ModelRequestParameters()))
    assert body["contents"][2]["parts"][0]["functionResponse"]["response"] == {"return_value": "[pruned]"}


def test_a_session_on_the_gemini_wire_imports_no_provider_sdk(tmp_path: Path) -> None:
    """Build a session on the gemini wire and send a turn (against the fake), in a fresh
    interpreter: no SDK module may be loaded."""
    from fakeprovider import FakeProvider, Turn
    from kettle import ketch_env, write_project_config

    with FakeProvider([Turn(text="hello")]) as fake:
        write_project_config(tmp_path, f'[connections.g]\npreset = "gemini"\nbase_url = "{fake.base_url.removesuffix("/v1")}"\n'
                                       'max_retries = 0\n')
        code = (
            "import argparse, asyncio, json, sys\n"
            "from ketch.frontends.assemble import build_session\n"
            "async def main():\n"
            f"    args = argparse.Namespace(cwd={str(tmp_path)!r}, model='g:gemini-2.5-flash', yolo=True, continue_=False)\n"
            "    session = await build_session(args, interactive=False)\n"
            "    try:\n"
            "        async for _ in session.run_turn('hi'):\n"
            "            pass\n"
            "    finally:\n"
            "        await session.aclose()\n"
            "asyncio.run(main())\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({SDK_MODULES!r}))))\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                             env=ketch_env({"GEMINI_API_KEY": "k"}))
        assert out.returncode == 0, out.stderr
        assert len(fake.model_requests) == 1  # the turn reached the server
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_unknown_parts_and_bad_types_are_errors() -> None:
    from ketch.wire.gemini_stream import GeminiStream

    async def run(chunks: list[dict[str, Any]]) -> None:
        async def gen() -> Any:
            for c in chunks:
                yield c

        s = GeminiStream(model_request_parameters=ModelRequestParameters(), _chunks=gen(), _model_name="m")
        async for _ in s:
            pass

    import asyncio

    with pytest.raises(UnexpectedModelBehavior):
        asyncio.run(run([chunk({"text": 5}, finish="STOP")]))
    with pytest.raises(UnexpectedModelBehavior):
        asyncio.run(run([chunk({"somethingNew": {}}, finish="STOP")]))


# ---------------------------------------------------------------- the same bytes as the SDK's model
def _rich_history() -> list[Any]:
    """A history with every part kind ketch replays: signed thinking, text with a signature, a
    first call without one, parallel calls, an error result, an image, a hosted search under
    Gemini's own id and one rebuilt from grounding metadata, a foreign provider's response."""
    from pydantic_ai.messages import BinaryContent, NativeToolCallPart, NativeToolReturnPart, SystemPromptPart

    png = bytes(range(256)) * 2  # URL-safe and standard base64 differ on these bytes
    sig = {"thought_signature": "c2lnLTE+/w=="}
    return [
        ModelRequest(parts=[SystemPromptPart("be brief"), UserPromptPart(["look", BinaryContent(png, media_type="image/png")])]),
        ModelResponse(parts=[ThinkingPart("plan", provider_name="google", provider_details=sig),
                             ToolCallPart("read", {"p": "a"}, tool_call_id="c1"), ToolCallPart("read", {"p": "b"}, tool_call_id="c2")],
                      provider_name="google"),
        ModelRequest(parts=[ToolReturnPart("read", "A", tool_call_id="c1"),
                            ToolReturnPart("read", "no such file", tool_call_id="c2", outcome="failed"),
                            UserPromptPart("and then")]),
        ModelResponse(parts=[NativeToolCallPart("web_search", {"queries": ["q"]}, tool_call_id="srv_1", provider_name="google"),
                             NativeToolReturnPart("web_search", {"sources": [{"uri": "u"}]}, tool_call_id="srv_1",
                                                  provider_name="google"),
                             NativeToolCallPart("web_search", {"queries": ["q"]}, tool_call_id="pyd_ai_x", provider_name="google"),
                             TextPart("found [1]", provider_name="google", provider_details={"thought_signature": "c2ln"})],
                      provider_name="google"),
        ModelRequest(parts=[UserPromptPart("more")]),
        ModelResponse(parts=[TextPart("from elsewhere"), ToolCallPart("read", {"p": "c"}, tool_call_id="c3")],
                      provider_name="anthropic"),
        ModelRequest(parts=[ToolReturnPart("read", {"$ref": "x"}, tool_call_id="c3")]),
    ]


_MODELS = ["gemini-2.5-flash", "gemini-2.5-pro", "gemini-3-pro-preview", "gemini-3-flash-preview"]


# Gemini 2 takes no hosted search beside function tools (neither model sends it): no such case
@pytest.mark.parametrize(("name", "search"), [(n, s) for n in _MODELS for s in (False, True) if not (s and n.startswith("gemini-2"))])
@pytest.mark.parametrize("thinking", [None, False, "low", "high"])
async def test_the_request_bytes_are_the_sdk_models(name: str, thinking: Any, search: bool) -> None:
    """While google-genai is installed (the fake's own tests read with it), pydantic-ai's
    GoogleModel and this model must send the same bytes for the same history and settings."""
    from fakeprovider import FakeProvider, Turn
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.native_tools import WebSearchTool
    from pydantic_ai.providers.google import GoogleProvider
    from pydantic_ai.tools import ToolDefinition

    tool = ToolDefinition(name="read", description="Read a file.", parameters_json_schema={
        "type": "object", "properties": {"p": {"type": "string", "default": None}}, "required": ["p"],
        "additionalProperties": False})
    params = ModelRequestParameters(function_tools=[tool], native_tools=[WebSearchTool()] if search else [],
                                    thinking=thinking)
    settings = {"max_tokens": 1000, "temperature": 0.5}
    with FakeProvider([Turn(text="ok"), Turn(text="ok")]) as fake:
        base = fake.base_url.removesuffix("/v1")
        sdk = GoogleModel(name, provider=GoogleProvider(api_key="k", base_url=base))
        ours = GeminiModel(name, base_url=base, api_key="k", max_retries=0)
        for m in (sdk, ours):
            async with model_request_stream(m, _rich_history(), model_settings=settings,
                                            model_request_parameters=params) as response:
                async for _ in response:
                    pass
        sent_sdk, sent_ours = (r.raw for r in fake.model_requests)
    assert sent_ours == sent_sdk

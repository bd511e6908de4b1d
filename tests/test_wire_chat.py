"""ketch's own Chat Completions model (``wire.chat``): no SDK on the wire, and what crosses it.

- A headless turn on the chat wire (every dialect: OpenAI, local, DeepSeek, Z.AI, OpenRouter, Groq)
  in a fresh interpreter imports no provider SDK and no ``pydantic_ai.models.openai`` /
  ``pydantic_ai.providers`` module.
- The per-preset profiles equal those of pydantic-ai's providers (which this test may import).
- The streamed answer's parts, usage (cached tokens) and finish reason; the whole-answer path;
  a stream cut before ``[DONE]`` is an error; an HTTP error keeps its status and body.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from fakeprovider import FakeProvider, ToolCall, Turn
from kettle import ketch_env, write_project_config

SRC = str(Path(__file__).resolve().parents[1] / "src")
FORBIDDEN = ("openai", "anthropic", "google.genai", "groq", "mistralai", "pydantic_ai.models.openai",
             "pydantic_ai.models.anthropic", "pydantic_ai.models.google", "pydantic_ai.models.groq",
             "pydantic_ai.providers.")

_SERVER = r"""
import json, os, sys, threading, traceback
import ketch.frontends.cli, ketch.frontends.interactive, ketch.frontends.headless, ketch.core.session, pydantic_ai  # noqa: F401
forbidden = tuple(json.loads(sys.argv[1]))
held = sorted(m for m in sys.modules if m in forbidden or m.startswith(tuple(p + "." for p in forbidden)) or m.startswith("pydantic_ai.providers."))
if held or threading.active_count() != 1:
    raise SystemExit(f"no fork: the preload holds {held} and {threading.active_count()} threads")
print("ready", flush=True)
for line in sys.stdin:
    order = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setsid()
            os.chdir(order["cwd"])
            os.environ.clear()
            os.environ.update(order["env"])
            for fd, (name, flags) in enumerate(((os.devnull, os.O_RDONLY), (order["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), (order["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC))):
                opened = os.open(name, flags, 0o600)
                os.dup2(opened, fd)
                os.close(opened)
            sys.stdin, sys.stdout, sys.stderr = open(0, closefd=False), open(1, "w", closefd=False), open(2, "w", closefd=False)
            exec(compile(order["code"], "<test>", "exec"), {"__name__": "__main__"})
            code = 0
        except SystemExit as end:
            code = end.code if isinstance(end.code, int) else int(end.code is not None)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    print(pid, flush=True)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class PreloadedPython:
    """A fresh interpreter that has imported ketch's front ends and pydantic-ai (and verified
    that this holds none of ``FORBIDDEN`` and no thread), then forks one child per ``run``
    that executes the test's code (stdin /dev/null, stdout and stderr to files, its own cwd
    and environment). A child's ``sys.modules`` after a turn is what a fresh interpreter's
    would be plus the preloaded modules, none of them forbidden: a turn that imported an SDK
    shows it the same way. The ~1.3 CPU-s of importing pydantic-ai is paid once per worker,
    not once per case (15 cases)."""

    def __init__(self, home: Path) -> None:
        env = ketch_env({"PYTHONPATH": SRC, "HOME": str(home), "KETCH_CONFIG_DIR": str(home / "config"), "KETCH_DATA_DIR": str(home / "data")})
        self._proc = subprocess.Popen([sys.executable, "-c", _SERVER, json.dumps(FORBIDDEN)], cwd=home, env=env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._n = 0
        ready = self._line(180)
        assert ready == "ready", (ready, self._proc.stderr.read() if self._proc.poll() is not None else "")

    def _line(self, timeout: float) -> str:
        assert self._proc.stdout is not None
        if not select.select([self._proc.stdout], [], [], timeout)[0]:
            raise AssertionError(f"the preloaded interpreter said nothing for {timeout} s")
        return self._proc.stdout.readline().strip()

    def run(self, code: str, cwd: Path, env: dict[str, str], out_dir: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run ``code`` in a forked child; its exit status, stdout and stderr."""
        assert self._proc.stdin is not None
        self._n += 1
        out, err = out_dir / f"child-{self._n}.out", out_dir / f"child-{self._n}.err"
        self._proc.stdin.write(json.dumps({"code": code, "cwd": str(cwd), "env": env, "out": str(out), "err": str(err)}) + "\n")
        self._proc.stdin.flush()
        pid = int(self._line(30))
        try:
            status = int(self._line(timeout))
        except AssertionError:
            os.killpg(pid, signal.SIGKILL)
            raise
        return subprocess.CompletedProcess([], status, out.read_text(), err.read_text())

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=30)
        self._proc.stdout.close()  # type: ignore[union-attr]
        self._proc.stderr.close()  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def preloaded_python(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    home = tmp_path_factory.mktemp("preloaded-home")
    server = PreloadedPython(home)
    yield server
    server.close()


@pytest.mark.parametrize("preset", ["openai", "ollama", "deepseek", "openai-compatible", "zai", "openrouter", "groq"])
def test_a_turn_on_the_chat_wire_imports_no_sdk(preset: str, tmp_path: Path, preloaded_python: PreloadedPython) -> None:
    root = tmp_path / "work"
    root.mkdir()
    with FakeProvider([Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"}, id="c1")]), Turn(text="done")]) as fake:
        (root / "a.txt").write_text("hello\n")
        model = "fake/fake-model" if preset == "openrouter" else "fake-model"  # OpenRouter names vendor/model
        write_project_config(root, f'model = "c:{model}"\n[connections.c]\npreset = "{preset}"\n'
                                   f'base_url = "{fake.base_url}"\nmax_retries = 0\n')
        code = textwrap.dedent(f"""
            import sys
            from ketch.frontends.cli import main
            code = main(["-p", "read a.txt", "--yolo"])
            bad = sorted(m for m in sys.modules if m in {FORBIDDEN!r} or m.startswith(tuple(p + "." for p in {FORBIDDEN!r}))
                         or m.startswith("pydantic_ai.providers."))
            print("RESULT", code, ",".join(bad) or "-")
        """)
        env = ketch_env({"OPENAI_API_KEY": "sk-test", "DEEPSEEK_API_KEY": "sk-test", "ZAI_API_KEY": "zk", "OPENROUTER_API_KEY": "ok",
                         "GROQ_API_KEY": "gk", "PYTHONPATH": SRC})
        proc = preloaded_python.run(code, cwd=root, env=env, out_dir=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")][-1].split()
        assert len(fake.model_requests) == 2, proc.stderr[-3000:]
    assert result[1] == "0", proc.stdout[-2000:]
    assert result[2] == "-", f"SDK modules imported on the chat wire: {result[2][:300]}"
    first = fake.model_requests[0].body
    cap = "max_completion_tokens" if preset in ("openai", "zai") else "max_tokens"  # OpenRouter, Groq: max_tokens
    assert cap in first, sorted(first)
    assistant = fake.model_requests[1].body["messages"][-2]
    assert assistant["role"] == "assistant"
    # local dialect: a string; Groq: no content key on an assistant message without text
    assert assistant.get("content", "absent") == {"ollama": "", "openai-compatible": "", "groq": "absent"}.get(preset)


@pytest.mark.parametrize("preset, provider_module, provider_class", [
    ("openai", "pydantic_ai.providers.openai", "OpenAIProvider"),
    ("deepseek", "pydantic_ai.providers.deepseek", "DeepSeekProvider"),
    ("ollama", "pydantic_ai.providers.ollama", "OllamaProvider"),
    ("lmstudio", "pydantic_ai.providers.openai_compatible", "OpenAICompatibleProvider"),
])
@pytest.mark.parametrize("model", ["gpt-5", "gpt-4o", "deepseek-reasoner", "deepseek-v4-pro", "qwen3:8b", "llama3.1",
                                   "gpt-oss:20b", "mistralai/devstral", "glm-4.6", "fake-model", "o3"])
def test_profiles_equal_the_sdk_providers(preset: str, provider_module: str, provider_class: str, model: str) -> None:
    import importlib

    from ketch.wire.chat_profile import chat_profile

    provider = getattr(importlib.import_module(provider_module), provider_class)
    assert chat_profile(preset, model, official_openai=preset == "openai") == provider.model_profile(model)


@pytest.mark.parametrize("model", ["glm-4.7", "glm-5.3", "glm-4.5-air", "fake-model"])
def test_the_zai_profile_equals_the_sdk_provider(model: str) -> None:
    from pydantic_ai.providers.zai import ZaiProvider

    from ketch.providers.zai import zai_profile

    assert zai_profile(model) == ZaiProvider.model_profile(model)


# ---------------------------------------------------------------- the model against a scripted server
def _model(handler, **kw):
    from ketch.wire.chat import ChatCompletionsModel
    from ketch.wire.chat_profile import chat_profile

    model = ChatCompletionsModel("m", base_url="http://chat.test/v1", api_key="k", provider_name="openai",
                                 provider_profile=chat_profile("openai", "m", official_openai=True), max_retries=0, **kw)
    model._http()._transport = httpx.MockTransport(handler)
    return model


def _sse(*chunks: object, done: bool = True) -> bytes:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


def _run(model, stream: bool = True):
    from pydantic_ai.messages import ModelRequest
    from pydantic_ai.models import ModelRequestParameters

    async def go():
        messages = [ModelRequest.user_text_prompt("hi")]
        params = ModelRequestParameters()
        if not stream:
            return await model.request(messages, None, params)
        async with model.request_stream(messages, None, params) as response:
            async for _ in response:
                pass
        return response.get()

    return asyncio.run(go())


def test_stream_maps_reasoning_text_tool_calls_usage_and_finish() -> None:
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_sse(
            {"id": "r1", "model": "m-1", "created": 1, "choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "thin"}}]},
            {"id": "r1", "choices": [{"index": 0, "delta": {"reasoning_content": "king"}}]},
            {"id": "r1", "choices": [{"index": 0, "delta": {"content": "Hé"}}]},
            {"id": "r1", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\""}}]}}]},
            {"id": "r1", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}}]},
            {"id": "r1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {"id": "r1", "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107,
                                                   "prompt_tokens_details": {"cached_tokens": 60}}},
        ))

    response = _run(_model(handler))
    body = json.loads(seen[0].content)
    assert list(body) == ["model", "stream", "messages", "stream_options"]
    assert seen[0].headers["authorization"] == "Bearer k"
    kinds = [(type(p).__name__, getattr(p, "content", None) or getattr(p, "args", None)) for p in response.parts]
    assert kinds == [("ThinkingPart", "thinking"), ("TextPart", "Hé"), ("ToolCallPart", '{"a":1}')]
    assert response.parts[0].id == "reasoning_content"
    assert response.finish_reason == "tool_call" and response.model_name == "m-1" and response.provider_response_id == "r1"
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.cache_read_tokens) == (100, 7, 60)


def test_a_stream_cut_before_done_is_an_error_not_an_answer() -> None:
    from pydantic_ai.exceptions import ModelConnectionError

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_sse({"choices": [{"index": 0, "delta": {"content": "half"}}]}, done=False))

    with pytest.raises(ModelConnectionError):
        _run(_model(handler))


def test_an_error_status_keeps_its_body_and_the_whole_answer_path_reads_json() -> None:
    from pydantic_ai.exceptions import ModelHTTPError

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": "bad model", "type": "invalid_request_error"}})

    with pytest.raises(ModelHTTPError) as caught:
        _run(_model(refuse))
    assert caught.value.status_code == 400 and caught.value.body["error"]["message"] == "bad model"

    seen = []

    def whole(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json={"id": "r2", "model": "m", "created": 2, "choices": [{"index": 0, "finish_reason": "length",
                              "message": {"role": "assistant", "content": "<think>x</think>cut", "tool_calls": None}}],
                              "usage": {"prompt_tokens": 3, "completion_tokens": 4}})

    response = _run(_model(whole), stream=False)
    assert seen[0]["stream"] is False and "stream_options" not in seen[0]
    assert [type(p).__name__ for p in response.parts] == ["ThinkingPart", "TextPart"]
    assert response.parts[1].content == "cut" and response.finish_reason == "length"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (3, 4)


def test_string_content_dialect_and_no_nan() -> None:
    from pydantic_ai.exceptions import UnexpectedModelBehavior
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    from ketch.wire.chat import encode

    model = _model(lambda r: httpx.Response(500), string_content=True)
    _, assistant = model._encoder.response(ModelResponse(parts=[ToolCallPart("f", {"a": 1}, tool_call_id="c")]))
    assert assistant == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}]}
    with pytest.raises(UnexpectedModelBehavior):
        encode({"x": float("nan")})


# ---------------------------------------------------------------- the same bytes as pydantic-ai's SDK model
def _history():
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
    return [
        ModelRequest(parts=[SystemPromptPart("You are ketch. ü"), UserPromptPart("read the file")]),
        ModelResponse(parts=[ThinkingPart("plan", id="reasoning_content", provider_name="P"),
                             ToolCallPart("read_file", {"path": "a"}, tool_call_id="c1")], provider_name="P"),
        ModelRequest(parts=[ToolReturnPart("read_file", "contents\n", tool_call_id="c1")]),
        ModelResponse(parts=[TextPart("It says contents."), ToolCallPart("shell", '{"command":"ls"}', tool_call_id="c2")],
                      provider_name="P"),
        ModelRequest(parts=[ToolReturnPart("shell", {"out": "a b"}, tool_call_id="c2"),
                            UserPromptPart(["look", BinaryContent(png, media_type="image/png")])]),
    ]


def _params(thinking=None, cache=None):
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    tools = [ToolDefinition(name="read_file", description="Read a file.", parameters_json_schema={
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False}),
        ToolDefinition(name="shell", description=None, parameters_json_schema={
            "type": "object", "properties": {"command": {"type": "string"}, "n": {"type": "integer", "default": 1}},
            "required": ["command"]}, strict=True)]
    return ModelRequestParameters(function_tools=tools, thinking=thinking, cache=cache)


def _capture(build, stream: bool, settings: dict):
    """The body ``build(transport)``'s model sends for the history, as bytes."""
    sent: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        if stream:
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_sse(
                {"id": "r", "model": "m", "created": 1, "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}))
        return httpx.Response(200, json={"id": "r", "model": "m", "created": 1, "object": "chat.completion",
                                         "choices": [{"index": 0, "finish_reason": "stop",
                                                      "message": {"role": "assistant", "content": "ok"}}]})

    model = build(httpx.MockTransport(handler))

    async def go(thinking, cache):
        if stream:
            async with model.request_stream(_history(), settings, _params(thinking, cache)) as response:
                async for _ in response:
                    pass
        else:
            await model.request(_history(), settings, _params(thinking, cache))

    return model, go, sent


CASES = [
    ("openai", "gpt-4o", {"max_tokens": 100, "openai_prompt_cache_key": "ketch-s"}, None, None),
    ("openai", "gpt-5", {"max_tokens": 100}, "high", None),
    ("openai", "o3", {"max_tokens": 100, "temperature": 0.2}, "low", None),
    ("openai", "gpt-5.6", {"max_tokens": 100, "openai_prompt_cache_key": "ketch-s"}, "medium", True),
    ("openai", "fake-model", {"max_tokens": 100, "openai_reasoning_effort": "high"}, None, None),
    ("deepseek", "deepseek-reasoner", {"max_tokens": 100}, "high", None),
    ("deepseek", "deepseek-chat", {"max_tokens": 100}, None, None),
    ("ollama", "qwen3:8b", {"max_tokens": 100}, "high", None),
    ("lmstudio", "gpt-oss-20b", {"max_tokens": 100, "parallel_tool_calls": True}, None, None),
]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("preset, model_name, settings, thinking, cache", CASES)
def test_the_body_equals_the_sdk_models(preset, model_name, settings, thinking, cache, stream) -> None:
    """The own model sends byte for byte what pydantic-ai's OpenAIChatModel sent through the SDK,
    for the same history, settings and parameters (the SDK is imported here, in the test only)."""
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.deepseek import DeepSeekProvider
    from pydantic_ai.providers.ollama import OllamaProvider
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

    from ketch.providers.local_chat import LOCAL_DIALECT_PRESETS, PROFILE
    from ketch.wire.chat import ChatCompletionsModel
    from ketch.wire.chat_profile import chat_profile

    local = preset in LOCAL_DIALECT_PRESETS

    def sdk(transport):
        client = AsyncOpenAI(base_url="http://x.test/v1", api_key="k", max_retries=0,
                             http_client=httpx.AsyncClient(transport=transport))
        provider = {"openai": lambda: OpenAIProvider(openai_client=client),
                    "deepseek": lambda: DeepSeekProvider(openai_client=client),
                    "ollama": lambda: OllamaProvider(openai_client=client)}.get(
            preset, lambda: OpenAICompatibleProvider(preset, openai_client=client))()

        class Local(OpenAIChatModel):
            async def _map_messages(self, *args, **kwargs):  # the SDK-based dialect this replaced
                messages = await super()._map_messages(*args, **kwargs)
                for message in messages:
                    if message.get("role") == "assistant" and message.get("content", "") is None:
                        message["content"] = ""
                return messages

        return (Local if local else OpenAIChatModel)(model_name, provider=provider, profile=PROFILE if local else None)

    def own(transport):
        model = ChatCompletionsModel(model_name, base_url="http://x.test/v1", api_key="k", provider_name=preset,
                                     provider_profile=chat_profile(preset, model_name, official_openai=preset == "openai"),
                                     profile=PROFILE if local else None, max_retries=0, string_content=local)
        model._http()._transport = transport
        return model

    from ketch.wire.chat_body import HISTORY_BREAKPOINTS

    bodies = []
    # the history's breakpoints (GPT-5.6 on) are ketch's own: off for the comparison, then checked alone
    for build, extra in ((sdk, {}), (own, {HISTORY_BREAKPOINTS: False}), (own, {})):
        _, go, sent = _capture(build, stream, {**settings, **extra})
        asyncio.run(go(thinking, cache))
        bodies.append(sent[0])
    assert bodies[1] == bodies[0]
    sdk_body, marked = json.loads(bodies[0]), json.loads(bodies[2])
    marks = 0
    for theirs, ours in zip(sdk_body["messages"], marked["messages"], strict=True):
        if ours != theirs:
            assert ours["role"] in ("user", "tool") and ours["content"][-1].pop("prompt_cache_breakpoint") == {"mode": "explicit"}
            if isinstance(theirs["content"], str):
                assert ours["content"] == [{"type": "text", "text": theirs["content"]}]
            else:
                assert ours["content"] == theirs["content"]
            marks += 1
    assert {k: v for k, v in marked.items() if k != "messages"} == {k: v for k, v in sdk_body.items() if k != "messages"}
    from pydantic_ai.messages import ModelRequest

    # one on each request message (its last user or tool message), on the models that take them
    assert marks == (sum(isinstance(m, ModelRequest) for m in _history()) if model_name == "gpt-5.6" else 0)


def test_a_finished_stream_without_done_is_an_answer() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_sse({"choices": [{"index": 0, "delta": {"content": "all"}, "finish_reason": "stop"}]},
                                                done=False))

    response = _run(_model(handler))
    assert response.parts[0].content == "all" and response.finish_reason == "stop"


@pytest.mark.parametrize("preset, wire, model", [
    ("openai", "openai-responses", "gpt-5"), ("openai", "openai-chat", "gpt-5"), ("openrouter", "openai-chat", "openai/gpt-5"),
    ("groq", "openai-chat", "openai/gpt-oss-120b"), ("anthropic", "anthropic-messages", "claude-sonnet-4-5"),
    ("gemini", "gemini", "gemini-2.5-pro"), ("mistral", "openai-chat", "mistral-medium-latest"), ("zai", "openai-chat", "glm-4.6"),
])
def test_the_interactive_preload_imports_no_sdk(preset: str, wire: str, model: str, tmp_path: Path, preloaded_python: PreloadedPython) -> None:
    """The interactive UI imports the session's wire module in a thread before the session starts:
    that module is ketch's own on every wire (it was ``pydantic_ai.models.openai`` for Responses)."""
    write_project_config(tmp_path, f'model = "c:{model}"\n[connections.c]\npreset = "{preset}"\nwire = "{wire}"\n'
                                   'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "SOME_KEY"\n')
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from ketch.frontends.cli import _main_parser
        from ketch.frontends.interactive import _preload
        _preload(_main_parser().parse_args([]), Path.cwd())
        bad = sorted(m for m in sys.modules if m in {FORBIDDEN!r} or m.startswith(tuple(p + "." for p in {FORBIDDEN!r})))
        print("RESULT", ",".join(bad) or "-")
    """)
    env = ketch_env({"SOME_KEY": "k", "PYTHONPATH": SRC})
    proc = preloaded_python.run(code, cwd=tmp_path, env=env, out_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")][-1].split()
    assert result[1] == "-", f"SDK modules imported by the preload on {wire}: {result[1][:300]}"

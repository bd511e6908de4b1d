"""Benchmark: CPU of the thread to build one Gemini request at a history of N steps (N tool calls of a
1 kB read): ketch's GeminiModel.body with its per-message memo warm (two new messages a step) against
pydantic-ai's GoogleModel mapping plus google-genai's conversion and json.dumps (while the SDK is
installed). Run: ``.venv/bin/python bench/gemini_request_build.py``."""
import asyncio, json, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart, UserPromptPart, TextPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

def history(steps):
    h = [ModelRequest(parts=[UserPromptPart("Read the files one by one.")])]
    for n in range(steps):
        h.append(ModelResponse(parts=[TextPart(f"Reading file {n}."), ToolCallPart("read_file", {"path": f"f{n%50:02}.txt"}, tool_call_id=f"c{n}")], provider_name="google"))
        h.append(ModelRequest(parts=[ToolReturnPart("read_file", "".join(f"line {i} of file {n}: {'x'*40}\n" for i in range(20)), tool_call_id=f"c{n}")]))
    return h

tools = [ToolDefinition(name=f"t{i}", description="d", parameters_json_schema={"type": "object", "properties": {"p": {"type": "string"}}}) for i in range(20)]
params = ModelRequestParameters(function_tools=tools, thinking="high")

def ours(h, reps=20):
    from ketch.wire.gemini import GeminiModel
    m = GeminiModel("gemini-2.5-flash", base_url="http://127.0.0.1:9", api_key="k")
    s, p = m.prepare_request({"max_tokens": 20000}, params)
    m.body(h[:-2], dict(s), p)  # the previous step: everything but the newest two messages encoded
    t = time.thread_time()
    for _ in range(reps):
        m.body(h, dict(s), p)
    return (time.thread_time() - t) / reps

def sdk(h, reps=5):
    from google.genai import models as gm, types
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider
    m = GoogleModel("gemini-2.5-flash", provider=GoogleProvider(api_key="k"))
    s, p = m.prepare_request({"max_tokens": 20000}, params)
    async def one():
        contents, config = await m._build_content_and_config(h, s, p)
        config = {k: v for k, v in config.items() if k != "http_options"}
        req = types._GenerateContentParameters(model="gemini-2.5-flash", contents=contents, config=config)
        body = gm._GenerateContentParameters_to_mldev(m.client._api_client, req)
        from google.genai import _common
        body = _common.encode_unserializable_types(_common.convert_to_dict(body))
        return json.dumps(body)
    asyncio.run(one())
    t = time.thread_time()
    for _ in range(reps):
        asyncio.run(one())
    return (time.thread_time() - t) / reps

for steps in (10, 100, 500, 1000):
    h = history(steps)
    print(f"step {steps:>5} ({len(h)} messages): ketch GeminiModel.body {ours(h)*1000:7.2f} ms   GoogleModel+google-genai {sdk(h)*1000:7.2f} ms", flush=True)

"""``PassthroughOpenAI`` builds Responses status events without parsing the tools they echo.

Every status event of a Responses stream repeats the request's tool schemas in its ``response``.
The passthrough client builds those events with ``tools`` empty and everything else as the SDK
builds it; pydantic-ai must make the same ``ModelResponse`` of the stream either way: parts,
usage, finish reason, ids, provider details. Hostile or unusual event shapes go to the SDK as
they came.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fakeprovider import FakeProvider, ToolCall, Turn

from ketch.providers.passthrough import PassthroughOpenAI, without_echoed_tools

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": f"tool_{n}", "description": "Does a thing.", "strict": False,
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
                    "required": ["path"]}}
    for n in range(6)
]


def _events(cls: type, turn: Turn) -> list[Any]:
    with FakeProvider([turn]) as fake:
        async def stream() -> list[Any]:
            client = cls(base_url=fake.base_url, api_key="k", max_retries=0)
            try:
                events = await client.responses.create(model="gpt-5", input="hi", tools=TOOLS, stream=True)
                return [event async for event in events]
            finally:
                await client.close()

        return asyncio.run(stream())


def test_status_events_carry_no_tools_and_everything_else_the_sdk_builds() -> None:
    from openai import AsyncOpenAI

    turn = Turn(text="reading", tool_calls=[ToolCall("tool_1", {"path": "a"})], usage=(120, 7))
    plain, passed = _events(AsyncOpenAI, turn), _events(PassthroughOpenAI, turn)
    assert [e.type for e in plain] == [e.type for e in passed]
    status = [i for i, e in enumerate(plain) if e.type.startswith("response.") and hasattr(e, "response")]
    assert {plain[i].type for i in status} == {"response.created", "response.in_progress", "response.completed"}
    for i, (a, b) in enumerate(zip(plain, passed, strict=True)):
        if i in status:
            assert len(a.response.tools) == len(TOOLS) and b.response.tools == []
            assert a.response.model_dump(exclude={"tools", "id"}) == b.response.model_dump(exclude={"tools", "id"})
        else:
            assert a.model_dump(exclude={"item_id", "item"}) == b.model_dump(exclude={"item_id", "item"})


def test_pydantic_ai_makes_the_same_response_of_the_stream() -> None:
    from openai import AsyncOpenAI
    from pydantic_ai.messages import ModelRequest, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.tools import ToolDefinition

    params = ModelRequestParameters(function_tools=[
        ToolDefinition(name=t["name"], description=t["description"], parameters_json_schema=t["parameters"]) for t in TOOLS
    ])

    def run(cls: type, turn: Turn) -> Any:
        with FakeProvider([turn]) as fake:
            async def go() -> Any:
                client = cls(base_url=fake.base_url, api_key="k", max_retries=0)
                model = OpenAIResponsesModel("gpt-5", provider=OpenAIProvider(openai_client=client))
                try:
                    async with model.request_stream([ModelRequest(parts=[UserPromptPart("hi")])], None, params) as stream:
                        async for _ in stream:
                            pass
                        return stream.get()
                finally:
                    await client.close()

            return asyncio.run(go())

    for turn in (Turn(text="reading", tool_calls=[ToolCall("tool_2", {"path": "b", "n": 3})], usage=(300, 9)),
                 Turn(text="cut off", finish="length")):
        plain, passed = run(AsyncOpenAI, turn), run(PassthroughOpenAI, turn)
        assert passed.usage == plain.usage and passed.finish_reason == plain.finish_reason
        assert passed.model_name == plain.model_name
        assert [type(p) for p in passed.parts] == [type(p) for p in plain.parts]
        assert [getattr(p, "content", None) for p in passed.parts] == [getattr(p, "content", None) for p in plain.parts]
        assert [getattr(p, "args", None) for p in passed.parts] == [getattr(p, "args", None) for p in plain.parts]
        details = {k: v for k, v in (plain.provider_details or {}).items()}
        assert set(passed.provider_details or {}) == set(details)
        assert passed.provider_details["finish_reason"] == details["finish_reason"]
        assert passed.provider_response_id and plain.provider_response_id


def test_other_shapes_are_handed_on_as_they_came() -> None:
    echo = {"type": "response.completed", "sequence_number": 9,
            "response": {"id": "r", "status": "completed", "tools": [{"type": "function", "name": "x"}], "output": []}}
    stripped = without_echoed_tools(echo)
    assert stripped["response"]["tools"] == [] and stripped["response"]["output"] == []
    assert echo["response"]["tools"] == [{"type": "function", "name": "x"}]  # the caller's dict is left alone
    delta = {"type": "response.output_text.delta", "delta": "x", "tools": [1]}
    odd = [
        delta,
        {"type": "response.created", "response": {"tools": []}},
        {"type": "response.created", "response": {"tools": "not a list"}},
        {"type": "response.created", "response": ["not", "a", "dict"]},
        {"type": "response.created"},
        {"type": ["unhashable"], "response": {"tools": [1]}},
        {"type": "error", "response": {"tools": [1]}},
        "a string",
        None,
        [1, 2],
    ]
    for data in odd:
        try:
            assert without_echoed_tools(data) is data
        except TypeError:
            raise AssertionError(f"raised on {data!r}") from None


def test_fast_paths_off_makes_the_passthrough_client_the_sdks_own(monkeypatch: Any) -> None:
    """``KETCH_SDK_FASTPATHS=0`` turns off the input hand-off and the echo skip too: the events
    keep the echoed tools, and the bytes on the wire are the plain SDK's, key order included."""
    from openai import AsyncOpenAI

    def wire(cls: type) -> tuple[list[Any], bytes]:
        turn = Turn(text="reading", tool_calls=[ToolCall("tool_1", {"path": "a"})], usage=(120, 7))
        with FakeProvider([turn]) as fake:
            async def stream() -> list[Any]:
                client = cls(base_url=fake.base_url, api_key="k", max_retries=0)
                try:
                    events = await client.responses.create(model="gpt-5", input=[{"role": "user", "content": "hi"}],
                                                           tools=TOOLS, max_output_tokens=64, stream=True)
                    return [event async for event in events]
                finally:
                    await client.close()

            events = asyncio.run(stream())
            [request] = fake.model_requests
        return events, request.raw

    monkeypatch.setenv("KETCH_SDK_FASTPATHS", "0")
    plain_events, plain_bytes = wire(AsyncOpenAI)
    off_events, off_bytes = wire(PassthroughOpenAI)
    assert off_bytes == plain_bytes
    completed = [e for e in off_events if e.type == "response.completed"]
    assert completed and len(completed[0].response.tools) == len(TOOLS)
    monkeypatch.setenv("KETCH_SDK_FASTPATHS", "1")
    on_events, on_bytes = wire(PassthroughOpenAI)
    assert on_bytes != plain_bytes  # the switch is what made the difference: input moves to the end
    assert [e for e in on_events if e.type == "response.completed"][0].response.tools == []

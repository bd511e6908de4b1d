"""``providers/anthropic_memo.py`` maps a history exactly as the SDK's ``AnthropicModel`` does.

The memo hands out blocks it kept from earlier requests and maps a request of plain tool results
without the SDK's per-request context. Here both models map the same growing history step by step
(so later steps are served from the memo) and every step's system prompt and messages must be
equal, for requests the fast path takes (one or several plain results, a failed one) and ones it
must leave to the SDK (a result beside a user prompt, a ``search_tools`` result, a result of
non-text content, a retry). A block handed out is a copy: changing a request after it was built
(as the SDK's cache-point pass does) never reaches a later one.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

from ketch.providers import anthropic_memo


def _models() -> tuple[Any, Any]:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9")
    return anthropic_memo.MemoizedAnthropicModel("claude-sonnet-4-5", provider=provider), AnthropicModel(
        "claude-sonnet-4-5", provider=provider
    )


def _parameters() -> ModelRequestParameters:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    return ModelRequestParameters(
        function_tools=[ToolDefinition(name=name, parameters_json_schema=schema) for name in ("read_file", "search_tools")]
    )


def _exchange(n: int, results: list[Any]) -> list[ModelMessage]:
    calls = [ToolCallPart(r.tool_name, {"path": f"f{n}"}, tool_call_id=r.tool_call_id) for r in results
             if isinstance(r, ToolReturnPart)]
    return [ModelResponse(parts=[TextPart(f"step {n}"), *calls]), ModelRequest(parts=results)]


def _steps() -> list[list[ModelMessage]]:
    def result(call_id: str, content: Any = None, **kw: Any) -> ToolReturnPart:
        return ToolReturnPart("read_file", content if content is not None else f"text of {call_id}\n" * 3,
                              tool_call_id=call_id, **kw)

    return [
        [ModelRequest(parts=[SystemPromptPart("You are ketch."), UserPromptPart("read the files")])],
        _exchange(1, [result("a")]),
        _exchange(2, [result("b"), result("c", outcome="failed")]),
        _exchange(3, [result("d"), UserPromptPart("and then stop")]),
        _exchange(4, [ToolReturnPart("search_tools", "no matches", tool_call_id="e")]),
        _exchange(5, [result("f", {"rows": [1, 2]})]),
        _exchange(6, [result("g", "")]),
        _exchange(7, [result("h", outcome="retried")]),
        [ModelResponse(parts=[TextPart("done")]), ModelRequest(parts=[UserPromptPart("thanks")])],
    ]


@pytest.mark.parametrize("content_of_step_one", ["short", "x" * 5000])
async def test_every_step_maps_as_the_sdk_maps_it(content_of_step_one: str) -> None:
    memo, sdk = _models()
    parameters = _parameters()
    history: list[ModelMessage] = []
    for number, step in enumerate(_steps()):
        history = [*history, *step]
        if number == 1:  # a changed message is a new object: pruning replaces it, never edits it
            history[-1] = ModelRequest(parts=[ToolReturnPart("read_file", content_of_step_one, tool_call_id="a")])
        for _ in range(2):  # the second time everything earlier comes from the memo
            mapped = await memo._map_message(history, parameters, {})
            expected = await sdk._map_message(history, parameters, {})
            assert mapped == expected, f"step {number}"
    assert memo._blocks_now, "the memo kept no block: the fast path never ran"


async def test_a_block_changed_after_it_was_sent_is_not_handed_out_again() -> None:
    memo, sdk = _models()
    parameters = _parameters()
    history = [message for step in _steps()[:3] for message in step]
    await memo._map_message(history, parameters, {})
    _system, first = await memo._map_message(history, parameters, {})  # served from the memo
    pristine = copy.deepcopy(first)
    for message in first:  # what the SDK's cache-point pass and a careless caller might do
        for block in message["content"] if isinstance(message["content"], list) else []:
            block["cache_control"] = {"type": "ephemeral"}
            if isinstance(block.get("content"), list):
                block["content"].append({"type": "text", "text": "injected"})
    _system, again = await memo._map_message(history, parameters, {})
    assert again == pristine == (await sdk._map_message(history, parameters, {}))[1]


async def test_a_part_whose_outcome_changed_is_mapped_again() -> None:
    memo, sdk = _models()
    parameters = _parameters()
    history = [message for step in _steps()[:2] for message in step]
    await memo._map_message(history, parameters, {})
    part = history[-1].parts[0]
    part.outcome = "failed"  # in place, which ketch never does; the memo still notices
    assert await memo._map_message(history, parameters, {}) == await sdk._map_message(history, parameters, {})
    assert (await memo._map_message(history, parameters, {}))[1][-1]["content"][0]["is_error"] is True

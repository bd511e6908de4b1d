"""Token estimates count everything that goes on the wire, opaque payloads included."""

from __future__ import annotations

from pydantic_ai.messages import (
    BinaryContent,
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
from pydantic_ai.tools import ToolDefinition

from ketch.context.budget import (
    BINARY_ITEM_TOKENS,
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_THRESHOLD,
    context_window,
    estimate_messages,
    estimate_request,
    estimate_text,
    estimate_tools,
    token_limit,
)


def test_context_window_knows_common_families_and_prefixes():
    assert context_window("gpt-5") == 400_000
    assert context_window("openai:gpt-5-mini") == 400_000
    assert context_window("gpt-4.1-nano") == 1_047_576
    assert context_window("anthropic:claude-sonnet-4-5") == 200_000
    assert context_window("openrouter:anthropic/claude-opus-4") == 200_000
    assert context_window("deepseek-chat") == 128_000
    assert context_window("ollama:qwen3:32b") == 32_768
    assert context_window("llama3.1:8b") == 32_768
    assert context_window("openai:o3") == 200_000
    assert context_window("some-new-model") == DEFAULT_CONTEXT_WINDOW == 128_000


def test_metadata_override_wins_unless_missing():
    assert context_window("gpt-5", 272_000) == 272_000
    assert context_window("qwen3", None) == 32_768
    assert context_window("qwen3", 0) == 32_768


def test_threshold_defaults_to_eighty_percent():
    assert DEFAULT_THRESHOLD == 0.8
    assert token_limit(200_000) == 160_000


def response_with(**thinking: object) -> list:
    return [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[ThinkingPart("t", **thinking), TextPart("answer")]),
    ]


def test_reasoning_signature_and_provider_details_are_counted():
    plain = estimate_messages(response_with())
    signed = estimate_messages(response_with(signature="S" * 4_000))
    detailed = estimate_messages(response_with(provider_details={"encrypted_content": "E" * 8_000}))
    assert signed - plain == 1_000
    assert 2_000 <= detailed - plain <= 2_010


def test_provider_executed_results_are_counted():
    base = [ModelRequest(parts=[UserPromptPart("search")])]
    call = NativeToolCallPart("web_search", {"query": "q"}, tool_call_id="ws_1")
    small = base + [ModelResponse(parts=[call, NativeToolReturnPart("web_search", {"status": "completed"}, tool_call_id="ws_1")])]
    large = base + [
        ModelResponse(
            parts=[
                call,
                NativeToolReturnPart(
                    "web_search",
                    [{"url": "https://a.example", "encrypted_content": "Z" * 12_000}],
                    tool_call_id="ws_1",
                    provider_details={"raw": "R" * 4_000},
                ),
            ]
        )
    ]
    assert estimate_messages(large) - estimate_messages(small) >= 4_000


def test_tool_calls_and_results_count_their_payloads():
    msgs = [
        ModelResponse(parts=[ToolCallPart("write_file", {"path": "a.py", "content": "x" * 4_000}, tool_call_id="c")]),
        ModelRequest(parts=[ToolReturnPart("write_file", "y" * 8_000, tool_call_id="c")]),
    ]
    assert 3_000 <= estimate_messages(msgs) <= 3_050


def test_images_cost_a_flat_amount_not_their_byte_length():
    image = BinaryContent(data=b"\x89PNG" + b"\0" * 2_000_000, media_type="image/png")
    msgs = [ModelRequest(parts=[UserPromptPart(["look", image])])]
    assert BINARY_ITEM_TOKENS <= estimate_messages(msgs) <= BINARY_ITEM_TOKENS + 20


def test_request_estimate_adds_instructions_and_tool_schemas():
    tool = ToolDefinition(
        name="read_file",
        description="Read a file." * 50,
        parameters_json_schema={"type": "object", "properties": {"path": {"type": "string"}}},
    )
    msgs = [ModelRequest(parts=[UserPromptPart("hello")])]
    instructions = "i" * 400
    total = estimate_request(instructions, msgs, [tool])
    assert total == estimate_text(instructions) + estimate_messages(msgs) + estimate_tools([tool])
    assert estimate_tools([tool]) >= 150
    assert estimate_tools([{"name": "x", "parameters": {"type": "object"}}]) > 0


def test_running_estimate_follows_a_pruning_that_shares_unchanged_messages():
    """A pruned history keeps the messages it did not change: the running estimate must see
    the one placeholdered in between, not only the ends (it once re-pruned every step)."""
    from pydantic_ai.messages import ToolReturnPart

    from ketch.context.budget import RunningEstimate, estimate_messages

    grown = [
        ModelRequest(parts=[UserPromptPart("x" * 100)]),
        ModelResponse(parts=[TextPart("y")]),
        ModelRequest(parts=[ToolReturnPart("t", "z" * 4000, tool_call_id="c")]),
        ModelResponse(parts=[TextPart("w")]),
        ModelRequest(parts=[UserPromptPart("q")]),
        ModelResponse(parts=[TextPart("v")]),
        ModelRequest(parts=[UserPromptPart("r")]),
    ]
    running = RunningEstimate()
    assert running.tokens(grown) == estimate_messages(grown)
    pruned = list(grown)
    pruned[2] = ModelRequest(parts=[ToolReturnPart("t", "[pruned: t → 4,000 chars]", tool_call_id="c")])
    assert running.tokens(pruned) == estimate_messages(pruned) < estimate_messages(grown)
    longer = [*pruned, ModelResponse(parts=[TextPart("more")])]
    assert running.tokens(longer) == estimate_messages(longer)

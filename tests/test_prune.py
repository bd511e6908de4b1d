"""The pruning ladder and its repairs, checked on what pydantic-ai's Responses adapter sends."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
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

from ketch.context.budget import estimate_messages
from ketch.context.prune import (
    EARLIER_SUMMARY_HEADING,
    SUMMARY_HEADER,
    is_item_not_found,
    placeholder_for,
    prune,
    repair,
    strip_item_ids,
)

OPENAI = "openai"


# ----------------------------------------------------------------------------- builders


def reasoning_step(turn: int, step: int, *, result: str | None = "x\n" * 300) -> list[ModelMessage]:
    """One reasoning-model step as the Responses API returns it: rs_ + msg_ + fc_ items."""
    cid = f"call_{turn}_{step}"
    response = ModelResponse(
        parts=[
            ThinkingPart("thinking " * 40, id=f"rs_{turn}_{step}", signature="E" * 400, provider_name=OPENAI),
            TextPart(f"checking file {turn}.{step}", id=f"msg_{turn}_{step}", provider_name=OPENAI),
            ToolCallPart(
                "read_file",
                {"path": f"src/m{turn}_{step}.py"},
                tool_call_id=cid,
                id=f"fc_{turn}_{step}",
                provider_name=OPENAI,
            ),
        ],
        provider_name=OPENAI,
    )
    if result is None:
        return [response]
    return [response, ModelRequest(parts=[ToolReturnPart("read_file", result, tool_call_id=cid)])]


def reasoning_turn(turn: int, steps: int = 2) -> list[ModelMessage]:
    msgs: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(f"question {turn}")])]
    for step in range(steps):
        msgs += reasoning_step(turn, step)
    msgs.append(
        ModelResponse(
            parts=[TextPart(f"answer {turn}", id=f"msg_{turn}_end", provider_name=OPENAI)],
            provider_name=OPENAI,
        )
    )
    return msgs


def history(turns: int = 4) -> list[ModelMessage]:
    return [m for t in range(turns) for m in reasoning_turn(t)]


def dump(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


@functools.cache
def responses_model() -> Any:
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIResponsesModel(
        "gpt-5", provider=OpenAIProvider(api_key="test", base_url="http://127.0.0.1:9/v1")
    )


async def responses_input(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """The `input` array pydantic-ai's OpenAIResponsesModel would send (no network).

    `_map_messages` is private; it is the adapter's own serializer and needs no request.
    """
    _, items = await responses_model()._map_messages(messages, {}, ModelRequestParameters())
    return [dict(i) for i in items]


def _is_user_side(item: dict[str, Any]) -> bool:
    return item.get("role") == "user" or item.get("type") == "function_call_output"


def assert_wire_consistent(items: list[dict[str, Any]]) -> None:
    """No orphan outputs, no item references, and provider item ids only on the newest
    response's items (the block after the last user-side item that precedes assistant items),
    which go back as they came."""
    last_user = max((n for n, i in enumerate(items) if _is_user_side(i) and any(not _is_user_side(j) for j in items[n + 1 :])), default=-1)
    calls_seen: set[str] = set()
    for n, item in enumerate(items):
        assert item.get("type") != "item_reference", item
        if n <= last_user:
            assert "id" not in item, f"provider item id sent after pruning: {item}"
        if item.get("type") == "function_call":
            calls_seen.add(item["call_id"])
        if item.get("type") == "function_call_output":
            assert item["call_id"] in calls_seen, f"output without its call: {item}"


async def summarize_stub(text: str) -> str:
    return f"they asked {text.count('User:')} questions"


# ----------------------------------------------------------------------------- wire-level


async def test_unrepaired_reasoning_drop_still_sends_item_ids():
    """Control: the adapter really does send msg_/fc_ ids, so the repair is needed."""
    msgs = history(2)
    naive = [
        ModelResponse(parts=[p for p in m.parts if not isinstance(p, ThinkingPart)], provider_name=OPENAI)
        if isinstance(m, ModelResponse)
        else m
        for m in msgs
    ]
    items = await responses_input(naive)
    assert {"msg_0_0", "fc_0_0"} <= {i.get("id") for i in items}


async def test_reasoning_stage_sends_earlier_items_inline_with_content_kept():
    msgs = history(3)
    full = estimate_messages(msgs)
    result = await prune(msgs, limit=full - 10)
    assert result.stage == "reasoning"
    items = await responses_input(result.messages)
    assert_wire_consistent(items)
    assert not any(i.get("type") == "reasoning" and i.get("id", "").startswith("rs_0") for i in items)
    # Compaction shortens, never blanks: the earlier turn's text and call are still there.
    assert {"role": "assistant", "content": "checking file 0.0"} in items
    assert any(i.get("type") == "function_call" and i["call_id"] == "call_0_0" for i in items)
    assert result.tokens_after < result.tokens_before


async def test_tool_result_stage_keeps_recent_results_and_pairs_old_ones_with_placeholders():
    msgs = history(4)
    # A third: dropping every reasoning but the newest response's (which has none) is not enough.
    result = await prune(msgs, limit=estimate_messages(msgs) // 3)
    assert result.stage == "tool_results"
    returns = [p for m in result.messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(returns) == 8  # every result kept, paired with its call
    assert returns[0].content == "[pruned: read_file src/m0_0.py → 300 lines, 600 chars]"
    assert returns[-1].content == "x\n" * 300  # the most recent run stays whole
    placeholders = [r.content.startswith("[pruned:") for r in returns]
    assert placeholders == sorted(placeholders, reverse=True)  # one old run, one recent run
    assert result.tokens_after <= estimate_messages(msgs) // 3
    assert_wire_consistent(await responses_input(result.messages))


async def test_pruning_an_already_pruned_history_keeps_the_first_placeholders():
    msgs = history(4)
    first = await prune(msgs, limit=estimate_messages(msgs) // 2)
    second = await prune(first.messages, limit=first.tokens_after - 200)
    returns = [p.content for m in second.messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns[0] == "[pruned: read_file src/m0_0.py → 300 lines, 600 chars]"
    assert sum(r.startswith("[pruned:") for r in returns) > sum(
        p.content.startswith("[pruned:") for m in first.messages if isinstance(m, ModelRequest) for p in m.parts
    )


async def test_summary_stage_replaces_oldest_turns_and_keeps_current_prompt():
    msgs = history(5)
    seen: list[str] = []

    async def summarize(text: str) -> str:
        seen.append(text)
        return "earlier: read several files"

    result = await prune(msgs, limit=500, summarize=summarize)
    assert result.stage == "summary"
    first = result.messages[0]
    assert isinstance(first, ModelRequest)
    assert first.parts[0].content.startswith(SUMMARY_HEADER + "earlier: read several files\n\nSteps recorded by ketch:")
    assert "Files touched: src/m0_0.py, src/m0_1.py" in first.parts[0].content
    assert "User: question 0" in seen[0] and "Tool call: read_file" in seen[0]
    prompts = [p.content for m in result.messages for p in m.parts if isinstance(p, UserPromptPart)]
    assert prompts[-1] == "question 4"
    assert "question 0" not in prompts
    assert_wire_consistent(await responses_input(result.messages))


async def test_collector_runs_during_the_summarize_call_and_after_any_prune():
    """Pruning pauses the cyclic collector while it walks the history, never across the model
    call that writes the summary, and leaves it on however the prune ends."""
    import gc

    assert gc.isenabled()
    during: list[bool] = []

    async def summarize(text: str) -> str:
        during.append(gc.isenabled())
        return "earlier work"

    async def failing(text: str) -> str:
        raise RuntimeError("summary model unavailable")

    result = await prune(history(5), limit=500, summarize=summarize)
    assert result.stage == "summary" and during == [True]
    assert gc.isenabled()
    failed = await prune(history(5), limit=500, summarize=failing)
    assert failed.summary_error == "summary model unavailable"
    assert gc.isenabled()
    for limit in (10**9, 2_500, 500):  # fits, placeholders, summary without a summarizer
        await prune(history(5), limit=limit)
        assert gc.isenabled()
    gc.disable()  # a process that runs with the collector off keeps it off
    try:
        await prune(history(5), limit=500, summarize=summarize)
        assert not gc.isenabled()
    finally:
        gc.enable()


async def test_summary_removes_turns_with_provider_executed_results_whole():
    search_turn: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("search the web")]),
        ModelResponse(
            parts=[
                NativeToolCallPart("web_search", {"query": "pydantic"}, tool_call_id="ws_1", provider_name="anthropic"),
                NativeToolReturnPart("web_search", [{"url": "https://a.example", "encrypted_content": "Z" * 3000}], tool_call_id="ws_1", provider_name="anthropic"),
                TextPart("found it"),
            ],
            provider_name="anthropic",
        ),
    ]
    msgs = search_turn + history(3)
    result = await prune(msgs, limit=800, summarize=summarize_stub)
    parts = [p for m in result.messages for p in m.parts]
    native_calls = [p for p in parts if isinstance(p, NativeToolCallPart)]
    native_returns = [p for p in parts if isinstance(p, NativeToolReturnPart)]
    assert len(native_calls) == len(native_returns)
    assert not native_calls  # the whole search turn went into the summary


async def test_pending_call_survives_every_stage():
    msgs = history(4)
    msgs += [ModelRequest(parts=[UserPromptPart("now delete build/")])]
    msgs += reasoning_step(9, 0, result=None)  # awaiting approval
    result = await prune(msgs, limit=600, summarize=summarize_stub)
    last = result.messages[-1]
    assert isinstance(last, ModelResponse)
    assert [p.tool_call_id for p in last.parts if isinstance(p, ToolCallPart)] == ["call_9_0"]
    assert result.messages[-2].parts[0].content == "now delete build/"


async def test_orphaned_result_is_dropped_before_it_reaches_the_wire():
    msgs = history(2)
    cut = msgs[2:]  # a count-based cut between a call and its result
    assert isinstance(cut[0], ModelRequest) and isinstance(cut[0].parts[0], ToolReturnPart)
    fixed = repair(cut)
    assert_wire_consistent(await responses_input(fixed))
    assert not any(isinstance(p, ToolReturnPart) and p.tool_call_id == "call_0_0" for m in fixed for p in m.parts)


def test_prune_never_mutates_its_input():
    msgs = history(4)
    before = dump(msgs)
    asyncio.run(prune(msgs, limit=700, summarize=summarize_stub))
    repair(msgs)
    strip_item_ids(msgs)
    assert dump(msgs) == before


async def test_history_that_fits_is_returned_untouched():
    msgs = history(2)
    result = await prune(msgs, limit=10**6)
    assert result.stage == "none" and not result.changed
    assert dump(result.messages) == dump(msgs)  # ids kept: nothing was pruned


# ----------------------------------------------------------------------------- strip_item_ids


async def test_strip_item_ids_answers_item_not_found_by_sending_everything_inline():
    msgs = history(2) + [
        ModelRequest(parts=[UserPromptPart("look it up")]),
        ModelResponse(
            parts=[
                NativeToolCallPart("web_search", {"query": "ketch agent"}, tool_call_id="ws_9", provider_name=OPENAI),
                NativeToolReturnPart("web_search", {"status": "completed", "sources": [{"url": "https://k.example"}]}, tool_call_id="ws_9", provider_name=OPENAI),
                TextPart("here", id="msg_9", provider_name=OPENAI),
            ],
            provider_name=OPENAI,
        ),
    ]
    assert any("id" in i for i in await responses_input(msgs))
    items = await responses_input(strip_item_ids(msgs))
    assert_wire_consistent(items)
    texts = json.dumps(items)
    assert "web_search call: ketch agent" in texts and "https://k.example" in texts


def test_strip_item_ids_keeps_adapter_sentinels_and_inline_native_payloads():
    redacted = ThinkingPart("", id="redacted_thinking", signature="sig", provider_name="anthropic")
    call = NativeToolCallPart("web_search", {"query": "q"}, tool_call_id="srvtoolu_1", provider_name="anthropic")
    ret = NativeToolReturnPart("web_search", [{"url": "u"}], tool_call_id="srvtoolu_1", provider_name="anthropic")
    msgs = [
        ModelRequest(parts=[UserPromptPart("q")]),
        ModelResponse(parts=[redacted, call, ret, TextPart("a")], provider_name="anthropic"),
    ]
    out = strip_item_ids(msgs)
    assert out[1].parts[:3] == [redacted, call, ret]


def test_strip_item_ids_splits_legacy_combined_ids_on_call_and_result():
    msgs = [
        ModelRequest(parts=[UserPromptPart("q")]),
        ModelResponse(parts=[ToolCallPart("ls", {}, tool_call_id="call_1|fc_1", provider_name=OPENAI)]),
        ModelRequest(parts=[ToolReturnPart("ls", "a", tool_call_id="call_1|fc_1")]),
    ]
    out = strip_item_ids(msgs)
    assert out[1].parts[0].tool_call_id == "call_1"
    assert out[2].parts[0].tool_call_id == "call_1"


def test_repair_keeps_a_call_awaiting_its_result():
    msgs = [ModelRequest(parts=[UserPromptPart("go")]), *reasoning_step(0, 0, result=None)]
    out = repair(msgs)
    assert [p.tool_call_id for p in out[-1].parts if isinstance(p, ToolCallPart)] == ["call_0_0"]


async def test_empty_history_with_no_room_is_returned_empty():
    result = await prune([], limit=10, reserved=50)
    assert result.messages == [] and result.tokens_after == 50


# ----------------------------------------------------------------------------- 404


def item_404(message: str = "Item with id 'msg_123' not found.") -> ModelHTTPError:
    return ModelHTTPError(404, "gpt-5", body={"message": message, "type": "invalid_request_error", "param": "input", "code": None})


def test_is_item_not_found_recognises_the_providers_404():
    assert is_item_not_found(item_404())
    assert not is_item_not_found(item_404("The model `gpt-9` does not exist"))
    assert not is_item_not_found(ModelHTTPError(400, "gpt-5", body={"message": "Item with id 'x' not found."}))
    assert not is_item_not_found(ValueError("Item with id 'x' not found."))
    try:
        try:
            raise item_404()
        except ModelHTTPError as inner:
            raise RuntimeError("request failed") from inner
    except RuntimeError as outer:
        assert is_item_not_found(outer)
    assert is_item_not_found(ExceptionGroup("fallback", [ValueError("x"), item_404()]))


# ----------------------------------------------------------------------------- properties


@st.composite
def random_history(draw: st.DrawFn) -> list[ModelMessage]:
    msgs: list[ModelMessage] = []
    counter = 0
    for turn in range(draw(st.integers(1, 6))):
        msgs.append(ModelRequest(parts=[UserPromptPart(f"prompt {turn} " + "p" * draw(st.integers(0, 200)))]))
        for _ in range(draw(st.integers(0, 4))):
            counter += 1
            cid = f"call_{counter}"
            parts: list[Any] = []
            if draw(st.booleans()):
                parts.append(ThinkingPart("t" * draw(st.integers(0, 400)), id=f"rs_{counter}", signature="s" * draw(st.integers(0, 300)), provider_name=OPENAI))
            if draw(st.booleans()):
                parts.append(TextPart("w" * draw(st.integers(1, 200)), id=f"msg_{counter}", provider_name=OPENAI))
            if draw(st.booleans()):
                parts.append(NativeToolCallPart("web_search", {"query": "q"}, tool_call_id=f"ws_{counter}", provider_name=OPENAI))
                parts.append(NativeToolReturnPart("web_search", {"status": "completed"}, tool_call_id=f"ws_{counter}", provider_name=OPENAI))
            parts.append(ToolCallPart("read_file", {"path": f"f{counter}.py"}, tool_call_id=cid, id=f"fc_{counter}", provider_name=OPENAI))
            msgs.append(ModelResponse(parts=parts, provider_name=OPENAI))
            msgs.append(ModelRequest(parts=[ToolReturnPart("read_file", "r\n" * draw(st.integers(0, 800)), tool_call_id=cid)]))
        msgs.append(ModelResponse(parts=[TextPart(f"done {turn}", id=f"msg_end_{turn}", provider_name=OPENAI)], provider_name=OPENAI))
    if draw(st.booleans()):  # a suspended approval at the end of the current turn
        msgs.append(ModelResponse(parts=[ToolCallPart("run", {"command": "rm -rf build"}, tool_call_id="pending_1")], provider_name=OPENAI))
    return msgs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=random_history(), fraction=st.floats(0.05, 1.2))
def test_prune_then_repair_keeps_history_sendable(msgs: list[ModelMessage], fraction: float):
    limit = max(1, int(estimate_messages(msgs) * fraction))
    result = asyncio.run(prune(msgs, limit=limit, summarize=summarize_stub))
    out = result.messages
    calls_before: set[str] = set()
    for m in out:
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                calls_before.add(p.tool_call_id)
                if result.changed:
                    assert p.id is None
            if isinstance(p, ToolReturnPart):
                assert p.tool_call_id in calls_before
    current_prompt = [p for m in msgs for p in m.parts if isinstance(p, UserPromptPart)][-1]
    assert any(p.content == current_prompt.content for m in out for p in m.parts if isinstance(p, UserPromptPart))
    if any(isinstance(p, ToolCallPart) and p.tool_call_id == "pending_1" for m in msgs for p in m.parts):
        assert any(isinstance(p, ToolCallPart) and p.tool_call_id == "pending_1" for m in out for p in m.parts)
    assert result.tokens_after <= result.tokens_before
    assert result.tokens_before == estimate_messages(msgs)
    assert result.tokens_after == estimate_messages(out)


@settings(max_examples=25, deadline=None)
@given(msgs=random_history())
def test_repaired_history_serializes_without_ids_or_orphans(msgs: list[ModelMessage]):
    result = asyncio.run(prune(msgs, limit=max(1, estimate_messages(msgs) // 3), summarize=summarize_stub))
    items = asyncio.run(responses_input(result.messages))
    assert_wire_consistent(items)


@pytest.mark.parametrize("limit", [1, 50])
async def test_impossible_budget_still_keeps_the_current_turn(limit: int):
    msgs = history(3)
    result = await prune(msgs, limit=limit, summarize=summarize_stub)
    assert result.stage == "summary"
    prompts = [p.content for m in result.messages for p in m.parts if isinstance(p, UserPromptPart)]
    # The current turn's own steps were summarized too; its prompt leads the summary, verbatim.
    assert prompts[0] == "question 2" and prompts[1].startswith(SUMMARY_HEADER)
    assert_wire_consistent(await responses_input(result.messages))


def test_placeholder_text_says_what_each_kind_of_result_held():
    call = ToolCallPart("read_file", {"path": "src/a.py"}, tool_call_id="c1")
    long_text = ToolReturnPart("read_file", "x\n" * 600, tool_call_id="c1")
    assert placeholder_for(long_text, call) == "[pruned: read_file src/a.py → 600 lines, 1,200 chars]"
    no_newline = ToolReturnPart("run", "y" * 300, tool_call_id="c2")
    assert placeholder_for(no_newline, None) == "[pruned: run → 1 lines, 300 chars]"
    rows = ToolReturnPart("query", {"rows": ["r" * 200]}, tool_call_id="c3")
    assert placeholder_for(rows, ToolCallPart("query", {}, tool_call_id="c3")) == "[pruned: query → 213 chars]"
    assert placeholder_for(ToolReturnPart("run", "short", tool_call_id="c4"), None) is None
    assert placeholder_for(ToolReturnPart("run", placeholder_for(no_newline, None) + " " * 90), None) is None


def placeholdered_tokens(msgs: list[ModelMessage]) -> int:
    """Tokens of ``msgs`` with reasoning dropped and every tool result placeholdered."""
    calls = {p.tool_call_id: p for m in msgs for p in m.parts if isinstance(p, ToolCallPart)}
    thinned: list[ModelMessage] = []
    for m in msgs:
        parts = []
        for p in m.parts:
            if isinstance(p, ThinkingPart):
                continue
            if isinstance(p, ToolReturnPart):
                text = placeholder_for(p, calls.get(p.tool_call_id))
                p = dataclasses.replace(p, content=text) if text is not None else p
            parts.append(p)
        thinned.append(dataclasses.replace(m, parts=parts))
    return estimate_messages(thinned)


async def test_a_summary_keeps_half_the_budget_free_so_the_next_one_is_far_off():
    """Stage 3 replaces old turns until the summary and the rest fit half the budget. The
    session then runs for many steps before it needs another summary call; cut only to the
    limit, it would be back over within a few steps."""
    limit = 20_000
    summaries: list[int] = []
    msgs: list[ModelMessage] = []
    steps = 0

    async def summarize(text: str) -> str:
        summaries.append(steps)
        return "earlier: read many files"

    for turn in range(120):
        msgs.append(ModelRequest(parts=[UserPromptPart(f"question {turn}")]))
        for step in range(5):
            msgs += reasoning_step(turn, step)
            steps += 1
            result = await prune(msgs, limit=limit, summarize=summarize)
            msgs = list(result.messages)
            assert result.tokens_after <= limit
            if result.stage == "summary":
                assert result.tokens_after <= limit // 2

    per_step = placeholdered_tokens(reasoning_step(0, 0))
    assert len(summaries) >= 2, summaries
    gaps = [later - earlier for earlier, later in zip(summaries, summaries[1:])]
    assert min(gaps) >= (limit // 2 - 2_000) // per_step, (gaps, per_step)


async def test_an_earlier_summary_is_carried_whole_into_the_next_one():
    """The transcript keeps its newest lines within a cap; a summary from an earlier
    compaction is the oldest message, so it would be the first thing dropped. It leads the
    next transcript whole instead, however long the conversation since has been."""
    earlier = "Goal: fix the parser.\n" + "".join(f"- fact {i} worth keeping\n" for i in range(300))
    msgs: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(SUMMARY_HEADER + earlier)])]
    for turn in range(60):  # about 400k characters of transcript: over the 300k cap
        msgs += reasoning_turn(turn, steps=10)
    seen: list[str] = []

    async def summarize(text: str) -> str:
        seen.append(text)
        return "new summary"

    result = await prune(msgs, limit=20_000, summarize=summarize)
    assert result.stage == "summary" and len(seen) == 1
    transcript = seen[0]
    assert transcript.startswith(EARLIER_SUMMARY_HEADING + earlier.strip() + "\n")
    assert "[older conversation omitted]" in transcript  # the conversation since was capped
    assert transcript.count("fact 299 worth keeping") == 1
    assert len(transcript) <= 300_000 + 200
    assert result.messages[0].parts[0].content.startswith(SUMMARY_HEADER + "new summary\n\nSteps recorded by ketch:")


# ----------------------------------------------------------------------------- inside one turn


def one_long_turn(steps: int) -> list[ModelMessage]:
    msgs: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("fix every module")])]
    for step in range(steps):
        msgs += reasoning_step(0, step)
    return msgs


async def test_a_turn_alone_over_budget_summarizes_its_own_older_steps():
    msgs = one_long_turn(40)
    seen: list[str] = []

    async def summarize(text: str) -> str:
        seen.append(text)
        return "read modules 0 to 30; nothing fixed yet; next: module 31"

    result = await prune(msgs, limit=estimate_messages(msgs) // 8, summarize=summarize)
    assert result.stage == "summary" and result.tokens_after <= estimate_messages(msgs) // 8
    head = result.messages[0]
    assert [p.content for p in head.parts][0] == "fix every module"  # the prompt, verbatim
    summary = head.parts[1].content
    assert summary.startswith(SUMMARY_HEADER + "read modules 0 to 30")
    assert "Files touched: " in summary and "src/m0_0.py" in summary
    assert "User: fix every module" in seen[0] and "Tool call: read_file" in seen[0]
    # The newest steps stay whole, the newest result above all; the tail starts at a response.
    assert isinstance(result.messages[1], ModelResponse)
    last = result.messages[-1].parts[-1]
    assert isinstance(last, ToolReturnPart) and last.tool_call_id == "call_0_39" and last.content == "x\n" * 300
    items = await responses_input(result.messages)
    assert_wire_consistent(items)
    # The newest response goes back as it came: its reasoning as a reasoning item with its id.
    reasoning = [i for i in items if i.get("type") == "reasoning"]
    assert [i["id"] for i in reasoning] == ["rs_0_39"]
    assert not any(i.get("role") == "assistant" and "thinking thinking" in json.dumps(i) for i in items)


async def test_older_reasoning_of_the_turn_goes_before_any_result():
    msgs = one_long_turn(6)
    thinking = sum(len(p.content) + len(p.signature or "") for m in msgs for p in m.parts if isinstance(p, ThinkingPart))
    result = await prune(msgs, limit=estimate_messages(msgs) - thinking // 8)
    assert result.stage == "reasoning"
    kept = [p for m in result.messages for p in m.parts if isinstance(p, ThinkingPart)]
    assert [p.id for p in kept] == ["rs_0_5"]  # only the newest response keeps its reasoning
    returns = [p.content for m in result.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returns == ["x\n" * 300] * 6  # no result was shortened


async def test_a_failed_summary_inside_a_turn_replaces_nothing():
    msgs = one_long_turn(40)

    async def failing(text: str) -> str:
        raise RuntimeError("HTTP 400: prompt is too long")

    result = await prune(msgs, limit=estimate_messages(msgs) // 8, summarize=failing)
    assert result.summary_error == "HTTP 400: prompt is too long"
    assert result.stage == "tool_results"
    texts = [p.content for m in result.messages for p in m.parts if isinstance(p, UserPromptPart)]
    assert texts == ["fix every module"]  # no summary, no failure text in its place
    returns = [p for m in result.messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(returns) == 40 and returns[-1].content == "x\n" * 300  # every call kept, the newest whole
    assert_wire_consistent(await responses_input(result.messages))

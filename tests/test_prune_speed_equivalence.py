"""The pruning ladder on generated histories, held to its contract decision by decision.

``prune`` plans with token arithmetic in one pass, prices tool-result placeholders lazily
(newest first, only as far back as its decision needs), renders the summary transcript
newest first up to its cap, and copies the parts it changes attribute by attribute. These
tests restate what the ladder must produce in plain, slow terms and compare: which turns
the summary replaced, which results became placeholders, what stayed whole, what the
summarizer was shown, and that every copy carries its original's attributes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import warnings
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ketch.context.budget import MESSAGE_OVERHEAD_CHARS, chars_to_tokens, estimate_messages, message_tokens, part_chars
from ketch.context.prune import (
    EARLIER_SUMMARY_HEADING,
    MIN_SUMMARY_CHARS,
    PLACEHOLDER_PREFIX,
    SUMMARY_HEADER,
    SUMMARY_RESERVE_TOKENS,
    SUMMARY_TAIL_SHARE,
    TRANSCRIPT_HEADING,
    earlier_summary,
    placeholder_for,
    prune,
    render_for_summary,
    turn_starts,
)

OPENAI = "openai"
SENTINELS = {"redacted_thinking", "redacted_content", "content", "reasoning", "reasoning_content"}
TRANSCRIPT_CAP = 300_000


# ----------------------------------------------------------------------------- histories


@st.composite
def histories(draw: st.DrawFn) -> list[ModelMessage]:
    """Turns of reasoning-model steps with the shapes a long session accumulates: ids,
    signatures, hosted searches, parallel calls, retries, non-text results, results already
    placeholdered, orphans, calls never answered. Every message is tagged by ``run_id``."""
    msgs: list[ModelMessage] = []
    n = 0
    for turn in range(draw(st.integers(1, 6))):
        prompt: list[Any] = [UserPromptPart(f"prompt {turn} " + "p" * draw(st.integers(0, 300)))]
        msgs.append(ModelRequest(parts=prompt))
        for _ in range(draw(st.integers(0, 5))):
            n += 1
            provider = draw(st.sampled_from([OPENAI, "anthropic"]))
            parts: list[Any] = []
            if draw(st.booleans()):
                thinking_id = draw(st.sampled_from([f"rs_{n}", "redacted_thinking", None]))
                signature = "s" * draw(st.integers(0, 300)) if draw(st.booleans()) else None
                parts.append(ThinkingPart("t" * draw(st.integers(0, 400)), id=thinking_id, signature=signature, provider_name=provider))
            if draw(st.booleans()):
                parts.append(TextPart("w" * draw(st.integers(1, 200)), id=draw(st.sampled_from([f"msg_{n}", None])), provider_name=provider))
            if draw(st.integers(0, 3)) == 0:
                parts.append(NativeToolCallPart("web_search", {"query": f"q{n}"}, tool_call_id=f"ws_{n}", provider_name=provider))
                parts.append(NativeToolReturnPart("web_search", {"status": "completed", "sources": [{"url": f"https://e.example/{n}"}]}, tool_call_id=f"ws_{n}", provider_name=provider))
            call_ids = []
            for k in range(draw(st.integers(1, 2))):
                call_id = f"call_{n}_{k}" + ("|fc_legacy" if draw(st.integers(0, 8)) == 0 else "")
                call_ids.append(call_id)
                args = draw(st.sampled_from([{"path": f"src/f{n}.py"}, '{"command": "ls  -la\\n x"}', {}, None, {"n": 3}]))
                parts.append(ToolCallPart("read_file", args, tool_call_id=call_id, id=draw(st.sampled_from([f"fc_{n}_{k}", None])), provider_name=provider))
            msgs.append(ModelResponse(parts=parts, provider_name=provider))
            results: list[Any] = []
            for call_id in call_ids:
                kind = draw(st.integers(0, 9))
                if kind == 0:
                    with warnings.catch_warnings():  # deprecated, but stored histories still hold them
                        warnings.simplefilter("ignore")
                        results.append(RetryPromptPart("bad arguments", tool_name="read_file", tool_call_id=call_id))
                elif kind == 1:
                    results.append(ToolReturnPart("read_file", {"rows": ["r" * draw(st.integers(0, 300))]}, tool_call_id=call_id))
                elif kind == 2:
                    continue  # never answered
                elif kind == 3:
                    results.append(ToolReturnPart("read_file", PLACEHOLDER_PREFIX + "read_file x → 3 lines, 90 chars]", tool_call_id=call_id))
                else:
                    results.append(ToolReturnPart("read_file", "r\n" * draw(st.integers(0, 900)), tool_call_id=call_id))
            if draw(st.integers(0, 9)) == 0:
                results.append(ToolReturnPart("read_file", "orphan" * 40, tool_call_id="no_such_call"))
            if results:
                msgs.append(ModelRequest(parts=results))
        msgs.append(ModelResponse(parts=[TextPart(f"done {turn}", id=f"msg_end_{turn}", provider_name=OPENAI)], provider_name=OPENAI))
    if draw(st.booleans()):  # a call awaiting approval at the end of the current turn
        msgs.append(ModelResponse(parts=[ToolCallPart("run", {"command": "rm -rf build"}, tool_call_id="pending_1")], provider_name=OPENAI))
    for index, message in enumerate(msgs):
        message.run_id = f"m{index}"
    return msgs


# ----------------------------------------------------------------------------- the ladder, restated


def answers_a_call(part: Any) -> bool:
    return isinstance(part, ToolReturnPart) or (isinstance(part, RetryPromptPart) and part.tool_name is not None)


def ids_stripped_chars(part: Any) -> int:
    """What a kept part of an earlier turn's response counts once its item id is gone."""
    chars = part_chars(part)
    if isinstance(part, (TextPart, ToolCallPart)) and part.id:
        chars -= len(part.id)
    return chars


class Reference:
    """Each message's tokens at every rung, computed the plain way (one message at a time)."""

    def __init__(self, msgs: list[ModelMessage], thin_before: int | None = None) -> None:
        starts = turn_starts(msgs)
        self.current = starts[-1] if starts else 0
        self.thin = self.current if thin_before is None else thin_before
        self.newest = max((i for i, m in enumerate(msgs) if isinstance(m, ModelResponse)), default=-1)
        result_requests = [i for i, m in enumerate(msgs) if isinstance(m, ModelRequest) and any(type(p) is ToolReturnPart for p in m.parts)]
        self.whole_from = result_requests[-1] if result_requests and result_requests[-1] > self.newest else len(msgs)
        self.has_steps = bool(result_requests) and result_requests[-1] > self.current
        calls = {p.tool_call_id: p for m in msgs if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart)}
        self.placeholder = {
            id(p): text
            for m in msgs
            if isinstance(m, ModelRequest)
            for p in m.parts
            if type(p) is ToolReturnPart and (text := placeholder_for(p, calls.get(p.tool_call_id))) is not None
        }
        self.tokens: list[int] = []  # after stage 1
        self.small: list[int] = []  # after stages 1 and 2
        for index, m in enumerate(msgs):
            if isinstance(m, ModelResponse):
                if index < self.thin:
                    kept = [p for p in m.parts if not isinstance(p, ThinkingPart)]
                    thinned = chars_to_tokens(MESSAGE_OVERHEAD_CHARS + sum(map(ids_stripped_chars, kept))) if kept else 0
                else:
                    thinned = message_tokens(m)
                self.tokens.append(thinned)
                self.small.append(thinned)
            else:
                self.tokens.append(message_tokens(m))
                shortened = [
                    dataclasses.replace(p, content=self.placeholder[id(p)]) if id(p) in self.placeholder else p for p in m.parts
                ]
                self.small.append(message_tokens(dataclasses.replace(m, parts=shortened)))
        self.saved = [t - s for t, s in zip(self.tokens, self.small)]
        answered = {p.tool_call_id for m in msgs for p in m.parts if answers_a_call(p)}
        pending = [i for i, m in enumerate(msgs) if isinstance(m, ModelResponse) and any(isinstance(p, ToolCallPart) and p.tool_call_id not in answered for p in m.parts)]
        self.limit_index = self.current
        if pending:
            self.limit_index = min(self.current, max((s for s in starts if s <= pending[0]), default=0))
        self.candidates = [s for s in starts if 0 < s <= self.limit_index]
        self.pending_at = pending[0] if pending else -1

    def results_cut(self, start: int, budget: int) -> int:
        """Where whole results begin: the smallest cut whose placeholders make the tail fit,
        never past the newest call's output."""
        excess = sum(self.tokens[start:]) - budget
        if excess <= 0:
            return start
        saved = 0
        for index in range(start, len(self.tokens)):
            saved += self.saved[index]
            if saved >= excess:
                return min(index + 1, self.whole_from)
        shrinking = [index for index in range(start, len(self.tokens)) if self.saved[index] > 0]
        return min(shrinking[-1] + 1 if shrinking else start, self.whole_from)

    def fits_with_placeholders(self, start: int, budget: int) -> bool:
        """Whether placeholdering every result from ``start`` up to the newest output fits."""
        return sum(self.tokens[start:]) - sum(self.saved[start : self.whole_from]) <= budget

    def step_start(self, msgs: list[ModelMessage], budget: int) -> int:
        """Where the kept steps of the current turn begin when it alone is over budget (0: no cut)."""
        reserve = min(SUMMARY_RESERVE_TOKENS, budget // 8)
        room = budget - (reserve if self.current > 0 else 0)
        if not self.has_steps or self.limit_index != self.current:
            return 0
        if sum(self.tokens[self.current :]) <= room or self.fits_with_placeholders(self.current, room):
            return 0
        last = self.pending_at if self.pending_at > self.current else self.newest
        responses = [i for i in range(self.current + 1, last + 1) if isinstance(msgs[i], ModelResponse)]
        if not responses:
            return 0
        target = int(budget * SUMMARY_TAIL_SHARE) - reserve
        best = responses[-1]
        for i in reversed(responses[:-1]):
            if sum(self.tokens[i:]) > target:
                break
            best = i
        return best

    def summary_start(self, budget: int) -> int:
        """The first turn whose tail, as sent, fits the kept share of the budget beside
        room for the summary."""
        for start in self.candidates:
            if sum(self.tokens[start:]) + SUMMARY_RESERVE_TOKENS <= int(budget * SUMMARY_TAIL_SHARE):
                return start
        return self.candidates[-1] if self.candidates else 0


def reference_transcript(head: list[ModelMessage]) -> str:
    """Every line of the head rendered oldest first, then the newest kept within the cap;
    an earlier summary at the start leads it whole (the prompt sharing its message, if any,
    is rendered as the first line)."""
    earlier = earlier_summary(head[0]) if head else None
    if earlier is not None:
        others = [p for p in head[0].parts if not (isinstance(p, UserPromptPart) and p.content.startswith(SUMMARY_HEADER))]
        head = ([ModelRequest(parts=others)] if others else []) + head[1:]
    cap = TRANSCRIPT_CAP - (len(earlier) if earlier is not None else 0)
    lines = [line for m in head for line in render_for_summary([m]).split("\n") if line]
    kept: list[str] = []
    total = 0
    for line in reversed(lines):
        total += len(line) + 1
        if total > cap:
            kept.append("[older conversation omitted]")
            break
        kept.append(line)
    body = "\n".join(reversed(kept))
    return body if earlier is None else f"{EARLIER_SUMMARY_HEADING}{earlier}{TRANSCRIPT_HEADING}{body}"


def dump(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


async def run_prune(msgs: list[ModelMessage], limit: int, reserved: int) -> tuple[Any, list[str]]:
    shown: list[str] = []

    async def summarize(text: str) -> str:
        shown.append(text)
        return f"summary of {len(text)} characters"

    return await prune(msgs, limit=limit, reserved=reserved, summarize=summarize), shown


def check_against_reference(msgs: list[ModelMessage], limit: int, reserved: int) -> None:
    before = dump(msgs)
    result, shown = asyncio.run(run_prune(msgs, limit, reserved))
    out = result.messages
    assert dump(msgs) == before, "prune changed its input"
    assert result.tokens_before == estimate_messages(msgs) + reserved
    assert result.tokens_after == estimate_messages(out) + reserved
    if estimate_messages(msgs) + reserved <= limit:
        assert result.stage == "none" and out == msgs
        return

    budget = limit - reserved
    ref = Reference(msgs)
    thinned_all = False
    if sum(ref.tokens) > budget and ref.newest > ref.current:  # the turn's older reasoning goes next
        ref = Reference(msgs, ref.newest)
        thinned_all = True
    index_of = {m.run_id: i for i, m in enumerate(msgs)}
    summarized = result.stage == "summary"
    kept = out[1:] if summarized else out
    sources = [index_of[m.run_id] for m in kept]
    assert sources == sorted(sources)
    start = sources[0] if sources else 0
    in_turn = False

    # Which rung: reasoning alone, placeholders, or a summary of whole earlier turns (and,
    # when the current turn alone is over budget, of its older steps).
    if sum(ref.tokens) <= budget:
        assert result.stage == "reasoning"
    elif ref.fits_with_placeholders(0, budget):
        assert result.stage == "tool_results"
    else:
        expected = ref.summary_start(budget)
        if expected in (0, ref.current) and (step := ref.step_start(msgs, budget)):
            expected, in_turn = step, True
        room = min(SUMMARY_RESERVE_TOKENS, sum(ref.tokens[:expected]) // 2) * 4 - len(SUMMARY_HEADER)
        if expected > 0 and room >= MIN_SUMMARY_CHARS:
            assert result.stage == "summary"
            assert start == expected, (start, expected)
            assert shown == [reference_transcript(msgs[:start])]
            assert isinstance(out[0], ModelRequest)
            assert out[0].parts[-1].content.startswith(SUMMARY_HEADER)
            if in_turn:  # the current turn's prompt leads the summary, verbatim
                prompt = [p for p in msgs[ref.current].parts if isinstance(p, UserPromptPart) and not p.content.startswith(SUMMARY_HEADER)]
                assert out[0].parts[:-1] == prompt
            else:
                assert len(out[0].parts) == 1
        else:
            in_turn = False
            assert result.stage == "tool_results"
    if not summarized:
        start = 0
        assert not shown

    # Every message of the tail is there, save those left empty by the repairs.
    for index in set(range(start, len(msgs))) - set(sources):
        m = msgs[index]
        if isinstance(m, ModelResponse):
            assert index < ref.thin and all(isinstance(p, ThinkingPart) for p in m.parts)
        else:
            assert all(isinstance(p, (ToolReturnPart, RetryPromptPart)) for p in m.parts)

    # Placeholders replace the results of the oldest run of requests that makes the tail fit
    # (the widest recent run stays whole, the newest output always), or every result that
    # shrinks when nothing fits.
    reserve = message_tokens(out[0]) if summarized else 0
    cut = start
    if result.stage in ("tool_results", "summary"):
        cut = ref.results_cut(start, budget - reserve)
    assert thinned_all or ref.thin == ref.current

    # Each kept message: same attributes, reasoning gone before the current turn, no item ids,
    # results either whole or the placeholder saying what was there.
    calls_sent: set[str] = set()
    for new, index in zip(kept, sources):
        old = msgs[index]
        assert type(new) is type(old)
        assert {k: v for k, v in vars(new).items() if k != "parts"} == {k: v for k, v in vars(old).items() if k != "parts"}
        if isinstance(old, ModelResponse):
            if index == ref.newest and index >= ref.thin and not any(isinstance(p, ToolCallPart) and "|" in p.tool_call_id for p in old.parts):
                assert new is old  # the newest response goes back as it came, item ids included
                calls_sent.update(p.tool_call_id for p in old.parts if isinstance(p, ToolCallPart))
                continue
            originals = [p for p in old.parts if not (index < ref.thin and isinstance(p, ThinkingPart))]
            assert len(new.parts) == len(originals)
            for part, original in zip(new.parts, originals):
                if isinstance(original, (NativeToolCallPart, NativeToolReturnPart)) and type(part) is TextPart:
                    assert (original.provider_name or old.provider_name) == OPENAI
                    continue
                assert type(part) is type(original)
                changed = {k for k in vars(original) if vars(part).get(k) != vars(original)[k]}
                assert changed <= {"id", "tool_call_id"} and vars(part).keys() == vars(original).keys()
                if isinstance(part, ThinkingPart):
                    assert part.id is None or part.id in SENTINELS
                elif isinstance(part, (TextPart, ToolCallPart)):
                    assert part.id is None
                if isinstance(part, ToolCallPart):
                    assert part.tool_call_id == original.tool_call_id.split("|")[0]
                    calls_sent.add(part.tool_call_id)
            continue
        originals = [p for p in old.parts if not (answers_a_call(p) and p.tool_call_id.split("|")[0] not in calls_sent)]
        assert len(new.parts) == len(originals)
        for part, original in zip(new.parts, originals):
            assert type(part) is type(original)
            changed = {k for k in vars(original) if vars(part).get(k) != vars(original)[k]}
            assert changed <= {"content", "tool_call_id"} and vars(part).keys() == vars(original).keys()
            shortened = index < cut and id(original) in ref.placeholder
            assert part.content == (ref.placeholder[id(original)] if shortened else original.content)

    # The current turn's prompt and calls still awaiting a result are always sent.
    prompts = [p for m in msgs for p in m.parts if isinstance(p, UserPromptPart)]
    assert any(p.content == prompts[-1].content for m in out for p in m.parts if isinstance(p, UserPromptPart))
    if any(isinstance(p, ToolCallPart) and p.tool_call_id == "pending_1" for m in msgs for p in m.parts):
        assert "pending_1" in calls_sent


# ----------------------------------------------------------------------------- tests


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=histories(), fraction=st.floats(0.0, 1.2), reserved=st.sampled_from([0, 0, 40, 400]))
def test_generated_histories_prune_as_the_ladder_says(msgs: list[ModelMessage], fraction: float, reserved: int) -> None:
    limit = int(estimate_messages(msgs) * fraction)
    check_against_reference(msgs, limit, reserved)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=histories())
def test_the_plans_bound_is_never_below_what_placeholders_save(msgs: list[ModelMessage]) -> None:
    """The ladder skips pricing when even the most placeholders could save leaves the history
    over budget; that bound must never be less than what every placeholder does save."""
    from ketch.context.prune import _plan

    plan = _plan(msgs)
    plan.results_cut(plan.full, -1)  # nothing fits a negative budget: every result is priced
    ref = Reference(msgs)
    assert sum(plan.saved) == sum(ref.saved[i] for i in range(len(msgs)) if isinstance(msgs[i], ModelRequest))
    assert plan.most_saved >= sum(plan.saved)


def long_history(turns: int, steps: int, result_lines: int, first_turn: int = 0) -> list[ModelMessage]:
    msgs: list[ModelMessage] = []
    n = first_turn * steps
    for turn in range(first_turn, first_turn + turns):
        msgs.append(ModelRequest(parts=[UserPromptPart(f"Turn {turn}: fix module {turn}.")]))
        for _ in range(steps):
            n += 1
            msgs.append(
                ModelResponse(
                    parts=[
                        ThinkingPart("thinking " * 10, id=f"rs_{n}", signature="g" * 200, provider_name=OPENAI),
                        TextPart(f"Reading module {n}.", id=f"msg_{n}", provider_name=OPENAI),
                        ToolCallPart("read_file", {"path": f"src/mod_{n}.py"}, tool_call_id=f"call_{n}", id=f"fc_{n}", provider_name=OPENAI),
                    ],
                    provider_name=OPENAI,
                )
            )
            body = "".join(f"    line {i} of module {n} = compute(value_{i})\n" for i in range(result_lines))
            msgs.append(ModelRequest(parts=[ToolReturnPart("read_file", body, tool_call_id=f"call_{n}")]))
        msgs.append(ModelResponse(parts=[TextPart(f"Fixed module {turn}.", id=f"end_{turn}", provider_name=OPENAI)], provider_name=OPENAI))
    for index, message in enumerate(msgs):
        message.run_id = f"m{index}"
    return msgs


def test_a_long_history_is_summarized_with_the_transcript_capped_at_its_newest_lines() -> None:
    msgs = long_history(turns=30, steps=30, result_lines=20)
    check_against_reference(msgs, limit=25_000, reserved=3_000)
    result, shown = asyncio.run(run_prune(msgs, 25_000, 3_000))
    assert result.stage == "summary"
    assert len(shown[0]) <= TRANSCRIPT_CAP + 30 and shown[0].startswith("[older conversation omitted]")


def test_a_long_history_at_each_rung() -> None:
    msgs = long_history(turns=12, steps=20, result_lines=12)
    total = estimate_messages(msgs)
    for limit in (total + 1, total * 9 // 10, total // 2, total // 4, total // 8, 1):
        check_against_reference(msgs, limit, reserved=0)


def test_pruning_its_own_output_again() -> None:
    msgs = long_history(turns=12, steps=20, result_lines=12)
    first = asyncio.run(run_prune(msgs, estimate_messages(msgs) // 3, 0))[0].messages
    for index, message in enumerate(first):
        message.run_id = f"m{index}"  # the summary has none; the rest are copies with their old tags
    check_against_reference(first, estimate_messages(first) - 500, reserved=0)


def test_summarizing_again_carries_the_earlier_summary() -> None:
    msgs = long_history(turns=40, steps=10, result_lines=30)
    first, shown = asyncio.run(run_prune(msgs, estimate_messages(msgs) // 20, 0))
    assert first.stage == "summary" and shown
    again = first.messages + long_history(turns=60, steps=10, result_lines=30, first_turn=40)
    for index, message in enumerate(again):
        message.run_id = f"m{index}"
    check_against_reference(again, estimate_messages(again) // 20, reserved=0)
    second, shown = asyncio.run(run_prune(again, estimate_messages(again) // 20, 0))
    assert second.stage == "summary"
    earlier = first.messages[0].parts[0].content.removeprefix(SUMMARY_HEADER)
    assert shown[0].startswith(f"{EARLIER_SUMMARY_HEADING}{earlier}{TRANSCRIPT_HEADING}")
    assert "[older conversation omitted]" in shown[0]


def test_provider_details_and_every_payload_kind_count_as_budget_counts_them() -> None:
    """The plan writes budget's per-part counts out; a history whose parts carry provider
    details, signatures and non-string payloads is held to ``estimate_messages`` at each rung."""
    details = {"encrypted_content": "e" * 300, "status": "done", "n": 3}
    msgs: list[ModelMessage] = []
    for turn in range(6):
        msgs.append(ModelRequest(parts=[UserPromptPart(f"turn {turn}")]))
        for step in range(4):
            call_id = f"call_{turn}_{step}"
            msgs.append(
                ModelResponse(
                    parts=[
                        ThinkingPart("t" * 90, id=f"rs_{turn}_{step}", signature="s" * 120, provider_name=OPENAI, provider_details=details),
                        TextPart("w" * 40, id=f"msg_{turn}_{step}", provider_name=OPENAI, provider_details=details),
                        ToolCallPart("read_file", {"path": f"f{step}.py", "lines": [1, 2]}, tool_call_id=call_id, id=f"fc_{turn}_{step}", provider_name=OPENAI, provider_details=details),
                        ToolCallPart("run", '{"command": "ls"}', tool_call_id=call_id + "_run", provider_name=OPENAI),
                    ],
                    provider_name=OPENAI,
                )
            )
            msgs.append(
                ModelRequest(
                    parts=[
                        ToolReturnPart("read_file", "x\n" * 200, tool_call_id=call_id),
                        ToolReturnPart("run", {"rows": ["r" * 150], "code": 0}, tool_call_id=call_id + "_run"),
                    ]
                )
            )
    for index, message in enumerate(msgs):
        message.run_id = f"m{index}"
    total = estimate_messages(msgs)
    for limit in (total + 1, total * 9 // 10, total * 7 // 10, total // 2, total // 5):  # each rung
        check_against_reference(msgs, limit, reserved=0)

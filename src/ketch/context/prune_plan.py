"""The pruning plan: token counts of every message at each rung, from one pass, and the
decision of where the ladder cuts, made from that arithmetic before anything is rebuilt.

It is one thing, the ladder's arithmetic: the counts and the decision read the same per-rung
numbers, so splitting them would pass those tables between modules for no gain."""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai.messages import (
    ModelMessage,
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

from ketch.context.budget import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_CHARS,
    PART_OVERHEAD_CHARS,
    call_chars,
    chars_to_tokens,
    content_chars,
    message_tokens,
    part_chars,
    prompt_chars,
    text_chars,
    thinking_chars,
)
from ketch.context.reminders import is_reminder
from ketch.context.rebuild import _is_call, _result_call_id
from ketch.context.rendering import _SHORTEST_PLACEHOLDER, SUMMARY_HEADER, placeholder_for

Stage = Literal["none", "reasoning", "tool_results", "summary"]

SUMMARY_RESERVE_TOKENS = 2_000
"""Room kept for the summary when choosing how many turns stage 3 replaces."""
MIN_SUMMARY_CHARS = 200
SUMMARY_TAIL_SHARE = 0.5
"""Share of the budget the summary and the turns kept after it may fill.

Cut only to the limit, the history would be back over it within a few dozen steps, each
time costing another summary call, and every step in between would rewrite part of the
history (so no provider prompt cache survives it). Cut to half, the kept turns stay whole,
the next steps send an unchanged, growing prefix, and the next summary is hundreds of
steps away."""


@dataclass
class _Plan:
    """Token counts of every message at each rung, from one pass over the history."""

    full: list[int]
    """Tokens of each message as it is."""
    thinned: list[int]
    """Tokens once its reasoning is dropped and siblings detached (0: nothing left)."""
    starts: list[int]
    pending: set[str]
    plain: list[bool]
    """Whether the message holds nothing the id-stripping rewrites beyond what ``thinned``
    and ``saved`` account for (no provider-executed parts, no combined call ids)."""
    calls: dict[str, ToolCallPart]
    messages: Sequence[ModelMessage]
    result_at: list[int]
    """Indices of the requests holding plain tool results (``ToolReturnPart``), in order."""
    result_chars: list[int]
    """For each of ``result_at``: the request's characters."""
    most_saved: int
    """An upper bound of the tokens placeholdering every result could save (each result's
    content counted as the shortest placeholder its tool name allows)."""
    saved: list[int] = field(default_factory=list)
    """Tokens placeholdering a message's tool results would save; exact for every message
    :meth:`results_cut` priced (all before any cut it returned), 0 for the rest."""
    placeholders: dict[int, str] = field(default_factory=dict)
    """Placeholder text by ``id()`` of the ``ToolReturnPart`` it would replace."""
    _priced: list[bool] = field(default_factory=list, init=False, repr=False)
    """By position in ``result_at``: whether that request's results are priced."""

    def __post_init__(self) -> None:
        self.saved = [0] * len(self.full)
        self._priced = [False] * len(self.result_at)

    def _price(self, position: int) -> int:
        """Price the results of ``result_at[position]`` (once): its ``saved`` tokens, their texts."""
        i = self.result_at[position]
        if self._priced[position]:
            return self.saved[i]
        self._priced[position] = True
        shrink = 0
        calls, placeholders = self.calls, self.placeholders
        for p in self.messages[i].parts:
            if p.__class__ is not ToolReturnPart:
                continue
            text = placeholder_for(p, calls.get(p.tool_call_id))
            if text is not None:
                placeholders[id(p)] = text
                content = p.content
                shrink += (len(content) if content.__class__ is str else content_chars(content)) - len(text)
        if not shrink:
            return 0
        saved = self.saved[i] = self.full[i] - chars_to_tokens(self.result_chars[position] - shrink)
        return saved

    def cannot_fit(self, tokens: Sequence[int], budget: int) -> bool:
        """Whether ``tokens`` stay over ``budget`` even if placeholders saved all they could.

        A bound from ``most_saved``, with no placeholder written: when it holds, stage 2
        cannot be enough, and the summary cut is chosen without pricing any result.
        """
        return sum(tokens) - self.most_saved > budget

    def results_cut(self, tokens: Sequence[int], budget: int, start: int = 0) -> tuple[int, bool]:
        """Where whole results begin: the earliest index such that placeholdering the results
        of the messages from ``start`` up to it makes ``tokens[start:]`` fit ``budget`` (the
        widest recent run of whole results), and whether any such index exists.

        Results are priced oldest first and only until they save enough, so the results
        that stay whole are never written as placeholders. When nothing fits, every result
        from ``start`` on is priced and the cut falls after the last one that saves anything.
        """
        excess = sum(tokens[start:]) - budget
        if excess <= 0:
            return start, True
        at = self.result_at
        cut, saved = start, 0
        for position in range(bisect_left(at, start), len(at)):
            shrink = self._price(position)
            if shrink:
                saved += shrink
                cut = at[position] + 1
                if saved >= excess:
                    return cut, True
        return cut, False


def _response_part_chars(part: Any, calls: dict[str, ToolCallPart]) -> tuple[int, int | None, bool]:
    """The general path of :func:`_plan` for one response part: its characters, its
    characters once the response is thinned (None for reasoning, which is dropped), and
    whether the id-stripping leaves it as the thinned count says. Records calls in ``calls``."""
    chars = part_chars(part)
    if isinstance(part, ThinkingPart):
        return chars, None, True
    kept = chars - len(part.id) if isinstance(part, (TextPart, ToolCallPart)) and part.id else chars
    if isinstance(part, ToolCallPart):
        calls[part.tool_call_id] = part
        return chars, kept, "|" not in part.tool_call_id
    return chars, kept, not isinstance(part, (NativeToolCallPart, NativeToolReturnPart))


def _plan(messages: Sequence[ModelMessage]) -> _Plan:
    full: list[int] = []
    thinned: list[int] = []
    starts: list[int] = []
    calls: dict[str, ToolCallPart] = {}
    answered: set[str] = set()
    plain: list[bool] = []
    result_at: list[int] = []
    result_chars: list[int] = []
    most_saved = 0
    # The character counts of the exact part classes are budget's own, called directly
    # (they are nearly every part of a long history); other parts take ``part_chars``.
    for i, m in enumerate(messages):
        chars = MESSAGE_OVERHEAD_CHARS
        is_plain = True
        cls = m.__class__
        if cls is ModelResponse or (cls is not ModelRequest and isinstance(m, ModelResponse)):
            kept = MESSAGE_OVERHEAD_CHARS
            any_kept = False
            for p in m.parts:
                part_cls = p.__class__
                if part_cls is ThinkingPart:
                    chars += thinking_chars(p)
                    continue
                if part_cls is TextPart:
                    c = text_chars(p)
                    chars += c
                    kept += c - len(p.id) if p.id else c
                elif part_cls is ToolCallPart:
                    c = call_chars(p)
                    chars += c
                    kept += c - len(p.id) if p.id else c
                    call_id = p.tool_call_id
                    calls[call_id] = p
                    if "|" in call_id:
                        is_plain = False
                else:
                    c, thin, part_plain = _response_part_chars(p, calls)
                    chars += c
                    if thin is None:
                        continue
                    kept += thin
                    is_plain = is_plain and part_plain
                any_kept = True
            full.append(-(-chars // CHARS_PER_TOKEN))  # chars_to_tokens, inlined
            thinned.append(-(-kept // CHARS_PER_TOKEN) if any_kept else 0)
            plain.append(is_plain)
            continue
        has_results = False
        shrink_most = 0
        for p in m.parts:
            part_cls = p.__class__
            if part_cls is ToolReturnPart:
                # ``return_chars`` inlined, to share the content's size with the bound below.
                content = p.content
                size = len(content) if content.__class__ is str else content_chars(content)
                name = len(p.tool_name)
                call_id = p.tool_call_id
                chars += PART_OVERHEAD_CHARS + name + len(call_id) + size
                if size - name > _SHORTEST_PLACEHOLDER:  # the most its placeholder can save
                    shrink_most += size - name - _SHORTEST_PLACEHOLDER
                answered.add(call_id)
                if "|" in call_id:
                    is_plain = False
                has_results = True
                continue
            if part_cls is UserPromptPart:
                chars += prompt_chars(p)
                if is_reminder(p):  # state the session added, not a prompt: no turn starts here
                    continue
            else:
                chars += part_chars(p)
                if (cid := _result_call_id(p)) is not None:
                    answered.add(cid)
                    if "|" in cid:  # the rebuild splits it, so count the rebuilt message
                        is_plain = False
                    continue
                if not isinstance(p, UserPromptPart):
                    continue
            if not starts or starts[-1] != i:
                starts.append(i)
        if has_results:
            result_at.append(i)
            result_chars.append(chars)
        tokens = -(-chars // CHARS_PER_TOKEN)
        if shrink_most:
            most_saved += tokens + (chars - shrink_most) // -CHARS_PER_TOKEN
        full.append(tokens)
        thinned.append(tokens)
        plain.append(is_plain)
    pending = set(calls) - answered
    return _Plan(full, thinned, starts, pending, plain, calls, messages, result_at, result_chars, most_saved)


def _summary_cut(starts: list[int], tokens: Sequence[int], budget: int, limit_index: int,
                 reserve: int = SUMMARY_RESERVE_TOKENS) -> int:
    """The smallest turn start (≤ ``limit_index``) whose tail, as ``tokens`` counts it (earlier
    turns without reasoning), fits :data:`SUMMARY_TAIL_SHARE` of ``budget`` beside room for
    the summary (``reserve``); the latest allowed start when none fits (0: no turn may be cut)."""
    target = int(budget * SUMMARY_TAIL_SHARE) - reserve
    starts = [s for s in starts if 0 < s <= limit_index]
    if not starts:
        return 0
    best = starts[-1]
    tail = sum(tokens[best:])
    for start in reversed(starts[:-1]):
        tail += sum(tokens[start:best])
        if tail > target:
            break
        best = start
    return best


def _suspended_limit(messages: Sequence[ModelMessage], plan: _Plan) -> int:
    """The latest index stage 3 may cut at: the current turn, or an earlier turn that
    holds a call still awaiting its result (that turn is kept whole)."""
    limit_index = plan.starts[-1] if plan.starts else 0
    if plan.pending:
        first = next(
            i
            for i, m in enumerate(messages)
            if isinstance(m, ModelResponse)
            and any(_is_call(p) and p.tool_call_id in plan.pending for p in m.parts)
        )
        limit_index = min(limit_index, max((s for s in plan.starts if s <= first), default=0))
    return limit_index


@dataclass
class _Decision:
    """Where the ladder cuts, decided from the plan before any summary is written."""

    stage: Stage
    current: int
    tokens: list[int]
    budget: int
    start: int = 0
    """Messages before this are replaced by a summary (0: none)."""
    cut: int = 0
    """Tool results of messages before this are placeholdered (summary stage: set after it)."""
    room: int = 0
    """Characters the summary may take."""
    tail_cut: bool = False
    """Whether placeholdering everything does not fit: ``cut`` is then chosen on the tail
    from ``start`` on, once the summary (if any) is written."""
    thin_before: int = 0
    """Reasoning of responses before this is dropped: the current turn's start, or, when the
    current turn alone is too big, its newest response (whose reasoning is always kept)."""
    newest: int = -1
    """Index of the newest response, which keeps its reasoning and provider item ids (-1: none)."""
    whole_from: int = 0
    """Tool results from this index on are never placeholdered: the newest call's output."""
    in_turn: bool = False
    """Whether the summary also replaces older steps of the current turn (``start`` is then
    a response of the current turn, and the turn's prompt leads the summary message)."""


def _newest_response(messages: Sequence[ModelMessage]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], ModelResponse):
            return i
    return -1


def _step_cut(messages: Sequence[ModelMessage], plan: _Plan, tokens: Sequence[int], target: int, current: int, last: int) -> int:
    """The earliest response of the current turn (after ``current``, at most ``last``) from
    which the steps kept whole fit ``target``; ``last`` when none does; 0 when the turn has no
    response to cut at."""
    responses = [i for i in range(current + 1, last + 1) if isinstance(messages[i], ModelResponse)]
    if not responses:
        return 0
    best = responses[-1]
    tail = sum(tokens[best:])
    for i in reversed(responses[:-1]):
        tail += sum(tokens[i:best])
        if tail > target:
            break
        best = i
    return best


def _pending_response(messages: Sequence[ModelMessage], plan: _Plan) -> int:
    """Index of the first response holding a call still awaiting its result (-1: none)."""
    if not plan.pending:
        return -1
    return next(
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelResponse) and any(_is_call(p) and p.tool_call_id in plan.pending for p in m.parts)
    )


def _reserve(budget: int, reserve: int = SUMMARY_RESERVE_TOKENS) -> int:
    """Tokens kept for a summary message beside the steps an in-turn cut keeps."""
    return min(reserve, budget // 8)


def _turn_over_budget(plan: _Plan, decision: _Decision, budget: int, reserve: int = SUMMARY_RESERVE_TOKENS) -> bool:
    """Whether the current turn alone stays over ``budget`` (less room for a summary of what
    came before it) with every older result of it a placeholder and the newest output whole."""
    current, tokens = decision.current, decision.tokens
    room = budget - (_reserve(budget, reserve) if current > 0 else 0)
    if sum(tokens[current:]) <= room:
        return False
    cut, fits = plan.results_cut(tokens, room, current)
    return not fits or cut > decision.whole_from


def _decide(messages: Sequence[ModelMessage], plan: _Plan, budget: int, lap: _Stopwatch | None,
            reserve: int = SUMMARY_RESERVE_TOKENS) -> _Decision:
    """The rung the history needs and its cut points, from token arithmetic over the plan.

    Reasoning goes first: of earlier turns, then of the current turn's older steps (the newest
    response keeps its own). Then older tool results become placeholders, the newest call's
    output never. Then a summary replaces whole earlier turns and, when the current turn alone
    is too big, its older steps too. ``reserve``: the most tokens the summary message may take."""
    current = plan.starts[-1] if plan.starts else 0
    newest = _newest_response(messages)
    whole_from = plan.result_at[-1] if plan.result_at and plan.result_at[-1] > newest else len(messages)
    tokens = plan.thinned[:current] + plan.full[current:]
    decision = _Decision("reasoning", current, tokens, budget, thin_before=current, newest=newest, whole_from=whole_from)
    if sum(tokens) <= budget:
        return decision
    if newest > current:  # the current turn's older reasoning goes before any result
        decision.thin_before = newest
        decision.tokens = tokens = plan.thinned[:newest] + plan.full[newest:]
        if sum(tokens) <= budget:
            return decision
    decision.stage = "tool_results"
    fits = False
    # When the bound says stage 2 cannot be enough, no placeholder is priced to say so.
    if not plan.cannot_fit(tokens, budget):
        decision.cut, fits = plan.results_cut(tokens, budget)
        if decision.cut > whole_from:
            decision.cut, fits = whole_from, False
    if lap:
        lap("price")
    if fits:
        return decision
    decision.tail_cut = True
    limit_index = _suspended_limit(messages, plan)
    start = _summary_cut(plan.starts, tokens, budget, limit_index, reserve)
    pending = _pending_response(messages, plan)
    has_steps = bool(plan.result_at) and plan.result_at[-1] > current
    if has_steps and limit_index == current and start in (0, current) and _turn_over_budget(plan, decision, budget, reserve):
        last = pending if pending > current else newest
        target = int(budget * SUMMARY_TAIL_SHARE) - _reserve(budget, reserve)
        step = _step_cut(messages, plan, tokens, target, current, last)
        if step:
            start, decision.in_turn = step, True
    room = min(reserve, sum(tokens[:start]) // 2) * CHARS_PER_TOKEN - len(SUMMARY_HEADER)
    # A head too small to be worth a summary (it would not come out shorter) stays.
    if start > 0 and room >= MIN_SUMMARY_CHARS:
        decision.stage, decision.start, decision.room = "summary", start, room
    else:  # nothing worth summarizing: placeholders are the best effort
        decision.in_turn = False
    return decision


def _tail_cut(plan: _Plan, decision: _Decision, head: ModelRequest | None) -> int:
    """The placeholder cut when placeholdering everything does not fit: chosen on the tail
    after the summary ``head`` (or on the whole history, as a best effort, without one),
    never reaching the newest call's output."""
    start, tokens = decision.start, decision.tokens
    room = decision.budget - (message_tokens(head) if head is not None else 0)
    return min(plan.results_cut(tokens, room, start)[0], decision.whole_from)


class _Stopwatch:
    """Adds the CPU time since its last call (or its creation) to ``timings[name]``."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings
        self.last = time.process_time()

    def __call__(self, name: str) -> None:
        now = time.process_time()
        self.timings[name] = self.timings.get(name, 0.0) + now - self.last
        self.last = now

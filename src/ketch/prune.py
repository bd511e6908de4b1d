"""The pruning ladder and the provider-item repairs that must follow any pruning.

Everything here is a pure function over pydantic-ai messages: inputs are never mutated,
changed messages and parts are new objects (shallow copies, see ``_evolve``), unchanged ones are
shared. The ladder, tried in order until the history fits its budget:

1. ``reasoning`` — drop ``ThinkingPart``s of turns before the current one. The text and
   tool-call parts of a response that lost its reasoning lose their provider item ids too,
   so they are sent inline rather than as items that depended on the dropped reasoning.
2. ``tool_results`` — keep the widest recent run of tool results whole and replace the
   content of older ``ToolReturnPart``s with a one-line placeholder. The call and its
   (placeholder) result stay paired.
3. ``summary`` — replace the oldest whole turns by a summary from an auxiliary model call
   (``summarize``). Whole turns only, so provider-executed call/result pairs never split.

A turn starts at a ``ModelRequest`` holding a ``UserPromptPart``. The current turn's
prompt and any call still awaiting its result (a suspended approval) always stay.

After any stage, :func:`repair` runs: results whose call is gone are dropped and every
provider item id is stripped (:func:`strip_item_ids`), so nothing sent refers to an item
the provider may no longer hold or that depended on a dropped reasoning item.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Literal

from pydantic_ai.messages import (
    ModelMessage,
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

from .budget import (
    CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_CHARS,
    chars_to_tokens,
    content_chars,
    message_tokens,
    part_chars,
)

Stage = Literal["none", "reasoning", "tool_results", "summary"]
Summarize = Callable[[str], Awaitable[str]]

SUMMARY_HEADER = "[Summary of the earlier conversation, written when it was compacted]\n"
PLACEHOLDER_PREFIX = "[pruned: "
SUMMARY_RESERVE_TOKENS = 2_000
"""Room kept for the summary when choosing how many turns stage 3 replaces."""
MIN_SUMMARY_CHARS = 200

ITEM_REPLAY_PROVIDERS: frozenset[str] = frozenset({"openai", "azure"})
"""Providers whose provider-executed tool items are replayed *by id* (OpenAI Responses).
Their native call/result parts become inline text when ids are stripped; other providers'
native parts carry their payload inline and are kept as they are."""

_KEPT_THINKING_IDS = frozenset(
    {"redacted_thinking", "redacted_content", "content", "reasoning", "reasoning_content"}
)
"""``ThinkingPart.id`` values that are adapter sentinels, not provider item ids."""


@dataclass(frozen=True)
class PruneResult:
    """What the ladder did: the messages to send and the estimate before and after."""

    # Kept out of repr: asyncio (3.11) reprs a finished task's result when it restores the
    # SIGINT handler, and the repr of thousands of messages costs more than the pruning.
    messages: list[ModelMessage] = field(repr=False)
    tokens_before: int
    tokens_after: int
    stage: Stage

    @property
    def changed(self) -> bool:
        """Whether any pruning happened (the session reports one compaction per turn)."""
        return self.stage != "none"


# ----------------------------------------------------------------------------- rendering

_KEY_ARGS = ("path", "file_path", "command", "pattern", "query", "url", "name")
_SUMMARY_PART_CHARS = 1_500
_SUMMARY_TOTAL_CHARS = 300_000


def _clip(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters (an ellipsis marks a cut)."""
    if len(text) <= limit and "\n" not in text and "\t" not in text and "  " not in text:
        return text.strip()
    flat = " ".join(text[: limit * 2].split())
    if len(flat) > limit:
        return flat[: limit - 1] + "…"
    return flat + "…" if len(text) > limit * 2 else flat


def _key_arg(call: ToolCallPart | NativeToolCallPart | None) -> str:
    """The argument that says what a call was about (a path, a command, a query)."""
    if call is None:
        return ""
    args = call.args_as_dict()  # malformed JSON comes back as {"INVALID_JSON": raw}
    for key in _KEY_ARGS:
        if isinstance(args.get(key), str):
            return _clip(args[key], 80)
    for value in args.values():
        if isinstance(value, str) and value:
            return _clip(value, 80)
    return ""


def _size_text(content: Any) -> tuple[str, int]:
    if isinstance(content, str):
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        return f"{lines} lines, {len(content):,} chars", len(content)
    chars = content_chars(content)
    return f"{chars:,} chars", chars


def placeholder_for(part: ToolReturnPart, call: ToolCallPart | None) -> str | None:
    """A one-line stand-in for a tool result, or None when it would not be shorter.

    For example ``[pruned: read_file src/a.py → 412 lines, 13,020 chars]``. A result that
    is already a placeholder (from an earlier step's pruning) keeps it.
    """
    content = part.content
    if content.__class__ is str and content.startswith(PLACEHOLDER_PREFIX):
        return None
    size, chars = _size_text(content)
    key = _key_arg(call)
    text = f"{PLACEHOLDER_PREFIX}{part.tool_name}{' ' + key if key else ''} → {size}]"
    return text if len(text) < chars else None


def render_native_part(part: NativeToolCallPart | NativeToolReturnPart) -> str:
    """A provider-executed call or result as one line of plain text."""
    if isinstance(part, NativeToolCallPart):
        key = _key_arg(part)
        return f"[{part.tool_name} call{': ' + key if key else ''}]"
    content = part.content
    if isinstance(content, dict):
        sources = content.get("sources") or content.get("results") or []
        urls = [s.get("url") for s in sources if isinstance(s, dict) and s.get("url")]
        status = content.get("status")
        detail = ", ".join(str(u) for u in urls[:8]) if urls else str(status or "done")
    elif isinstance(content, list):
        urls = [s.get("url") for s in content if isinstance(s, dict) and s.get("url")]
        detail = ", ".join(str(u) for u in urls[:8]) if urls else f"{len(content)} items"
    else:
        detail = _clip(str(content), 200)
    return f"[{part.tool_name} result: {_clip(detail, 600)}]"


def _render_part(part: Any) -> str | None:
    if isinstance(part, UserPromptPart):
        content = part.content if isinstance(part.content, str) else " ".join(
            c if isinstance(c, str) else f"[{type(c).__name__}]" for c in part.content
        )
        return "User: " + _clip(content, _SUMMARY_PART_CHARS)
    if isinstance(part, TextPart):
        return "Assistant: " + _clip(part.content, _SUMMARY_PART_CHARS)
    if isinstance(part, (NativeToolCallPart, NativeToolReturnPart)):
        return render_native_part(part)
    if isinstance(part, ToolCallPart):
        return f"Tool call: {part.tool_name} {_clip(part.args_as_json_str(), 300)}"
    if isinstance(part, ToolReturnPart):
        content = part.content if isinstance(part.content, str) else repr(part.content)[:1_200]
        return f"Tool result ({part.tool_name}): {_clip(content, 600)}"
    return None


def render_for_summary(messages: Sequence[ModelMessage]) -> str:
    """A compact transcript of ``messages`` for the summarizing call.

    Reasoning is left out, long parts are clipped, and when the whole exceeds the cap the
    oldest lines are dropped first.
    """
    lines = [
        line
        for m in messages
        for p in m.parts
        if (line := _render_part(p)) is not None
    ]
    total = 0
    kept: list[str] = []
    for line in reversed(lines):
        total += len(line) + 1
        if total > _SUMMARY_TOTAL_CHARS:
            kept.append("[older conversation omitted]")
            break
        kept.append(line)
    return "\n".join(reversed(kept))


# ----------------------------------------------------------------------------- structure


def turn_starts(messages: Sequence[ModelMessage]) -> list[int]:
    """Indices of the requests that open a turn (those holding a ``UserPromptPart``)."""
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
    ]


def _evolve(obj: Any, **changes: Any) -> Any:
    """A new ``obj`` with ``changes`` applied; the original is untouched.

    Like ``dataclasses.replace`` but without re-running ``__post_init__``: the messages
    and parts here are already valid pydantic-ai objects, and re-validating every message
    of a long history on each prune costs more than the rest of the ladder.
    """
    new = object.__new__(obj.__class__)
    fields = obj.__dict__.copy()
    fields.update(changes)
    new.__dict__ = fields
    return new


def _is_call(part: Any) -> bool:
    return isinstance(part, ToolCallPart)


def _result_call_id(part: Any) -> str | None:
    """The call id a request part answers, or None for parts that answer no call."""
    if isinstance(part, ToolReturnPart):
        return part.tool_call_id
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return part.tool_call_id
    return None


# ----------------------------------------------------------------------------- repairs


def _split_combined(call_id: str) -> str:
    # Older histories stored the Responses item id inside the call id as "call_…|fc_…".
    return call_id.split("|", 1)[0] if "|" in call_id else call_id


def _without_id(part: Any) -> Any:
    """``part`` with ``id=None``: the hot case of :func:`_evolve`, without keyword packing."""
    new = object.__new__(part.__class__)
    fields = part.__dict__.copy()
    fields["id"] = None
    new.__dict__ = fields
    return new


def _stripped_response(
    message: ModelResponse, inline_native_from: Collection[str], drop_thinking: bool, seen: set[str] | None = None
) -> ModelResponse | None:
    """The response with no provider item ids (and no reasoning if ``drop_thinking``);
    None when nothing is left of it. The ids of the calls it keeps are added to ``seen``."""
    parts: list[Any] = []
    changed = False
    for part in message.parts:
        cls = part.__class__
        new = part
        # Exact classes first: they are nearly every part of a long history.
        if cls is TextPart:
            if part.id is not None:
                new = _without_id(part)
        elif cls is ToolCallPart:
            call_id = part.tool_call_id
            if "|" in call_id:
                call_id = _split_combined(call_id)
                new = _evolve(part, id=None, tool_call_id=call_id)
            elif part.id is not None:
                new = _without_id(part)
            if seen is not None:
                seen.add(call_id)
        elif isinstance(part, ThinkingPart):
            if drop_thinking:
                changed = True
                continue
            if part.id is not None and part.id not in _KEPT_THINKING_IDS:
                new = _evolve(part, id=None)
        elif isinstance(part, (NativeToolCallPart, NativeToolReturnPart)):
            if (part.provider_name or message.provider_name) in inline_native_from:
                new = TextPart(render_native_part(part))
        elif isinstance(part, ToolCallPart):
            call_id = _split_combined(part.tool_call_id)
            if part.id is not None or call_id != part.tool_call_id:
                new = _evolve(part, id=None, tool_call_id=call_id)
            if seen is not None:
                seen.add(call_id)
        elif isinstance(part, TextPart) and part.id is not None:
            new = _evolve(part, id=None)
        if new is not part:
            changed = True
        parts.append(new)
    if not parts:
        return None
    return _evolve(message, parts=parts) if changed else message


def _stripped_request(
    message: ModelRequest, placeholders: dict[int, str] | None, seen_calls: set[str] | None
) -> ModelRequest | None:
    """The request with legacy combined call ids split, results whose call is not in
    ``seen_calls`` dropped (when given) and results in ``placeholders`` shortened."""
    parts: list[Any] = []
    changed = False
    for part in message.parts:
        new = part
        cid = _result_call_id(part)
        if cid is not None:
            call_id = _split_combined(cid)
            if seen_calls is not None and call_id not in seen_calls:
                changed = True
                continue
            text = placeholders.get(id(part)) if placeholders else None
            if text is not None:
                new = _evolve(part, content=text, tool_call_id=call_id)
            elif call_id != cid:
                new = _evolve(part, tool_call_id=call_id)
        changed = changed or new is not part
        parts.append(new)
    if not parts:
        return None
    return _evolve(message, parts=parts) if changed else message


def _rebuild(
    messages: Sequence[ModelMessage],
    *,
    inline_native_from: Collection[str],
    drop_orphans: bool,
    thin_before: int = 0,
    placeholders: dict[int, str] | None = None,
    placeholder_before: int = 0,
    start: int = 0,
    sources: list[int] | None = None,
) -> list[ModelMessage]:
    """One pass applying every change the ladder and the repairs decided, from ``start``.

    When ``sources`` is given, the input index of each output message is appended to it.
    """
    out: list[ModelMessage] = []
    seen: set[str] | None = set() if drop_orphans else None
    for i in range(start, len(messages)):
        m = messages[i]
        if isinstance(m, ModelResponse):
            new_response = _stripped_response(m, inline_native_from, i < thin_before, seen)
            if new_response is None:
                continue
            out.append(new_response)
        else:
            new_request = _stripped_request(m, placeholders if i < placeholder_before else None, seen)
            if new_request is None:
                continue
            out.append(new_request)
        if sources is not None:
            sources.append(i)
    return out


def strip_item_ids(
    messages: Sequence[ModelMessage],
    *,
    inline_native_from: Collection[str] = ITEM_REPLAY_PROVIDERS,
) -> list[ModelMessage]:
    """The history with no provider item ids, so every part is sent inline by content.

    Clears ``id`` on text, reasoning and tool-call parts (adapter sentinels such as
    Anthropic's ``redacted_thinking`` are not item ids and are kept), splits legacy
    ``call|item`` tool-call ids on calls and their results alike, and rewrites
    provider-executed call/result parts of ``inline_native_from`` providers (whose only
    replay form is the item id) as plain text. Also the answer to a 404 "Item with id … not
    found": the same history, sent by content.
    """
    return _rebuild(messages, inline_native_from=inline_native_from, drop_orphans=False)


def repair(
    messages: Sequence[ModelMessage],
    *,
    inline_native_from: Collection[str] = ITEM_REPLAY_PROVIDERS,
) -> list[ModelMessage]:
    """Make a pruned history sendable: drop orphaned results and strip provider item ids."""
    return _rebuild(messages, inline_native_from=inline_native_from, drop_orphans=True)


def is_item_not_found(error: BaseException) -> bool:
    """Whether ``error`` is the provider's 404 "Item with id '…' not found."

    Looks through exception groups and ``__cause__`` chains for a
    ``pydantic_ai.exceptions.ModelHTTPError`` with status 404 whose body or message says an
    item was not found.
    """
    from pydantic_ai.exceptions import ModelHTTPError

    pending: list[BaseException] = [error]
    seen: set[int] = set()
    while pending:
        exc = pending.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, ModelHTTPError) and exc.status_code == 404:
            text = f"{exc.body} {exc.message}".lower()
            if "item with id" in text and "not found" in text:
                return True
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        if exc.__cause__ is not None:
            pending.append(exc.__cause__)
    return False


# ----------------------------------------------------------------------------- the ladder


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
    results: dict[int, tuple[int, list[ToolReturnPart]]]
    """Requests holding plain tool results: index → (characters, those results)."""
    saved: list[int] = field(default_factory=list)
    """Tokens placeholdering a message's tool results would save (see ``price_results``)."""
    placeholders: dict[int, str] = field(default_factory=dict)
    """Placeholder text by ``id()`` of the ``ToolReturnPart`` it would replace."""

    def price_results(self) -> None:
        """Fill ``saved`` and ``placeholders``; only needed once stage 2 is reached."""
        if self.saved:
            return
        self.saved = [0] * len(self.full)
        for i, (chars, parts) in self.results.items():
            shrink = 0
            for p in parts:
                text = placeholder_for(p, self.calls.get(p.tool_call_id))
                if text is not None:
                    self.placeholders[id(p)] = text
                    shrink += content_chars(p.content) - len(text)
            if shrink:
                self.saved[i] = self.full[i] - chars_to_tokens(chars - shrink)


def _plan(messages: Sequence[ModelMessage]) -> _Plan:
    full: list[int] = []
    thinned: list[int] = []
    starts: list[int] = []
    calls: dict[str, ToolCallPart] = {}
    answered: set[str] = set()
    plain: list[bool] = []
    results: dict[int, tuple[int, list[ToolReturnPart]]] = {}
    for i, m in enumerate(messages):
        chars = MESSAGE_OVERHEAD_CHARS
        is_plain = True
        if isinstance(m, ModelResponse):
            kept = MESSAGE_OVERHEAD_CHARS
            any_kept = False
            for p in m.parts:
                c = part_chars(p)
                chars += c
                if isinstance(p, ThinkingPart):
                    continue
                any_kept = True
                if isinstance(p, (TextPart, ToolCallPart)) and p.id:
                    c -= len(p.id)
                kept += c
                if isinstance(p, ToolCallPart):
                    calls[p.tool_call_id] = p
                    is_plain = is_plain and "|" not in p.tool_call_id
                elif isinstance(p, (NativeToolCallPart, NativeToolReturnPart)):
                    is_plain = False
            full.append(chars_to_tokens(chars))
            thinned.append(chars_to_tokens(kept) if any_kept else 0)
            plain.append(is_plain)
            continue
        plain_results: list[ToolReturnPart] = []
        for p in m.parts:
            chars += part_chars(p)
            if type(p) is ToolReturnPart:
                answered.add(p.tool_call_id)
                is_plain = is_plain and "|" not in p.tool_call_id
                plain_results.append(p)
            elif (cid := _result_call_id(p)) is not None:
                answered.add(cid)
            elif isinstance(p, UserPromptPart) and (not starts or starts[-1] != i):
                starts.append(i)
        if plain_results:
            results[i] = (chars, plain_results)
        tokens = chars_to_tokens(chars)
        full.append(tokens)
        thinned.append(tokens)
        plain.append(is_plain)
    return _Plan(full, thinned, starts, set(calls) - answered, plain, calls, results)


def _tokens_after(
    messages: Sequence[ModelMessage],
    out: Sequence[ModelMessage],
    sources: Sequence[int],
    plan: _Plan,
    thin_before: int,
    placeholder_before: int,
) -> int:
    """Estimated tokens of ``out``, reusing the plan's arithmetic wherever it is exact."""
    total = 0
    for new, i in zip(out, sources):
        old = messages[i]
        if new is old:
            total += plan.full[i]
        elif not plan.plain[i]:
            total += message_tokens(new)
        elif isinstance(old, ModelResponse):
            # Responses of earlier turns lost reasoning and ids: exactly the thinned count.
            total += plan.thinned[i] if i < thin_before else message_tokens(new)
        elif len(new.parts) == len(old.parts):
            total += plan.full[i] - (plan.saved[i] if i < placeholder_before else 0)
        else:  # a result was dropped as an orphan
            total += message_tokens(new)
    return total


def _results_cut(tokens: Sequence[int], saved: Sequence[int], budget: int) -> tuple[int, bool]:
    """The earliest index such that placeholdering results before it fits ``budget``
    (the widest recent run of whole results), and whether it fits at all."""
    excess = sum(tokens) - budget
    if excess <= 0:
        return 0, True
    if not tokens:
        return 0, False
    cumulative = list(accumulate(saved))
    cut = min(bisect_left(cumulative, excess) + 1, len(tokens))
    fits = cumulative[cut - 1] >= excess
    # Messages whose placeholder saves nothing need not be inside the placeholdered run.
    while cut > 0 and saved[cut - 1] == 0:
        cut -= 1
    return cut, fits


def _summary_cut(starts: list[int], small: list[int], budget: int, limit_index: int) -> int:
    """The smallest turn start (≤ ``limit_index``) whose tail fits once placeholdered;
    ``small`` holds each message's placeholdered tokens."""
    starts = [s for s in starts if 0 < s <= limit_index]
    if not starts:
        return 0
    tail = sum(small[starts[0] :])
    for index, start in enumerate(starts):
        if index:
            tail -= sum(small[starts[index - 1] : start])
        if tail + SUMMARY_RESERVE_TOKENS <= budget:
            return start
    return starts[-1]


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


async def _summary_message(
    head: Sequence[ModelMessage], summarize: Summarize | None, max_chars: int
) -> ModelRequest:
    if summarize is None:
        body = f"({len(turn_starts(head)) or 1} earlier turn(s) were removed to fit the context window.)"
    else:
        body = (await summarize(render_for_summary(head))).strip()
    return ModelRequest(parts=[UserPromptPart(SUMMARY_HEADER + body[:max_chars])])


async def prune(
    messages: Sequence[ModelMessage],
    *,
    limit: int,
    reserved: int = 0,
    summarize: Summarize | None = None,
    inline_native_from: Collection[str] = ITEM_REPLAY_PROVIDERS,
) -> PruneResult:
    """Run the ladder until the request fits ``limit`` tokens, then repair.

    The rungs are decided from token arithmetic over one pass, and the new history is
    built in one more pass, so a long history costs two walks rather than one per rung.

    Args:
        messages: The history about to be sent; not modified.
        limit: Tokens the whole request may hold (context window × threshold).
        reserved: Tokens of the rest of the request (instructions, tool schemas).
        summarize: Awaitable auxiliary call (no tools, no search) turning a rendered
            transcript into a summary; without it, stage 3 removes turns with a short note.
        inline_native_from: Passed to :func:`strip_item_ids`.

    Returns:
        A :class:`PruneResult`; ``stage`` is the last rung used ("none" when it fit).
    """
    plan = _plan(messages)
    before = sum(plan.full) + reserved
    if before <= limit:
        return PruneResult(list(messages), before, before, "none")
    budget = limit - reserved
    current = plan.starts[-1] if plan.starts else 0
    tokens = plan.thinned[:current] + plan.full[current:]
    stage: Stage = "reasoning"
    start, cut, head = 0, 0, None
    if sum(tokens) > budget:
        stage = "tool_results"
        plan.price_results()
        cut, fits = _results_cut(tokens, plan.saved, budget)
        if not fits:
            stage = "summary"
            small = [t - s for t, s in zip(tokens, plan.saved)]
            start = _summary_cut(plan.starts, small, budget, _suspended_limit(messages, plan))
            room = min(SUMMARY_RESERVE_TOKENS, sum(tokens[:start]) // 2) * CHARS_PER_TOKEN
            room -= len(SUMMARY_HEADER)
            # A head too small to be worth a summary (it would not come out shorter) stays.
            if start > 0 and room >= MIN_SUMMARY_CHARS:
                head = await _summary_message(messages[:start], summarize, room)
            else:
                start, stage = 0, "tool_results"  # nothing worth summarizing: best effort
            reserve = message_tokens(head) if head is not None else 0
            tail_cut, _ = _results_cut(tokens[start:], plan.saved[start:], budget - reserve)
            cut = start + tail_cut
    sources: list[int] = []
    out = _rebuild(
        messages,
        inline_native_from=inline_native_from,
        drop_orphans=True,
        thin_before=current,
        placeholders=plan.placeholders,
        placeholder_before=cut,
        start=start,
        sources=sources,
    )
    after = _tokens_after(messages, out, sources, plan, current, cut) + reserved
    if head is not None:
        out.insert(0, head)
        after += message_tokens(head)
    return PruneResult(out, before, after, stage)


__all__ = [
    "ITEM_REPLAY_PROVIDERS",
    "PruneResult",
    "SUMMARY_HEADER",
    "Summarize",
    "is_item_not_found",
    "prune",
    "repair",
    "strip_item_ids",
    "turn_starts",
]

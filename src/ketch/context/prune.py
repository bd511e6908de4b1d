"""The pruning ladder and the provider-item repairs that must follow any pruning.

Everything here is a pure function over pydantic-ai messages: inputs are never mutated,
changed messages and parts are new objects (shallow copies, see ``_evolve`` and ``_copier``),
unchanged ones are shared. The ladder, tried in order until the history fits its budget:

1. ``reasoning`` — drop ``ThinkingPart``s of turns before the current one. The text and
   tool-call parts of a response that lost its reasoning lose their provider item ids too,
   so they are sent inline rather than as items that depended on the dropped reasoning.
2. ``tool_results`` — keep the widest recent run of tool results whole and replace the
   content of older ``ToolReturnPart``s with a one-line placeholder. The call and its
   (placeholder) result stay paired.
3. ``summary`` — replace the oldest whole turns by a summary from an auxiliary model call
   (``summarize``), as many as it takes for the turns kept, as they are, to fit half the
   budget (:data:`SUMMARY_TAIL_SHARE`). Whole turns only, so provider-executed call/result
   pairs never split. When the current turn alone is too big, every earlier turn goes and
   the current turn's older results are placeholdered as in stage 2.

A turn starts at a ``ModelRequest`` holding a ``UserPromptPart``. The current turn's
prompt and any call still awaiting its result (a suspended approval) always stay.

After any stage, :func:`repair` runs: results whose call is gone are dropped and every
provider item id is stripped (:func:`strip_item_ids`), so nothing sent refers to an item
the provider may no longer hold or that depended on a dropped reasoning item.
"""

from __future__ import annotations

import keyword
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
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
from pydantic_core import to_json

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
from ketch.context.collector import collector_paused

Stage = Literal["none", "reasoning", "tool_results", "summary"]
Summarize = Callable[[str], Awaitable[str]]

SUMMARY_HEADER = "[Summary of the earlier conversation, written when it was compacted]\n"
PLACEHOLDER_PREFIX = "[pruned: "
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
    args = call.args
    if args.__class__ is not dict:
        args = call.args_as_dict()  # malformed JSON comes back as {"INVALID_JSON": raw}
    for key in _KEY_ARGS:
        value = args.get(key)
        if isinstance(value, str):
            return _clip(value, 80)
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


_SHORTEST_PLACEHOLDER = len(PLACEHOLDER_PREFIX) + len(" → 0 chars]")
"""Characters of the shortest placeholder :func:`placeholder_for` writes, besides the tool
name (no key argument, a one-digit size without lines)."""


def placeholder_for(part: ToolReturnPart, call: ToolCallPart | None) -> str | None:
    """A one-line stand-in for a tool result, or None when it would not be shorter.

    For example ``[pruned: read_file src/a.py → 412 lines, 13,020 chars]``. A result that
    is already a placeholder (from an earlier step's pruning) keeps it.
    """
    content = part.content
    if content.__class__ is str:  # nearly every result: _size_text inlined
        if content.startswith(PLACEHOLDER_PREFIX):
            return None
        chars = len(content)
        lines = content.count("\n") + (0 if not content or content[-1] == "\n" else 1)
        key = _key_arg(call)
        # One f-string (no separate size string); below 1,000 the thousands separator
        # changes nothing, and plain str() is much cheaper.
        text = (
            f"{PLACEHOLDER_PREFIX}{part.tool_name}{' ' if key else ''}{key}"
            f" → {lines} lines, {chars if chars < 1000 else format(chars, ',')} chars]"
        )
    else:
        size, chars = _size_text(content)
        key = _key_arg(call)
        text = f"{PLACEHOLDER_PREFIX}{part.tool_name}{' ' if key else ''}{key} → {size}]"
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


def _attachment_placeholder(item: Any) -> str:
    """What stands for an attachment in a summary: the whole image goes, its name stays."""
    media = str(getattr(item, "media_type", "") or "")
    if media.startswith("image/"):
        return f"[image: {getattr(item, 'identifier', None) or 'attached'}, not kept]"
    return f"[{type(item).__name__}]"


def _render_part(part: Any) -> str | None:
    cls = part.__class__
    # Exact classes first: they are nearly every part of a long history.
    if cls is ThinkingPart:
        return None
    if cls is TextPart:
        return "Assistant: " + _clip(part.content, _SUMMARY_PART_CHARS)
    if cls is ToolCallPart:
        args = part.args
        # ``args_as_json_str`` of non-empty dict arguments, without its two method calls.
        text = to_json(args).decode() if args and args.__class__ is dict else part.args_as_json_str()
        return f"Tool call: {part.tool_name} {_clip(text, 300)}"
    if cls is ToolReturnPart and part.content.__class__ is str:
        return f"Tool result ({part.tool_name}): {_clip(part.content, 600)}"
    if isinstance(part, UserPromptPart):
        content = part.content if isinstance(part.content, str) else " ".join(
            c if isinstance(c, str) else _attachment_placeholder(c) for c in part.content
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


EARLIER_SUMMARY_HEADING = "Summary of the conversation before this transcript:\n"
TRANSCRIPT_HEADING = "\n\nThe conversation since:\n"


def earlier_summary(message: ModelMessage) -> str | None:
    """The text of a summary an earlier compaction left as ``message``, or None."""
    if message.__class__ is ModelRequest and len(message.parts) == 1:
        part = message.parts[0]
        if isinstance(part, UserPromptPart) and isinstance(part.content, str) and part.content.startswith(SUMMARY_HEADER):
            return part.content[len(SUMMARY_HEADER) :].strip()
    return None


def render_for_summary(messages: Sequence[ModelMessage]) -> str:
    """A compact transcript of ``messages`` for the summarizing call.

    Reasoning is left out, long parts are clipped, and when the whole exceeds the cap the
    oldest lines are dropped first. A summary an earlier compaction left at the start is
    never dropped or clipped: it leads the transcript whole, so what it held is carried
    into the new summary however long the conversation since has been.
    """
    earlier = earlier_summary(messages[0]) if messages else None
    if earlier is not None:
        messages = messages[1:]
    cap = _SUMMARY_TOTAL_CHARS - (len(earlier) if earlier is not None else 0)
    # Rendered newest first, so the parts that would be dropped are never rendered.
    total = 0
    kept: list[str] = []
    newest_first = (
        line for m in reversed(messages) for p in reversed(m.parts) if (line := _render_part(p)) is not None
    )
    for line in newest_first:
        total += len(line) + 1
        if total > cap:
            kept.append("[older conversation omitted]")
            break
        kept.append(line)
    body = "\n".join(reversed(kept))
    return body if earlier is None else EARLIER_SUMMARY_HEADING + earlier + TRANSCRIPT_HEADING + body


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


def _copier(sample: Any, *replaced: str) -> Callable[..., Any]:
    """A function ``copy(obj, *values)``: a shallow copy of ``obj``, an instance of exactly
    ``sample``'s class, with the attributes named in ``replaced`` set to ``values``.

    Like :func:`_evolve`, but attribute by attribute, over the attributes ``sample`` was
    built with: the dataclass fields and whatever ``__post_init__`` adds, which every
    instance of these pydantic-ai classes has (a loaded history included). Going through
    ``__dict__`` instead builds a dict on the original and another on the copy where Python
    otherwise keeps a compact array; the rebuilt part of a long history is thousands of
    such objects, and each of those dicts costs time to build and more for the cyclic
    collector to scan. An instance lacking one of those attributes is copied by
    :func:`_evolve`.
    """
    cls = sample.__class__
    names = list(vars(sample))
    names += [name for name in replaced if name not in names]
    if not all(name.isidentifier() and not keyword.iskeyword(name) for name in names):
        return lambda obj, *values: _evolve(obj, **dict(zip(replaced, values)))
    params = [f"value_{index}" for index in range(len(replaced))]
    assigned = [
        f"    new.{name} = {params[replaced.index(name)] if name in replaced else 'obj.' + name}\n"
        for name in names
    ]
    changes = ", ".join(f"{name!r}: {param}" for name, param in zip(replaced, params))
    source = (
        f"def copy(obj, {', '.join(params)}):\n"
        "  try:\n"
        "    new = new_object(cls)\n"
        + "".join(assigned)
        + "    return new\n"
        "  except AttributeError:\n"
        f"    return evolve(obj, **{{{changes}}})\n"
    )
    namespace: dict[str, Any] = {"new_object": object.__new__, "cls": cls, "evolve": _evolve}
    exec(source, namespace)  # noqa: S102 - straight-line attribute copies, as dataclasses builds __init__
    return namespace["copy"]


# Copies for the exact classes that make up nearly all of a long history.
_text_without_id = _copier(TextPart(""), "id")
_call_without_id = _copier(ToolCallPart("tool"), "id")
_result_with = _copier(ToolReturnPart("tool", ""), "content", "tool_call_id")
_response_with_parts = _copier(ModelResponse(parts=[]), "parts")
_request_with_parts = _copier(ModelRequest(parts=[]), "parts")


def _stripped_response_part(
    part: Any, provider_name: str | None, inline_native_from: Collection[str], seen: set[str] | None
) -> Any:
    """A response part other than a plain text, call or reasoning part, with no item id.

    Provider-executed parts of ``inline_native_from`` providers become text; the id of a
    call kept is added to ``seen``.
    """
    if isinstance(part, (NativeToolCallPart, NativeToolReturnPart)):
        if (part.provider_name or provider_name) in inline_native_from:
            return TextPart(render_native_part(part))
        return part
    if isinstance(part, ToolCallPart):
        call_id = _split_combined(part.tool_call_id)
        if seen is not None:
            seen.add(call_id)
        if part.id is not None or call_id != part.tool_call_id:
            return _evolve(part, id=None, tool_call_id=call_id)
        return part
    if isinstance(part, TextPart) and part.id is not None:
        return _evolve(part, id=None)
    return part


def _rebuild(
    messages: Sequence[ModelMessage],
    *,
    inline_native_from: Collection[str],
    drop_orphans: bool,
    thin_before: int = 0,
    placeholders: dict[int, str] | None = None,
    placeholder_before: int = 0,
    start: int = 0,
    plan: _Plan | None = None,
) -> tuple[list[ModelMessage], int]:
    """One pass applying every change the ladder and the repairs decided, from ``start``.

    Responses lose every provider item id (and their reasoning before ``thin_before``);
    results whose call is not in the output are dropped when ``drop_orphans``; results of
    requests before ``placeholder_before`` are replaced by their text in ``placeholders``
    (keyed by the result's ``id()``). Parts and messages that change are shallow copies,
    the rest are shared.

    Returns the new history and, when ``plan`` describes ``messages``, its estimated tokens
    (0 otherwise), taken from the plan's counts wherever they are exact.
    """
    out: list[ModelMessage] = []
    seen: set[str] | None = set() if drop_orphans else None
    tokens = 0
    if plan is not None:
        full, thinned, plain, saved = plan.full, plan.thinned, plan.plain, plan.saved
    for i in range(start, len(messages)):
        m = messages[i]
        cls = m.__class__
        parts: list[Any] = []
        changed = False
        if cls is ModelResponse or (cls is not ModelRequest and isinstance(m, ModelResponse)):
            drop_thinking = i < thin_before
            for part in m.parts:
                part_cls = part.__class__
                # Exact classes first: they are nearly every part of a long history.
                if part_cls is TextPart:
                    if part.id is not None:
                        part = _text_without_id(part, None)
                        changed = True
                elif part_cls is ToolCallPart:
                    call_id = part.tool_call_id
                    if "|" in call_id:
                        call_id = _split_combined(call_id)
                        part = _evolve(part, id=None, tool_call_id=call_id)
                        changed = True
                    elif part.id is not None:
                        part = _call_without_id(part, None)
                        changed = True
                    if seen is not None:
                        seen.add(call_id)
                elif part_cls is ThinkingPart or isinstance(part, ThinkingPart):
                    if drop_thinking:
                        changed = True
                        continue
                    if part.id is not None and part.id not in _KEPT_THINKING_IDS:
                        part = _evolve(part, id=None)
                        changed = True
                else:
                    new = _stripped_response_part(part, m.provider_name, inline_native_from, seen)
                    if new is not part:
                        part = new
                        changed = True
                parts.append(part)
            if not parts:
                continue
            new_message = m
            if changed:  # a copy carrying ``parts`` (the generated copier for the exact class)
                new_message = _response_with_parts(m, parts) if cls is ModelResponse else _evolve(m, parts=parts)
            if plan is not None:
                if not changed:
                    tokens += full[i]
                elif drop_thinking and plain[i]:
                    # Responses of earlier turns lost reasoning and ids: exactly the thinned count.
                    tokens += thinned[i]
                else:
                    tokens += message_tokens(new_message)
        else:
            shorten = placeholders if i < placeholder_before and placeholders else None
            for part in m.parts:
                part_cls = part.__class__
                if part_cls is ToolReturnPart:
                    cid = part.tool_call_id
                elif part_cls is UserPromptPart or (cid := _result_call_id(part)) is None:
                    parts.append(part)
                    continue
                call_id = _split_combined(cid) if "|" in cid else cid
                if seen is not None and call_id not in seen:
                    changed = True  # an orphan: its call is not in the history sent
                    continue
                text = shorten.get(id(part)) if shorten is not None else None
                if text is not None:
                    if part_cls is ToolReturnPart:
                        part = _result_with(part, text, call_id)
                    else:
                        part = _evolve(part, content=text, tool_call_id=call_id)
                    changed = True
                elif call_id != cid:
                    part = _evolve(part, tool_call_id=call_id)
                    changed = True
                parts.append(part)
            if not parts:
                continue
            new_message = m
            if changed:
                new_message = _request_with_parts(m, parts) if cls is ModelRequest else _evolve(m, parts=parts)
            if plan is not None:
                if not changed:
                    tokens += full[i]
                elif plain[i] and len(parts) == len(m.parts):
                    tokens += full[i] - (saved[i] if i < placeholder_before else 0)
                else:  # a result was dropped as an orphan, or ids were split
                    tokens += message_tokens(new_message)
        out.append(new_message)
    return out, tokens


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
    return _rebuild(messages, inline_native_from=inline_native_from, drop_orphans=False)[0]


def repair(
    messages: Sequence[ModelMessage],
    *,
    inline_native_from: Collection[str] = ITEM_REPLAY_PROVIDERS,
) -> list[ModelMessage]:
    """Make a pruned history sendable: drop orphaned results and strip provider item ids."""
    return _rebuild(messages, inline_native_from=inline_native_from, drop_orphans=True)[0]


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


def _summary_cut(starts: list[int], tokens: Sequence[int], budget: int, limit_index: int) -> int:
    """The smallest turn start (≤ ``limit_index``) whose tail, as ``tokens`` counts it (earlier
    turns without reasoning), fits :data:`SUMMARY_TAIL_SHARE` of ``budget`` beside room for
    the summary; the latest allowed start when none fits (0: no turn may be cut)."""
    target = int(budget * SUMMARY_TAIL_SHARE) - SUMMARY_RESERVE_TOKENS
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


def _summary_request(body: str, max_chars: int) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(SUMMARY_HEADER + body.strip()[:max_chars])])


def _removed_note(head: Sequence[ModelMessage]) -> str:
    """The summary's body when there is no summarizer: how many turns went."""
    return f"({len(turn_starts(head)) or 1} earlier turn(s) were removed to fit the context window.)"


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


def _decide(messages: Sequence[ModelMessage], plan: _Plan, budget: int, lap: _Stopwatch | None) -> _Decision:
    """The rung the history needs and its cut points, from token arithmetic over the plan."""
    current = plan.starts[-1] if plan.starts else 0
    tokens = plan.thinned[:current] + plan.full[current:]
    decision = _Decision("reasoning", current, tokens, budget)
    if sum(tokens) <= budget:
        return decision
    decision.stage = "tool_results"
    fits = False
    # When the bound says stage 2 cannot be enough, no placeholder is priced to say so.
    if not plan.cannot_fit(tokens, budget):
        decision.cut, fits = plan.results_cut(tokens, budget)
    if lap:
        lap("price")
    if fits:
        return decision
    decision.tail_cut = True
    limit_index = _suspended_limit(messages, plan)
    start = _summary_cut(plan.starts, tokens, budget, limit_index)
    room = min(SUMMARY_RESERVE_TOKENS, sum(tokens[:start]) // 2) * CHARS_PER_TOKEN - len(SUMMARY_HEADER)
    # A head too small to be worth a summary (it would not come out shorter) stays.
    if start > 0 and room >= MIN_SUMMARY_CHARS:
        decision.stage, decision.start, decision.room = "summary", start, room
    # else nothing worth summarizing: placeholders are the best effort
    return decision


def _tail_cut(plan: _Plan, decision: _Decision, head: ModelRequest | None) -> int:
    """The placeholder cut when placeholdering everything does not fit: chosen on the tail
    after the summary ``head`` (or on the whole history, as a best effort, without one)."""
    start, tokens = decision.start, decision.tokens
    room = decision.budget - (message_tokens(head) if head is not None else 0)
    return plan.results_cut(tokens, room, start)[0]


async def prune(
    messages: Sequence[ModelMessage],
    *,
    limit: int,
    reserved: int = 0,
    summarize: Summarize | None = None,
    inline_native_from: Collection[str] = ITEM_REPLAY_PROVIDERS,
    timings: dict[str, float] | None = None,
) -> PruneResult:
    """Run the ladder until the request fits ``limit`` tokens, then repair.

    The rungs are decided from token arithmetic over one pass, and the new history is
    built in one more pass, so a long history costs two walks rather than one per rung.
    Tool results are priced (their placeholders written) newest first, only as far back as
    the decision needs; the summary transcript is rendered newest first up to its cap.
    Both walks allocate thousands of objects and free almost none, so they run with the
    cyclic collector paused (``collector_paused``); the summarize call does not.

    Args:
        messages: The history about to be sent; not modified.
        limit: Tokens the whole request may hold (context window × threshold).
        reserved: Tokens of the rest of the request (instructions, tool schemas).
        summarize: Awaitable auxiliary call (no tools, no search) turning a rendered
            transcript into a summary; without it, stage 3 removes turns with a short note.
        inline_native_from: Passed to :func:`strip_item_ids`.
        timings: When given, CPU seconds are added to it under "plan" (counting every
            message), "price" (tool-result placeholders), "summary" (transcript and the
            summarize call) and "rebuild" (the new history); for benchmarks.

    Returns:
        A :class:`PruneResult`; ``stage`` is the last rung used ("none" when it fit).
    """
    lap = _Stopwatch(timings) if timings is not None else None
    transcript = None
    with collector_paused():
        plan = _plan(messages)
        if lap:
            lap("plan")
        before = sum(plan.full) + reserved
        if before <= limit:
            return PruneResult(list(messages), before, before, "none")
        decision = _decide(messages, plan, limit - reserved, lap)
        if decision.stage == "summary" and summarize is not None:
            transcript = render_for_summary(messages[: decision.start])
    head = None
    if decision.stage == "summary":
        body = _removed_note(messages[: decision.start]) if transcript is None else await summarize(transcript)
        head = _summary_request(body, decision.room)
        if lap:
            lap("summary")
    with collector_paused():
        if decision.tail_cut:
            decision.cut = _tail_cut(plan, decision, head)
        if lap:
            lap("price")
        out, after = _rebuild(
            messages,
            inline_native_from=inline_native_from,
            drop_orphans=True,
            thin_before=decision.current,
            placeholders=plan.placeholders,
            placeholder_before=decision.cut,
            start=decision.start,
            plan=plan,
        )
        after += reserved
        if head is not None:
            out.insert(0, head)
            after += message_tokens(head)
        if lap:
            lap("rebuild")
    return PruneResult(out, before, after, decision.stage)


class _Stopwatch:
    """Adds the CPU time since its last call (or its creation) to ``timings[name]``."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings
        self.last = time.process_time()

    def __call__(self, name: str) -> None:
        now = time.process_time()
        self.timings[name] = self.timings.get(name, 0.0) + now - self.last
        self.last = now


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

"""The one pass that rebuilds a history with every change the ladder and the repairs decided.

Pure: inputs are never mutated; changed messages and parts are new shallow copies
(``_evolve``, ``_copier``), unchanged ones are shared.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Collection, Sequence
from typing import Any

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

from ketch.context.reminders import is_reminder
from ketch.context.budget import message_tokens
from ketch.context.rendering import render_native_part


ITEM_REPLAY_PROVIDERS: frozenset[str] = frozenset({"openai", "azure"})
"""Providers whose provider-executed tool items are replayed *by id* (OpenAI Responses).
Their native call/result parts become inline text when ids are stripped; other providers'
native parts carry their payload inline and are kept as they are."""

_KEPT_THINKING_IDS = frozenset(
    {"redacted_thinking", "redacted_content", "content", "reasoning", "reasoning_content"}
)
"""``ThinkingPart.id`` values that are adapter sentinels, not provider item ids."""


def turn_starts(messages: Sequence[ModelMessage]) -> list[int]:
    """Indices of the requests that open a turn (those holding a ``UserPromptPart`` that is not
    a state reminder)."""
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) and not is_reminder(p) for p in m.parts)
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


def _keepable(response: ModelMessage) -> bool:
    """Whether a response can go back exactly as it came: no legacy combined call ids (their
    results are split, so the call must be too)."""
    for p in response.parts:
        if isinstance(p, ToolCallPart) and "|" in p.tool_call_id:
            return False
    return True


def _rebuild(
    messages: Sequence[ModelMessage],
    *,
    inline_native_from: Collection[str],
    drop_orphans: bool,
    thin_before: int = 0,
    placeholders: dict[int, str] | None = None,
    placeholder_before: int = 0,
    start: int = 0,
    plan: Any = None,
    keep_ids_at: int = -1,
) -> tuple[list[ModelMessage], int]:
    """One pass applying every change the ladder and the repairs decided, from ``start``.

    Responses lose every provider item id (and their reasoning before ``thin_before``);
    results whose call is not in the output are dropped when ``drop_orphans``; results of
    requests before ``placeholder_before`` are replaced by their text in ``placeholders``
    (keyed by the result's ``id()``). Parts and messages that change are shallow copies,
    the rest are shared. The response at ``keep_ids_at`` (the newest, when pruning) is kept
    as it is, item ids included: its reasoning then goes back as the reasoning item it was,
    not as plain text, and the items it holds are the provider's most recent ones.

    ``plan`` is the ``prune_plan._Plan`` of ``messages``, when there is one (typed loosely:
    the plan imports this module).

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
        if i == keep_ids_at and i >= thin_before and _keepable(m):
            if seen is not None:
                seen.update(p.tool_call_id for p in m.parts if isinstance(p, ToolCallPart))
            if plan is not None:
                tokens += full[i]
            out.append(m)
            continue
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

"""Tool-call arguments that cannot round-trip as strict JSON never enter the history.

A model may stream arguments that are valid JSON text but that no strict parser reads back:
``1e999`` (Python reads it as ``inf``, and writes it back as ``Infinity``), ``NaN``, an
integer of hundreds of digits, a string escape that is a lone surrogate (``"\\ud800"``). Kept
as they are, such a call poisons the session: every later request carries it, and a
server that parses the history strictly (llama.cpp) answers HTTP 500 to all of them.

:class:`StrictToolArguments` checks each tool call of every response. A call whose
arguments are not one strict JSON object is rewritten, in the response itself, to
``{"unreadable_arguments": "<the raw text>"}``: a plain string every provider accepts on
replay, which keeps what the model sent. Its validation is then refused with a message
that tells the model what was wrong, so it calls again with readable arguments. A call cut
by the output limit (``finish_reason: length``) is replaced by a text note instead: it can
never run, and the turn ends with reason ``max_tokens``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

UNREADABLE_KEY = "unreadable_arguments"
"""The one key of the arguments a rewritten call keeps; its value is the model's raw text."""

INT_LIMITS = (-(2**63), 2**64)
"""Integers a strict server reads exactly: 64-bit signed or unsigned."""
_MAX_INT_DIGITS = 20


class _Unreadable(ValueError):
    """Why a value cannot round-trip as strict JSON."""


def _constant(name: str) -> Any:
    raise _Unreadable(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Unreadable(f"the number {_clip(text)} is too large for a double")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS or not INT_LIMITS[0] <= int(text) < INT_LIMITS[1]:
        raise _Unreadable(f"the integer {_clip(text)} does not fit in 64 bits")
    return int(text)


def _clip(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _has_surrogate(text: str) -> bool:
    return not text.isascii() and any("\ud800" <= c <= "\udfff" for c in text)


def _check_value(value: Any) -> None:
    """Raise :class:`_Unreadable` for a parsed value strict JSON cannot carry."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str):
            if _has_surrogate(item):
                raise _Unreadable(f"the string {_clip(ascii(item))} holds a lone surrogate (not a character)")
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _Unreadable(f"{item} is not a JSON number")
        elif isinstance(item, int):
            if not INT_LIMITS[0] <= item < INT_LIMITS[1]:
                raise _Unreadable(f"the integer {_clip(str(item))} does not fit in 64 bits")


def unreadable_reason(args: str | dict[str, Any] | None) -> str | None:
    """Why ``args`` (a tool call's arguments, raw text or parsed) is not one strict JSON object;
    None when it is (empty arguments count as ``{}``)."""
    if args is None:
        return None
    if isinstance(args, dict):
        try:
            _check_value(args)
        except _Unreadable as why:
            return str(why)
        return None
    if not args.strip():
        return None
    if _has_surrogate(args):
        return "the text holds a lone surrogate (not a character)"
    try:
        value = json.loads(args, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except _Unreadable as why:
        return str(why)
    except ValueError as why:  # not JSON at all, or Python's own digit limit
        return f"not valid JSON ({_clip(str(why), 80)})"
    except RecursionError:
        return "nested too deeply"
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not an object"
    try:
        _check_value(value)
    except _Unreadable as why:
        return str(why)
    return None


def _raw_text(args: str | dict[str, Any] | None) -> str:
    """The model's arguments as text that strict JSON can carry (lone surrogates become U+FFFD)."""
    if isinstance(args, str):
        text = args
    else:
        text = json.dumps(args, ensure_ascii=False, default=str)  # non-finite floats as the model wrote them
    return text.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(text) else text


def is_unreadable_call(args: Any) -> bool:
    """Whether ``args`` is the rewritten form :class:`StrictToolArguments` leaves."""
    return isinstance(args, dict) and list(args) == [UNREADABLE_KEY] and isinstance(args[UNREADABLE_KEY], str)


def retry_message(reason: str) -> str:
    return (
        f"The arguments of this call could not be read as strict JSON: {reason}. Nothing ran. Call the tool "
        "again with arguments that are one JSON object of finite numbers (integers within 64 bits; a larger "
        "value as a string) and text without lone surrogates."
    )


def sanitize_response(response: ModelResponse) -> list[tuple[str, str]]:
    """Rewrite, in place, the tool calls of ``response`` that cannot round-trip; returns
    ``(tool call id, reason)`` for each one rewritten or dropped."""
    found: list[tuple[str, str]] = []
    cut = response.finish_reason == "length"
    parts = list(response.parts)
    for index, part in enumerate(parts):
        if not isinstance(part, ToolCallPart):
            continue
        reason = unreadable_reason(part.args)
        if reason is None:
            continue
        found.append((part.tool_call_id, reason))
        if cut and index == len(parts) - 1:
            parts[index] = TextPart(
                content=f"(The answer was cut at the output limit while writing a call to {part.tool_name}; the call was not made.)"
            )
            continue
        part.args = {UNREADABLE_KEY: _raw_text(part.args)}
        part.id = None  # OpenAI Responses would replay its stored copy of an item that keeps its id
    if found:
        response.parts = parts
    return found


def _quick_readable(args: Any) -> bool:
    """A fast yes for arguments that round-trip (the SDK's Rust parser, then a walk); a no only
    means the full check must decide."""
    from pydantic_core import from_json

    try:
        value = from_json(args) if isinstance(args, str) else args
        _check_value(value)
    except (ValueError, _Unreadable):
        return False
    return isinstance(value, dict) or (isinstance(args, str) and not args.strip())


def sanitize_history(messages: Sequence[Any]) -> int:
    """Rewrite, in place, unreadable tool calls of a stored history (one written before ketch
    checked them); returns how many. About 5 µs a call (10,000 calls: some 50 ms)."""
    count = 0
    for message in messages:
        if not isinstance(message, ModelResponse):
            continue
        for part in message.parts:
            if not isinstance(part, ToolCallPart) or is_unreadable_call(part.args):
                continue
            args = part.args
            if args is None or _quick_readable(args):
                continue
            if unreadable_reason(args) is not None:
                part.args = {UNREADABLE_KEY: _raw_text(args)}
                part.id = None
                count += 1
    return count


@dataclass
class StrictToolArguments(AbstractCapability[Any]):
    """Keeps unreadable tool arguments out of events, the store and every later request, and
    refuses arguments whose types differ from the schema the model was shown (``arg_types``)."""

    def __post_init__(self) -> None:
        super().__init__()
        self._reasons: dict[str, str] = {}

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    async def after_model_request(self, ctx: Any, *, request_context: Any, response: ModelResponse) -> ModelResponse:
        for call_id, reason in sanitize_response(response):
            self._reasons[call_id] = reason
        return response

    async def before_tool_validate(self, ctx: Any, *, call: ToolCallPart, tool_def: Any, args: Any) -> Any:
        if is_unreadable_call(call.args):
            reason = self._reasons.pop(call.tool_call_id, None)
            raise ModelRetry(retry_message(reason or unreadable_reason(call.args[UNREADABLE_KEY]) or "not one JSON object"))  # type: ignore[index]
        if not getattr(ctx, "partial_output", False):
            from ketch.providers import arg_types

            value = args
            if isinstance(args, str):
                try:
                    value = json.loads(args) if args.strip() else {}
                except ValueError:
                    return args  # the tool's own validation reports it
            reason = arg_types.mismatch(value, getattr(tool_def, "parameters_json_schema", None))
            if reason:
                raise ModelRetry(arg_types.retry_message(reason))
        return args


__all__ = ["StrictToolArguments", "UNREADABLE_KEY", "is_unreadable_call", "sanitize_history", "sanitize_response",
           "unreadable_reason"]

"""Token budget: a cheap estimate of what one model request would send, and window sizes.

The estimate is deliberately crude and fast: it counts the characters of everything that
goes on the wire and divides by :data:`CHARS_PER_TOKEN` (4, the usual rule of thumb for
English and code on BPE tokenizers). "Everything" includes the payloads a user never sees
but the provider is sent again on replay: reasoning signatures, encrypted content kept in
``provider_details``, and provider-executed tool results (``NativeToolReturnPart``). Those are
base64-like and tokenize worse than prose, so the estimate errs low on them; the threshold
(:data:`DEFAULT_THRESHOLD`) leaves the headroom.

Images and other binary attachments are counted as a flat :data:`BINARY_ITEM_TOKENS`, since
providers bill them by size class rather than by their byte length.
"""

from __future__ import annotations

import json
import operator
from itertools import islice
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ketch.context.windows import DEFAULT_CONTEXT_WINDOW as DEFAULT_CONTEXT_WINDOW  # re-exported
from ketch.context.windows import limits_for

CHARS_PER_TOKEN = 4
"""Characters counted as one token."""

DEFAULT_THRESHOLD = 0.8
"""Fraction of the context window a request may fill before the pruning ladder runs."""

BINARY_ITEM_TOKENS = 1_500
"""Flat cost of one image, audio clip or document attachment."""

PART_OVERHEAD_CHARS = 12
"""Framing counted for each part on top of its fields."""
MESSAGE_OVERHEAD_CHARS = 16
"""Framing counted for each message on top of its parts."""

def context_window(model_name: str, metadata_override: int | None = None) -> int:
    """Tokens the model can take in one request (input and output): the window of
    ``windows.limits_for``, where a positive ``metadata_override`` (config, metadata) wins."""
    return limits_for(model_name, context_window=metadata_override).window


def token_limit(window: int, threshold: float = DEFAULT_THRESHOLD) -> int:
    """The number of tokens a request may hold before pruning: ``window × threshold``."""
    return int(window * threshold)


def _mapping_chars(value: Mapping[Any, Any]) -> int:
    total = 2
    for k, v in value.items():
        total += len(k) if k.__class__ is str else len(str(k))
        total += 4 + (len(v) if v.__class__ is str else _chars(v))
    return total


def _chars(value: Any) -> int:
    """Characters ``value`` would take on the wire, roughly its JSON length."""
    cls = value.__class__
    if cls is str:
        return len(value)
    if cls is dict:
        return _mapping_chars(value)
    if cls is list or cls is tuple:
        return 2 + sum(_chars(v) + 1 for v in value)
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    if isinstance(value, BinaryContent):
        return BINARY_ITEM_TOKENS * CHARS_PER_TOKEN
    if isinstance(value, (bytes, bytearray)):
        return (len(value) * 4) // 3
    if isinstance(value, (bool, int, float)):
        return 5
    if isinstance(value, Mapping):
        return _mapping_chars(value)
    if isinstance(value, (list, tuple)):
        return 2 + sum(_chars(v) + 1 for v in value)
    url = getattr(value, "url", None)
    if isinstance(url, str):
        return len(url) + BINARY_ITEM_TOKENS * CHARS_PER_TOKEN
    text = getattr(value, "content", None)
    if isinstance(text, str):
        return len(text)
    try:
        return len(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return len(str(value))


def content_chars(value: Any) -> int:
    """Characters a part's payload (content, args) counts for: roughly its JSON length."""
    return _chars(value)


# Fields that reach the provider (directly, or as replayed opaque state). ``metadata`` and
# timestamps stay local and are not counted.
_PART_FIELDS = (
    "content",
    "args",
    "tool_name",
    "tool_call_id",
    "id",
    "signature",
    "provider_details",
)


def _generic_part_chars(part: Any) -> int:
    fields = part.__dict__
    total = PART_OVERHEAD_CHARS
    for name in _PART_FIELDS:
        value = fields.get(name)
        if value is None:
            continue
        total += len(value) if value.__class__ is str else _chars(value)
    return total


# The fast paths below count the same fields as ``_generic_part_chars``, inlined because
# they run for every part of a long history several times per step. Each takes a part of
# exactly its class (``part_chars`` picks them; the pruning plan calls them directly).


def text_chars(part: TextPart) -> int:
    pid, details = part.id, part.provider_details
    return (
        PART_OVERHEAD_CHARS
        + len(part.content)
        + (len(pid) if pid else 0)
        + (_chars(details) if details else 0)
    )


def thinking_chars(part: ThinkingPart) -> int:
    pid, signature, details = part.id, part.signature, part.provider_details
    return (
        PART_OVERHEAD_CHARS
        + len(part.content)
        + (len(pid) if pid else 0)
        + (len(signature) if signature else 0)
        + (_chars(details) if details else 0)
    )


def call_chars(part: ToolCallPart) -> int:
    args, pid, details = part.args, part.id, part.provider_details
    return (
        PART_OVERHEAD_CHARS
        + len(part.tool_name)
        + len(part.tool_call_id)
        + (len(args) if args.__class__ is str else _mapping_chars(args) if args.__class__ is dict else _chars(args))
        + (len(pid) if pid else 0)
        + (_chars(details) if details else 0)
    )


def return_chars(part: ToolReturnPart) -> int:
    content = part.content
    return (
        PART_OVERHEAD_CHARS
        + len(part.tool_name)
        + len(part.tool_call_id)
        + (len(content) if content.__class__ is str else _chars(content))
    )


def prompt_chars(part: UserPromptPart) -> int:
    content = part.content
    return PART_OVERHEAD_CHARS + (len(content) if content.__class__ is str else _chars(content))


# Exact types only: subclasses (tool search, native parts) carry more and take the generic path.
_FAST_PATHS: dict[type, Callable[[Any], int]] = {
    TextPart: text_chars,
    ThinkingPart: thinking_chars,
    ToolCallPart: call_chars,
    ToolReturnPart: return_chars,
    UserPromptPart: prompt_chars,
}


def part_chars(part: Any) -> int:
    """Characters one message part contributes to a request."""
    fast = _FAST_PATHS.get(part.__class__)
    return fast(part) if fast is not None else _generic_part_chars(part)


def message_chars(message: ModelMessage) -> int:
    """Characters one message contributes to a request (its parts plus framing)."""
    return MESSAGE_OVERHEAD_CHARS + sum(part_chars(p) for p in message.parts)


def chars_to_tokens(chars: int) -> int:
    """Tokens for ``chars`` characters (rounded up)."""
    return -(-chars // CHARS_PER_TOKEN)


def message_tokens(message: ModelMessage, part_chars: Callable[[Any], int] = part_chars) -> int:
    """Estimated tokens of one message; ``part_chars`` may be a memoizing counter."""
    return chars_to_tokens(MESSAGE_OVERHEAD_CHARS + sum(map(part_chars, message.parts)))


def estimate_messages(messages: Iterable[ModelMessage]) -> int:
    """Estimated tokens of a message history, opaque provider payloads included."""
    return sum(message_tokens(m) for m in messages if isinstance(m, (ModelRequest, ModelResponse)))


def estimate_text(text: str) -> int:
    """Estimated tokens of a plain string (instructions, a summary)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def _tool_def_chars(tool: Any) -> int:
    if isinstance(tool, Mapping):
        return _chars(tool)
    schema = getattr(tool, "parameters_json_schema", None)
    return (
        len(getattr(tool, "name", "") or "")
        + len(getattr(tool, "description", "") or "")
        + _chars(schema)
        + PART_OVERHEAD_CHARS
    )


def estimate_tools(tool_defs: Sequence[Any]) -> int:
    """Estimated tokens of tool schemas: ``ToolDefinition`` objects or plain dicts."""
    return -(-sum(_tool_def_chars(t) for t in tool_defs) // CHARS_PER_TOKEN)


def estimate_request(
    instructions: str, messages: Iterable[ModelMessage], tool_defs: Sequence[Any] = ()
) -> int:
    """Estimated tokens of a whole request: instructions, history and tool schemas."""
    return estimate_text(instructions) + estimate_messages(messages) + estimate_tools(tool_defs)


class RunningEstimate:
    """Estimated tokens of a history that grows at its end, counted once per message.

    Between two model requests of a turn the history only gains messages at its end (the
    same message objects, shared), so the estimate of step n is that of step n-1 plus the new
    messages: constant work per step however long the session is. Whenever the prefix is not
    the one counted (pruned, rewritten, resumed) it is counted again in full.
    """

    def __init__(self) -> None:
        self._counted: list[ModelMessage] = []
        self._tokens: list[int] = []
        self._total = 0

    def _same_prefix(self, messages: Sequence[ModelMessage]) -> bool:
        counted = self._counted
        n = len(counted)
        if n == 0 or len(messages) < n:
            return False
        # Every counted message must be the very object: a pruning shares the messages it did
        # not change, so checking a few positions would miss a placeholder in between. An
        # identity test per message is a pointer comparison, microseconds for thousands.
        return all(map(operator.is_, islice(messages, n), counted))

    def tokens(self, messages: Sequence[ModelMessage]) -> int:
        """Estimated tokens of ``messages`` (as ``estimate_messages`` counts them)."""
        if not self._same_prefix(messages):
            self._counted, self._tokens, self._total = [], [], 0
        for m in messages[len(self._counted) :]:
            t = message_tokens(m) if isinstance(m, (ModelRequest, ModelResponse)) else 0
            self._counted.append(m)
            self._tokens.append(t)
            self._total += t
        return self._total


def instruction_text(request_context: Any) -> str:
    """The instructions of a request as one text (what the provider reads before the history)."""
    params = request_context.model_request_parameters
    return "\n\n".join(p.content for p in (getattr(params, "instruction_parts", None) or []))


def reserved_tokens(request_context: Any) -> int:
    """Tokens of a request besides its history: instructions and tool schemas."""
    params = request_context.model_request_parameters
    tools = [*params.function_tools, *getattr(params, "output_tools", [])]
    return estimate_text(instruction_text(request_context)) + estimate_tools(tools)

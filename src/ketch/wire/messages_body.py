"""The history as Anthropic Messages API blocks, each message encoded once.

Maps pydantic-ai messages to the ``messages``/``system``/``tools`` of a ``POST /v1/messages``
body with the block shapes, key orders and cache breakpoints ketch sent through the SDK adapter
(``tests/golden/wire/anthropic-messages.jsonl`` holds those bytes):

- a request's parts become one ``user`` turn: text, images/documents (base64 or URL),
  ``tool_result`` blocks (``is_error`` from the part's outcome); its opening system prompts are
  hoisted to the top-level ``system``;
- a response becomes one ``assistant`` turn: ``text`` (with its web-search citations when they
  still cover the whole text), ``tool_use``, ``thinking`` with its signature or
  ``redacted_thinking``, and a hosted search's ``server_tool_use`` / ``web_search_tool_result``;
  thinking without a signature (or from another provider) is replayed as tagged text in a user
  turn of its own, as the adapter does for models that imitate assistant formatting.

:class:`MessageMemo` keeps, per history message (by identity, checked against its parts and
their contents), the turns it became and their JSON text, so a long session does not map or
serialize the settled history again on every step; only the newest turns and the ones a cache
breakpoint lands on are encoded anew. Each part kind and its block are one table in both
directions with ``wire.messages`` (the stream → parts side), which is why they are two modules.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from pydantic_ai.messages import (
    BinaryContent,
    CachePoint,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.native_tools import WebSearchTool

PROVIDER = "anthropic"
CACHEABLE = frozenset({"text", "tool_use", "server_tool_use", "image", "tool_result", "document", "tool_addition",
                       "mcp_tool_result"})
"""Block types a ``cache_control`` may sit on (what the API documents, as the adapter's table)."""
REDACTED_IDS = frozenset({"redacted_thinking", "redacted_content"})
ERROR_OUTCOMES = frozenset({"failed", "retried"})
_STATELESS = frozenset({WebSearchTool.kind, "web_search_tool_result"})
_CALLER = "anthropic_caller"

_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def dumps(value: Any) -> str:
    """``value`` as the compact JSON the SDK sent, non-ASCII text as UTF-8 (a NaN is refused)."""
    try:
        return _ENCODER.encode(value)
    except ValueError as exc:
        from pydantic_ai.exceptions import UnexpectedModelBehavior

        raise UnexpectedModelBehavior(f"the request holds a number JSON cannot carry ({exc})") from None


def cache_control(ttl: str = "5m") -> dict[str, str]:
    return {"type": "ephemeral", "ttl": ttl}


# ---------------------------------------------------------------- request parts
def _binary(data: bytes, media_type: str) -> dict[str, Any]:
    if media_type.startswith("image/"):
        return {"source": {"data": base64.b64encode(data).decode(), "media_type": media_type, "type": "base64"},
                "type": "image"}
    if media_type == "application/pdf":
        return {"source": {"data": base64.b64encode(data).decode(), "media_type": "application/pdf", "type": "base64"},
                "type": "document"}
    if media_type == "text/plain":
        return {"source": {"data": data.decode("utf-8"), "media_type": media_type, "type": "text"}, "type": "document"}
    raise RuntimeError(f"Unsupported binary content media type for Anthropic: {media_type}")


def file_block(item: Any, context: str) -> dict[str, Any]:
    """An image or document input (inline bytes or a URL) as its block."""
    if isinstance(item, BinaryContent):
        if item.is_image or item.is_document:
            return _binary(item.data, item.media_type)
        raise NotImplementedError(f"Unsupported binary content type in Anthropic {context}: {item.media_type}")
    if isinstance(item, ImageUrl):
        if item.force_download:
            raise NotImplementedError("ketch sends no image URL that must be downloaded first")
        return {"source": {"type": "url", "url": item.url}, "type": "image"}
    if isinstance(item, DocumentUrl) and item.media_type == "application/pdf" and not item.force_download:
        return {"source": {"url": item.url, "type": "url"}, "type": "document"}
    raise NotImplementedError(f"{type(item).__name__} is not supported in Anthropic {context}")


def _user_blocks(part: UserPromptPart, blocks: list[dict[str, Any]]) -> None:
    if isinstance(part.content, str):
        if part.content:
            blocks.append({"text": part.content, "type": "text"})
        return
    for item in part.content:
        if isinstance(item, (str, TextContent)):
            text = item if isinstance(item, str) else item.content
            if text:
                blocks.append({"text": text, "type": "text"})
        elif isinstance(item, CachePoint):
            if not blocks:  # marking the turn before would change a turn already encoded
                from pydantic_ai.exceptions import UserError

                raise UserError("a CachePoint needs content before it in the same prompt on the Messages wire")
            blocks[-1]["cache_control"] = cache_control(item.ttl)
        else:
            blocks.append(file_block(item, "user prompts"))


def tool_result(part: ToolReturnPart) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for item in part.content_items(mode="str", wrap_if_error=False):
        if isinstance(item, str):
            content.append({"text": item, "type": "text"})
        else:
            content.append(file_block(item, "tool returns"))
    return {"tool_use_id": part.tool_call_id, "type": "tool_result", "content": content or "",
            "is_error": part.outcome in ERROR_OUTCOMES}


def request_turns(message: ModelRequest, system: list[str]) -> list[dict[str, Any]]:
    """The ``user`` turn of one request; its standing system prompts go to ``system``."""
    from pydantic_ai.models import _sendable_request_parts

    blocks: list[dict[str, Any]] = []
    for index, part in enumerate(_sendable_request_parts(message.parts)):
        if isinstance(part, SystemPromptPart):
            system.append(part.content)  # standing or not: ketch's profile renders no inline system entry
        elif isinstance(part, UserPromptPart):
            _user_blocks(part, blocks)
        elif isinstance(part, ToolReturnPart):
            blocks.append(tool_result(part))
        else:
            from pydantic_ai.exceptions import UserError

            raise UserError(f"{type(part).__name__} cannot be sent on the Anthropic Messages wire")
    return [{"role": "user", "content": blocks}] if blocks else []


# ---------------------------------------------------------------- response parts
def _citations(part: TextPart) -> list[dict[str, Any]]:
    raw = (part.provider_details or {}).get("citations")
    if not isinstance(raw, list) or not part.citations:
        return []
    from pydantic_ai.messages import ContentCitationAnchor

    whole = ContentCitationAnchor(start=0, end=len(part.content))
    if not all(c.anchor == whole for c in part.citations):
        return []
    out = []
    for c in raw:
        if not isinstance(c, dict) or c.get("type") != "web_search_result_location":
            continue
        cited, url, title, index = c.get("cited_text"), c.get("url"), c.get("title"), c.get("encrypted_index")
        if isinstance(cited, str) and isinstance(url, str) and isinstance(title, (str, type(None))) and isinstance(index, str):
            out.append({"type": "web_search_result_location", "url": url, "title": title, "cited_text": cited,
                        "encrypted_index": index})
    return out


def _with_caller(block: dict[str, Any], part: Any) -> dict[str, Any]:
    caller = (part.provider_details or {}).get(_CALLER)
    if isinstance(caller, dict):
        block["caller"] = caller
    return block


def response_turns(model: Any, message: ModelResponse, profile: Any) -> list[dict[str, Any]]:
    """The ``assistant`` turn of one response (and a ``user`` turn before it for replayed thinking)."""
    from pydantic_ai._thinking_part import render_replayed_thinking

    blocks: list[dict[str, Any]] = []
    carried: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if not part.content:
                continue
            block: dict[str, Any] = {"text": part.content, "type": "text"}
            if model.accepts_stateless_artifacts(message, part) and (citations := _citations(part)):
                block["citations"] = citations
            blocks.append(block)
        elif isinstance(part, ToolCallPart):
            blocks.append({"id": part.tool_call_id, "type": "tool_use", "name": part.tool_name,
                           "input": part.args_as_dict()})
        elif isinstance(part, ThinkingPart):
            if part.signature and model.accepts_stateless_artifacts(message, part):
                if part.id in REDACTED_IDS:
                    blocks.append({"data": part.signature, "type": "redacted_thinking"})
                else:
                    blocks.append({"thinking": part.content, "signature": part.signature, "type": "thinking"})
            elif part.content:
                text, carry = render_replayed_thinking(part.content, profile)
                (carried if carry else blocks).append({"text": text, "type": "text"})
        elif isinstance(part, NativeToolCallPart):
            if part.tool_name in _STATELESS and model.accepts_stateless_artifacts(message, part):
                blocks.append(_with_caller({"id": part.tool_call_id, "type": "server_tool_use", "name": "web_search",
                                            "input": part.args_as_dict()}, part))
        elif isinstance(part, NativeToolReturnPart):
            if (part.tool_name in _STATELESS and isinstance(part.content, (dict, list))
                    and model.accepts_stateless_artifacts(message, part)):
                blocks.append(_with_caller({"tool_use_id": part.tool_call_id, "type": "web_search_tool_result",
                                            "content": part.content}, part))
        # a file the model made, or another provider's hosted tool, is not sent back
    turns = [{"role": "user", "content": carried}] if carried else []
    if blocks:
        turns.append({"role": "assistant", "content": blocks})
    return turns


def drop_unpaired_searches(turns: list[dict[str, Any]]) -> bool:
    """Drop ``server_tool_use`` blocks without a result (which the API refuses) unless every later
    turn is a user turn of tool results only; True when one was dropped (the turn is re-encoded)."""
    returned = {b.get("tool_use_id") for t in turns for b in t["content"] if b.get("type") == "web_search_tool_result"}
    dropped = False
    results_only = True
    for index in range(len(turns) - 1, -1, -1):
        turn = turns[index]
        if not results_only and any(b["type"] == "server_tool_use" and b["id"] not in returned for b in turn["content"]):
            turns[index] = {**turn, "content": [b for b in turn["content"]
                                                if not (b["type"] == "server_tool_use" and b["id"] not in returned)]}
            dropped = True
        results_only = results_only and turn["role"] == "user" and all(b["type"] == "tool_result" for b in turn["content"])
    return dropped


# ---------------------------------------------------------------- the memo
class MessageMemo:
    """The turns (and their JSON) each history message became, reused while it is unchanged.

    A message is unchanged when it is the same object with the same parts, each holding the same
    content/args object and outcome: pruning or a rewrite replaces one of those, and the message
    is mapped again. Only what the last two requests used is kept."""

    def __init__(self) -> None:
        self._now: dict[int, tuple[Any, tuple[Any, ...], list[dict[str, Any]], list[str], list[str]]] = {}
        self._before: dict[int, Any] = {}

    @staticmethod
    def fingerprint(message: ModelMessage) -> tuple[Any, ...]:
        return tuple((p, getattr(p, "content", None), getattr(p, "args", None), getattr(p, "outcome", None),
                      getattr(p, "signature", None), getattr(p, "provider_details", None)) for p in message.parts)

    def get(self, message: ModelMessage) -> tuple[list[dict[str, Any]], list[str], list[str]] | None:
        entry = self._now.get(id(message)) or self._before.get(id(message))
        if entry is None or entry[0] is not message:
            return None
        stamp = self.fingerprint(message)
        if len(stamp) != len(entry[1]) or any(a is not b for x, y in zip(stamp, entry[1]) for a, b in zip(x, y)):
            return None
        self._used[id(message)] = entry
        return entry[2], entry[3], entry[4]

    def start(self) -> None:
        self._used: dict[int, Any] = {}

    def put(self, message: ModelMessage, turns: list[dict[str, Any]], texts: list[str], system: list[str]) -> None:
        self._used[id(message)] = (message, self.fingerprint(message), turns, texts, system)

    def finish(self) -> None:
        self._before, self._now = self._now, self._used


def map_history(model: Any, messages: list[ModelMessage], profile: Any,
                memo: MessageMemo) -> tuple[list[str], list[dict[str, Any]], list[str | None]]:
    """``(system prompt parts, turns, each turn's JSON or None when it must be encoded)``."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    texts: list[str | None] = []
    memo.start()
    for message in messages:
        cached = memo.get(message)
        if cached is not None:
            mapped, encoded, hoisted = cached
        else:
            hoisted = []
            if isinstance(message, ModelRequest):
                mapped = request_turns(message, hoisted)
            else:
                mapped = response_turns(model, message, profile)
            encoded = [dumps(t) for t in mapped]
            memo.put(message, mapped, encoded, hoisted)
        system.extend(hoisted)
        turns.extend(mapped)
        texts.extend(encoded)
    memo.finish()
    return system, turns, list(texts)


def iter_blocks_newest_first(turns: list[dict[str, Any]]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    for t in range(len(turns) - 1, -1, -1):
        content = turns[t]["content"]
        if isinstance(content, list):
            for b in range(len(content) - 1, -1, -1):
                yield t, b, content[b]


# ---------------------------------------------------------------- cache breakpoints
def _last_block(turns: list[dict[str, Any]]) -> tuple[int, int] | None:
    """Where automatic caching (and ``anthropic_cache_messages``) puts its breakpoint: the last
    cacheable block of the last turn."""
    if not turns:
        return None
    content = turns[-1]["content"]
    for b in range(len(content) - 1, -1, -1):
        if "cache_control" in content[b] or content[b].get("type") in CACHEABLE:
            return len(turns) - 1, b
    return None


def last_block_marked(turns: list[dict[str, Any]]) -> bool:
    at = _last_block(turns)
    return at is not None and "cache_control" in turns[at[0]]["content"][at[1]]


def _set_block(turns: list[dict[str, Any]], texts: list[str | None], t: int, b: int, block: dict[str, Any]) -> None:
    """Replace one block without touching the memo's copy (the turn is encoded again)."""
    content = list(turns[t]["content"])
    content[b] = block
    turns[t] = {**turns[t], "content": content}
    texts[t] = None


def mark_last_block(turns: list[dict[str, Any]], texts: list[str | None], ttl: str) -> None:
    at = _last_block(turns)
    if at is not None and "cache_control" not in turns[at[0]]["content"][at[1]]:
        _set_block(turns, texts, *at, {**turns[at[0]]["content"][at[1]], "cache_control": cache_control(ttl)})


def limit_cache_points(system: Any, turns: list[dict[str, Any]], texts: list[str | None], tools: list[dict[str, Any]],
                        *, automatic: bool) -> None:
    """At most four breakpoints (one fewer with automatic caching): the tools' and the first
    system one are kept; the oldest message ones go first, then a second system one."""
    budget = 4 - (1 if automatic else 0)
    system_points = [b for b in system if "cache_control" in b] if isinstance(system, list) else []
    reserved = min(1, len(system_points)) + sum(1 for t in tools if "cache_control" in t)
    points = [(t, b) for t, b, block in iter_blocks_newest_first(turns) if "cache_control" in block]
    extra_system = system_points[1:]
    if reserved + len(points) + len(extra_system) <= budget:
        return
    if reserved > budget:
        from pydantic_ai.exceptions import UserError

        raise UserError(f"the Anthropic request asks for more than {budget} cache points in its system prompt and tools")
    keep = budget - reserved
    for t, b in points[keep:]:
        block = dict(turns[t]["content"][b])
        del block["cache_control"]
        _set_block(turns, texts, t, b, block)
    for block in extra_system[max(0, keep - len(points)):]:
        del block["cache_control"]



__all__ = ["CACHEABLE", "MessageMemo", "cache_control", "drop_unpaired_searches", "dumps", "file_block",
           "iter_blocks_newest_first", "last_block_marked", "limit_cache_points", "map_history", "mark_last_block",
           "request_turns", "response_turns", "tool_result"]

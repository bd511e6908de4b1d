"""History -> OpenAI Responses ``input`` items, each message mapped and encoded once.

The items and their key order are those pydantic-ai's ``OpenAIResponsesModel`` builds (the golden
bodies of ``tests/test_wire_golden.py`` were recorded through it): requests become ``message`` /
``function_call_output`` items, responses become assistant messages, ``function_call`` items,
``reasoning`` items (encrypted content and summaries, sent back where the profile says the server
keeps them) or thinking written out as tagged text, and ``web_search_call`` items replayed by id.

:class:`ItemCache` keeps the JSON text each settled message became, keyed by the message object
and checked against its parts and the per-request flags, so a long session encodes only the newest
messages each step (ketch never changes a message in place: a pruned or repaired message is a new
object). What the last two requests used is kept, at most two histories' worth.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    BinaryContent,
    CachePoint,
    ImageUrl,
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

ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""The OpenAI SDK's body encoding (``openapi_dumps``): compact, UTF-8 as it is, no NaN."""


@dataclass(frozen=True)
class Flags:
    """What of one request, besides the message itself, decides how a message is mapped."""

    system: str
    send_item_ids: bool
    encrypted_reasoning: bool
    system_role: str
    strict_status_none: bool
    supports_phase: bool
    carry_thinking_in_user_turn: bool
    breakpoints: bool = False
    """A ``prompt_cache_breakpoint`` on each request message (GPT-5.6 on, :func:`mark_last_item`)."""


def encode(value: Any) -> str:
    try:
        return ENCODER.encode(value)
    except ValueError as exc:
        from pydantic_ai.exceptions import UnexpectedModelBehavior

        raise UnexpectedModelBehavior(f"the request holds a number JSON cannot carry ({exc})") from None


# ---------------------------------------------------------------- requests
def _user_content(part: UserPromptPart) -> Any:
    if isinstance(part.content, str):
        return part.content
    content: list[dict[str, Any]] = []
    for item in part.content:
        if isinstance(item, str | TextContent):
            content.append({"text": item if isinstance(item, str) else item.content, "type": "input_text"})
        elif isinstance(item, CachePoint):
            continue  # a breakpoint only models with explicit cache breakpoints take; none is mapped here
        elif isinstance(item, ImageUrl):
            detail = (item.vendor_metadata or {}).get("detail", "auto")
            content.append({"image_url": item.url, "type": "input_image", "detail": detail})
        elif isinstance(item, BinaryContent):
            content.append(_binary(item))
        else:
            raise NotImplementedError(f"{type(item).__name__} is not sent on the Responses wire")
    return content


def _binary(item: BinaryContent) -> dict[str, Any]:
    if item.is_image:
        return {"image_url": item.data_uri, "type": "input_image", "detail": (item.vendor_metadata or {}).get("detail", "auto")}
    if item.is_document:
        return {"type": "input_file", "file_data": item.data_uri, "filename": f"filename.{item.format}"}
    raise NotImplementedError(f"{item.media_type} content is not sent on the Responses wire")


def _tool_output(part: ToolReturnPart) -> Any:
    if not part.files:
        return part.model_response_str()
    output: list[dict[str, Any]] = []
    for item in part.content_items(mode="str"):
        if isinstance(item, str):
            output.append({"type": "input_text", "text": item})
        elif isinstance(item, BinaryContent):
            output.append(_binary(item))
        elif isinstance(item, ImageUrl):
            output.append({"image_url": item.url, "type": "input_image", "detail": (item.vendor_metadata or {}).get("detail", "auto")})
        else:
            raise NotImplementedError(f"{type(item).__name__} is not sent in a Responses tool result")
    return output


def _call_id(raw: str | None) -> tuple[str, str | None]:
    """A tool call id as sent: pydantic-ai once stored ``call_id|item_id`` in one string."""
    if not raw:
        from pydantic_ai.exceptions import UnexpectedModelBehavior

        raise UnexpectedModelBehavior("a tool call or result has no id")
    if "|" in raw:
        call_id, item_id = raw.split("|", 1)
        return call_id, item_id
    return raw, None


def request_items(message: ModelRequest, flags: Flags) -> Iterator[dict[str, Any]]:
    from pydantic_ai.models import _sendable_request_parts  # the adapters' own rendering of legacy parts

    for part in _sendable_request_parts(message.parts):
        if isinstance(part, SystemPromptPart):
            yield {"role": flags.system_role, "content": part.content}
        elif isinstance(part, UserPromptPart):
            yield {"role": "user", "content": _user_content(part)}
        elif isinstance(part, ToolReturnPart):
            call_id, _ = _call_id(part.tool_call_id)
            yield {"type": "function_call_output", "call_id": call_id, "output": _tool_output(part)}
        elif type(part).__name__ in ("ModelSettingsDeltaPart",):
            continue  # a mid-conversation effort change: sent as the request's own reasoning effort
        else:
            raise NotImplementedError(f"{type(part).__name__} is not sent on the Responses wire")


_BREAKPOINT = {"mode": "explicit"}
_BREAKPOINT_PARTS = frozenset({"input_text", "input_image", "input_file"})
"""The Responses input content OpenAI takes a breakpoint on (never assistant output)."""


def mark_last_item(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One request message's items with a breakpoint on the last block of its last user message or
    function call output (a string becomes one ``input_text``: the same text). Every request message
    carries it in every request, so a marker once sent is never moved (``chat_body.HistoryMarks``)."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        key = "output" if item.get("type") == "function_call_output" else "content" if item.get("role") == "user" else None
        if key is None:
            continue
        body = item.get(key)
        if isinstance(body, str) and body:
            blocks = [{"type": "input_text", "text": body, "prompt_cache_breakpoint": _BREAKPOINT}]
        elif isinstance(body, list) and body and body[-1].get("type") in _BREAKPOINT_PARTS:
            blocks = [*body[:-1], {**body[-1], "prompt_cache_breakpoint": _BREAKPOINT}]
        else:
            continue
        return [*items[:index], {**item, key: blocks}, *items[index + 1 :]]
    return items


# ---------------------------------------------------------------- responses
@dataclass
class _ResponseState:
    items: list[dict[str, Any]] = field(default_factory=list)
    message_item: dict[str, Any] | None = None
    reasoning_item: dict[str, Any] | None = None
    web_search_item: dict[str, Any] | None = None
    carried: list[str] = field(default_factory=list)


def response_items(message: ModelResponse, flags: Flags, *, same_endpoint: bool, stateless_ok: Any) -> list[dict[str, Any]]:
    """``message``'s items; ``stateless_ok(message, part)`` says whether its encrypted data may go back."""
    from pydantic_ai._thinking_part import render_replayed_thinking

    state = _ResponseState()
    out = state.items
    for part in message.parts:
        from_same = same_endpoint and (part.provider_name == flags.system
                                       or (part.provider_name is None and message.provider_name == flags.system))
        send_id = flags.send_item_ids and from_same
        if isinstance(part, TextPart):
            phase = (part.provider_details or {}).get("phase")
            send_phase = flags.supports_phase and part.provider_name == flags.system and phase in ("commentary", "final_answer")
            if part.id and send_id:
                if state.message_item is None or state.message_item["id"] != part.id:
                    state.message_item = {"role": "assistant", "id": part.id, "content": [], "type": "message",
                                          "status": "completed"}
                    out.append(state.message_item)
                annotations = _citations(part)
                state.message_item["content"] = [*state.message_item["content"],
                                                 {"text": part.content, "type": "output_text", "annotations": annotations}]
                if send_phase:
                    state.message_item["phase"] = phase
            else:
                item = {"role": "assistant", "content": part.content}
                if send_phase:
                    item["phase"] = phase
                out.append(item)
        elif isinstance(part, NativeToolCallPart):
            if send_id and part.tool_name == WebSearchTool.kind and part.tool_call_id:
                args = part.args_as_dict()
                if args:
                    state.web_search_item = {"id": part.id or part.tool_call_id,
                                             "action": {k: v for k, v in args.items() if v is not None},
                                             "status": "completed", "type": "web_search_call"}
                    out.append(state.web_search_item)
        elif isinstance(part, NativeToolReturnPart):
            status = part.content.get("status") if isinstance(part.content, dict) else None
            if send_id and status and part.tool_name == WebSearchTool.kind and state.web_search_item is not None:
                state.web_search_item["status"] = status
        elif isinstance(part, ToolCallPart):
            call_id, item_id = _call_id(part.tool_call_id)
            item_id = item_id or part.id
            call: dict[str, Any] = {"name": part.tool_name, "arguments": part.args_as_json_str(), "call_id": call_id,
                                    "type": "function_call"}
            if flags.strict_status_none:
                call["status"] = None
            if item_id and send_id:
                call["id"] = item_id
            if part.provider_name == flags.system and part.provider_details and part.provider_details.get("namespace"):
                call["namespace"] = part.provider_details["namespace"]
            out.append(call)
        elif isinstance(part, ThinkingPart):
            _thinking(part, message, flags, state, send_id, stateless_ok, render_replayed_thinking)
        # a FilePart (generated image) has no input item of its own; compaction parts are not produced by ketch
    if state.carried:
        out.insert(0, {"role": "user", "content": "\n\n".join(state.carried)})
    return out


def _thinking(part: ThinkingPart, message: ModelResponse, flags: Flags, state: _ResponseState, send_id: bool,
              stateless_ok: Any, render: Any) -> None:
    raw = (part.provider_details or {}).get("raw_content") if part.provider_name == flags.system else None
    native = part.id not in ("content", "reasoning", "reasoning_content") or bool(part.signature or raw)
    signature = part.signature if part.signature and flags.encrypted_reasoning and stateless_ok(message, part) else None
    if part.id and native and (send_id or raw or (flags.send_item_ids and signature)):
        item = state.reasoning_item
        if (item is None or item["id"] != part.id) and (signature or part.content or raw):
            item = {"id": part.id, "summary": [], "encrypted_content": signature, "type": "reasoning"}
            state.reasoning_item = item
            state.items.append(item)
        if part.content:
            assert item is not None
            item["summary"] = [*item["summary"], {"text": part.content, "type": "summary_text"}]
        if raw:
            assert item is not None
            item["content"] = [{"text": text, "type": "reasoning_text"} for text in raw]
        return
    text, carry = render(part.content, _Profile(flags))
    if not carry:
        state.items.append({"role": "assistant", "content": text})
    elif part.content:
        state.carried.append(text)


class _Profile(dict):  # type: ignore[type-arg]
    """The one profile field ``render_replayed_thinking`` reads, without holding the model's profile."""

    def __init__(self, flags: Flags) -> None:
        super().__init__(mimics_assistant_message_formatting=flags.carry_thinking_in_user_turn)


def _citations(part: TextPart) -> list[Any]:
    """The URL citations OpenAI returned on ``part``, rebuilt for replay where their range still holds the URL."""
    citations = (part.provider_details or {}).get("citations")
    out: list[Any] = []
    for c in citations if isinstance(citations, list) else []:
        if not isinstance(c, dict) or c.get("type") != "url_citation":
            continue  # file citations come from file search, which ketch never offers
        url, title, start, end = c.get("url"), c.get("title"), c.get("start_index"), c.get("end_index")
        if (isinstance(url, str) and url and isinstance(title, str) and isinstance(start, int)
                and isinstance(end, int) and 0 <= start <= end <= len(part.content) and url in part.content[start:end]):
            out.append({"type": "url_citation", "url": url, "title": title, "start_index": start, "end_index": end})
    return out


# ---------------------------------------------------------------- the per-message memo
class ItemCache:
    """The encoded items of each message, reused while the message is the same object with the same
    parts under the same flags."""

    def __init__(self) -> None:
        self._now: dict[int, tuple[Any, tuple[Any, ...], Flags, bool, str]] = {}
        self._before: dict[int, tuple[Any, tuple[Any, ...], Flags, bool, str]] = {}
        self._used: dict[int, tuple[Any, tuple[Any, ...], Flags, bool, str]] = {}

    def start(self) -> None:
        self._used = {}

    def finish(self) -> None:
        self._before, self._now = self._now, self._used
        self._used = {}

    def get(self, message: Any, flags: Flags, extra: bool) -> str | None:
        key = id(message)
        entry = self._now.get(key) or self._before.get(key)
        if entry is None or entry[0] is not message or entry[2] != flags or entry[3] != extra or entry[1] != tuple(message.parts):
            return None
        self._used[key] = entry
        return entry[4]

    def put(self, message: Any, flags: Flags, extra: bool, text: str) -> None:
        self._used[id(message)] = (message, tuple(message.parts), flags, extra, text)


def encoded_items(items: list[dict[str, Any]]) -> str:
    """The items as the comma-joined JSON text that goes between the brackets of ``input``."""
    return ",".join(encode(item) for item in items)


__all__ = ["ENCODER", "Flags", "ItemCache", "encode", "encoded_items", "mark_last_item", "request_items",
           "response_items"]

"""The answer of an Anthropic Messages request as pydantic-ai parts.

Events → parts: ``message_start`` (id, usage), ``content_block_start`` / ``_delta`` / ``_stop``
for text (and its ``citations_delta``), ``tool_use`` (``input_json_delta``), ``thinking``
(``thinking_delta``, ``signature_delta``), ``redacted_thinking``, ``server_tool_use`` of a
search the request offered and its ``web_search_tool_result``; ``message_delta`` (stop reason,
usage), ``message_stop`` (the end: a stream without it is a broken connection, ``wire.sse``),
``ping``, and ``error`` (raised as the HTTP error its type stands for, ``overloaded_error`` → 529).
Usage keeps Anthropic's names (``cache_creation_input_tokens``, ``cache_read_input_tokens``) and
is priced by pydantic-ai's ``RequestUsage.extract`` as the SDK adapter did. A whole message (a
request sent with ``stream: false``) is replayed as the events of its stream, so both take one
mapping. What is kept is what ``wire.messages_body`` sends back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior
from pydantic_ai.messages import (
    Citation,
    ContentCitationAnchor,
    ModelResponseStreamEvent,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    WebCitationSource,
)
from pydantic_ai.models import StreamedResponse
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.usage import RequestUsage

from ketch.wire import messages_body as mb
from ketch.wire.http import read_lines
from ketch.wire.sse import json_events

PROVIDER = "anthropic"
FINISH = {"compaction": "stop", "end_turn": "stop", "max_tokens": "length", "model_context_window_exceeded": "length",
          "stop_sequence": "stop", "tool_use": "tool_call", "pause_turn": None, "refusal": "content_filter"}
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                "rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529}
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_SEARCH_RESULT_KEYS = ("encrypted_content", "page_age", "title", "type", "url")
_CITATION_KEYS = ("cited_text", "encrypted_index", "title", "type", "url")


def http_error(status: int, model_name: str, body: Any, headers: dict[str, str] | None, *, in_stream: bool) -> ModelHTTPError:
    """The model error for an Anthropic error body, of the category its ``error.type`` names."""
    from pydantic_ai import _model_errors
    from pydantic_ai.exceptions import (ModelContextWindowExceededError, ModelOverloadedError,
                                        ModelQuotaExceededError, ModelRateLimitError)

    error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else {}
    kind, message = error.get("type"), error.get("message")
    category: Any = {"rate_limit_error": ModelRateLimitError, "billing_error": ModelQuotaExceededError,
                     "overloaded_error": ModelOverloadedError}.get(kind) if isinstance(kind, str) else None
    if kind == "invalid_request_error" and isinstance(message, str):
        if "prompt is too long" in message.lower():
            category = ModelContextWindowExceededError
        elif "credit balance is too low" in message.lower():
            category = ModelQuotaExceededError
    return ModelHTTPError.for_category(category or _model_errors.http_status_category(status, message),
                                       status_code=status, model_name=model_name, body=body, headers=headers,
                                       provider_error_type=kind if isinstance(kind, str) else None, in_stream=in_stream)


# ---------------------------------------------------------------- response: events -> parts
async def stream_events(response: Any, model_name: str) -> AsyncIterator[dict[str, Any]]:
    lines = read_lines(response, model_name)
    async for frame, event in json_events(lines, model_name=model_name,
                                          is_end=lambda frame, event: event.get("type", frame.event) in ("message_stop", "error")):
        if "type" not in event and frame.event:
            event = {**event, "type": frame.event}
        yield event


async def message_events(message: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """A whole message as the events of its stream (each block started whole)."""
    shell = {k: v for k, v in message.items() if k != "content"}
    yield {"type": "message_start", "message": shell}
    for index, block in enumerate(message.get("content") or []):
        if not isinstance(block, dict):
            raise UnexpectedModelBehavior("the provider sent a content block that is not an object")
        start = {k: v for k, v in block.items() if not (k == "citations" and block.get("type") == "text")}
        yield {"type": "content_block_start", "index": index, "content_block": start}
        if block.get("type") == "text":
            for citation in block.get("citations") or []:
                yield {"type": "content_block_delta", "index": index, "delta": {"type": "citations_delta", "citation": citation}}
        yield {"type": "content_block_stop", "index": index}
    yield {"type": "message_delta", "delta": {"stop_reason": message.get("stop_reason")}, "usage": message.get("usage") or {}}
    yield {"type": "message_stop"}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ordered(value: Any, keys: tuple[str, ...]) -> Any:
    """A result or citation object with the SDK model's fields in its order (missing ones null),
    then anything else it carried: what was stored before, so a replay sends the same bytes."""
    if not isinstance(value, dict):
        return value
    return {**{k: value.get(k) for k in keys}, **{k: v for k, v in value.items() if k not in keys}}


@dataclass
class MessagesStream(StreamedResponse):
    """One Messages answer (streamed, or a whole message replayed as events) as pydantic-ai events."""

    _events: Any = None
    _model_name: str = ""
    _provider_url: str = ""
    _search_offered: bool = False
    _timestamp: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    _details: dict[str, int] = field(default_factory=dict, init=False)
    _raw_usage: dict[str, Any] = field(default_factory=dict, init=False)
    _blocks: dict[int, str] = field(default_factory=dict, init=False)
    _ignored: set[int] = field(default_factory=set, init=False)
    _citations: dict[int, list[dict[str, Any]]] = field(default_factory=dict, init=False)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        async for event in self._events:
            for out in self._map(event):
                yield out

    def _map(self, event: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if not isinstance(message, dict):
                raise UnexpectedModelBehavior("message_start without its message")
            self.provider_response_id = message.get("id") if isinstance(message.get("id"), str) else None
            self._usage_from(message.get("usage"))
        elif kind == "content_block_start":
            yield from self._start(_index(event), event.get("content_block"))
        elif kind == "content_block_delta":
            yield from self._delta(_index(event), event.get("delta"))
        elif kind == "content_block_stop":
            yield from self._stop(_index(event))
        elif kind == "message_delta":
            self._usage_from(event.get("usage"))
            delta = event.get("delta") if isinstance(event.get("delta"), dict) else {}
            if isinstance(reason := delta.get("stop_reason"), str) and reason:
                self.provider_details = {**(self.provider_details or {}), "finish_reason": reason}
                self.finish_reason = FINISH.get(reason)  # type: ignore[assignment]
                self.state = "suspended" if reason == "pause_turn" else "complete"
        elif kind == "error":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            status = ERROR_STATUS.get(error.get("type"), 500)  # type: ignore[arg-type]
            raise http_error(status, self._model_name, {"type": "error", "error": error}, None, in_stream=True)
        # ping, message_stop and events this version does not know carry nothing to keep

    def _start(self, index: int, block: Any) -> Iterator[ModelResponseStreamEvent]:
        if not isinstance(block, dict):
            raise UnexpectedModelBehavior("content_block_start without its block")
        kind = block.get("type")
        self._blocks[index] = kind
        pm = self._parts_manager
        if kind == "text":
            if text := _str(block.get("text")):
                yield from pm.handle_text_delta(vendor_part_id=index, content=text)
        elif kind == "thinking":
            yield from pm.handle_thinking_delta(vendor_part_id=index, content=_str(block.get("thinking")),
                                                signature=_str(block.get("signature")), provider_name=PROVIDER)
        elif kind == "redacted_thinking":
            yield from pm.handle_thinking_delta(vendor_part_id=index, id="redacted_thinking",
                                                signature=_str(block.get("data")), provider_name=PROVIDER)
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise UnexpectedModelBehavior("a tool_use block without its id or name", str(block)[:500])
            yield from pm.handle_tool_call_delta_events(vendor_part_id=index, tool_name=block["name"],
                                                        args=block.get("input") or None, tool_call_id=block["id"])
        elif kind == "server_tool_use":
            if block.get("name") != "web_search" or not self._search_offered:
                self._ignored.add(index)  # a hosted tool this request did not offer: not kept
                return
            details = {mb._CALLER: block["caller"]} if isinstance(block.get("caller"), dict) else None
            part = NativeToolCallPart(tool_name=WebSearchTool.kind, args=block.get("input") or None,
                                      tool_call_id=_str(block.get("id")), provider_name=PROVIDER,
                                      provider_details=details)
            yield pm.handle_part(vendor_part_id=index, part=part)
        elif kind == "web_search_tool_result":
            content = block.get("content")
            if isinstance(content, list):
                content = [_ordered(item, _SEARCH_RESULT_KEYS) for item in content]
            details = {mb._CALLER: block["caller"]} if isinstance(block.get("caller"), dict) else None
            part = NativeToolReturnPart(tool_name=WebSearchTool.kind, content=content,
                                        tool_call_id=_str(block.get("tool_use_id")), provider_name=PROVIDER,
                                        provider_details=details)
            yield pm.handle_part(vendor_part_id=index, part=part)
        else:
            self._ignored.add(index)

    def _delta(self, index: int, delta: Any) -> Iterator[ModelResponseStreamEvent]:
        if index in self._ignored or not isinstance(delta, dict):
            return
        kind, pm = delta.get("type"), self._parts_manager
        if kind == "text_delta":
            yield from pm.handle_text_delta(vendor_part_id=index, content=_str(delta.get("text")))
        elif kind == "thinking_delta":
            yield from pm.handle_thinking_delta(vendor_part_id=index, content=_str(delta.get("thinking")),
                                                provider_name=PROVIDER)
        elif kind == "signature_delta":
            yield from pm.handle_thinking_delta(vendor_part_id=index, signature=_str(delta.get("signature")),
                                                provider_name=PROVIDER)
        elif kind == "input_json_delta":
            yield from pm.handle_tool_call_delta_events(vendor_part_id=index, args=_str(delta.get("partial_json")))
        elif kind == "citations_delta" and isinstance(delta.get("citation"), dict):
            self._citations.setdefault(index, []).append(delta["citation"])

    def _stop(self, index: int) -> Iterator[ModelResponseStreamEvent]:
        self._ignored.discard(index)
        raw = self._citations.pop(index, [])
        part = self._parts_manager.get_part_by_vendor_id(index)
        web = [c for c in raw if c.get("type") == "web_search_result_location"]
        if isinstance(part, TextPart) and web:
            sources = [WebCitationSource(url=_str(c.get("url")), title=c.get("title") if isinstance(c.get("title"), str) else None,
                                         excerpts=[c["cited_text"]] if isinstance(c.get("cited_text"), str) and c["cited_text"] else [])
                       for c in web]
            anchor = ContentCitationAnchor(start=0, end=len(part.content)) if part.content else None
            yield from self._parts_manager.handle_text_delta(
                vendor_part_id=index, content="", provider_name=PROVIDER,
                provider_details={"citations": [_ordered(c, _CITATION_KEYS) for c in raw]},
                citations=[Citation(sources=sources, anchor=anchor)])

    def _usage_from(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        self._details |= {k: v for k in _USAGE_KEYS if (v := _int(usage.get(k))) is not None}
        server = usage.get("server_tool_use")
        if isinstance(server, dict) and (searches := _int(server.get("web_search_requests"))):
            self._details["web_search_requests"] = searches
        creation = usage.get("cache_creation")
        if isinstance(creation, dict) and (hour := _int(creation.get("ephemeral_1h_input_tokens"))):
            self._details["ephemeral_1h_input_tokens"] = hour
        details = dict(self._details)
        if "ephemeral_1h_input_tokens" in details:
            capped = min(details["ephemeral_1h_input_tokens"], details.get("cache_creation_input_tokens", 0))
            if capped:
                details["ephemeral_1h_input_tokens"] = capped
            else:
                del details["ephemeral_1h_input_tokens"]
        priced: dict[str, Any] = dict(details)
        if searches := details.get("web_search_requests"):
            priced["server_tool_use"] = {"web_search_requests": searches}
        if hour := details.get("ephemeral_1h_input_tokens"):
            priced["cache_creation"] = {"ephemeral_1h_input_tokens": hour}
        self._usage = RequestUsage.extract(dict(model=self._model_name, usage=priced), provider=PROVIDER,
                                           provider_url=self._provider_url, provider_fallback=PROVIDER, details=details)

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def provider_name(self) -> str:
        return PROVIDER

    @property
    def provider_url(self) -> str:
        return self._provider_url

    @property
    def timestamp(self) -> datetime:
        return self._timestamp


def _index(event: dict[str, Any]) -> int:
    index = event.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise UnexpectedModelBehavior("a content block event without its index", str(event)[:500])
    return index


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


__all__ = ["ERROR_STATUS", "FINISH", "MessagesStream", "http_error", "message_events", "stream_events"]

"""OpenAI Responses events -> pydantic-ai parts (streamed and whole), usage and finish reasons.

The parts are those pydantic-ai's own Responses model made from the same events (their ids,
provider names and details are what ``responses_items`` replays): text by ``(item_id,
content_index)``, function calls by item id (arguments from the deltas, completed from the
``.done`` events of servers that send them only there), reasoning summaries as thinking parts
with the item's encrypted content as signature, and each ``web_search_call`` as a native call
and return. The stream must end with ``response.completed``, ``.incomplete`` or ``.failed`` (or
an ``error`` event); a body that stops before is a broken connection (``wire.sse``). Events of
hosted tools ketch does not offer are ignored.

It is one thing at this length: one reading of the Responses output (items, usage, finish and
error shapes) for both a stream and a whole answer, which must make the same parts of the same
output, since a server that cannot stream gets the whole-answer path for the same turns.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic_ai.exceptions import ModelAPIError, ModelConnectionError, ModelTimeoutError, UnexpectedModelBehavior
from pydantic_ai.messages import (
    Citation,
    MarkerCitationAnchor,
    ModelResponse,
    ModelResponsePart,
    ModelResponseStreamEvent,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    WebCitationSource,
)
from pydantic_ai.models import StreamedResponse
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.usage import RequestUsage

from ketch.wire.http import read_lines
from ketch.wire.sse import json_events

TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})
FINISH = {"max_output_tokens": "length", "content_filter": "content_filter", "completed": "stop",
          "cancelled": "error", "failed": "error"}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def error_for(model_name: str, code: Any, message: Any, error_type: Any = None, *, in_stream: bool) -> ModelAPIError:
    """The model error for a failure the server reported in a 200 body or stream, sorted as
    pydantic-ai sorts OpenAI's codes (rate limits, overload, context length, ...)."""
    from pydantic_ai import _model_errors
    from pydantic_ai.exceptions import ModelHTTPError

    code, message, error_type = _str(code), _str(message) or "the provider reported an error", _str(error_type)
    if in_stream:
        body: dict[str, Any] = {"code": code, "message": message}
        if error_type is not None:
            body["type"] = error_type
        error = _model_errors.stream_error(model_name, message, body)
        if isinstance(error, ModelHTTPError):
            return error
    category = _model_errors.openai_compatible_category(_model_errors.openai_compatible_status(code, error_type),
                                                        code, error_type, message)
    return (category or ModelAPIError)(model_name=model_name, message=f"{code}: {message}" if code else message,
                                       provider_error_code=code, provider_error_type=error_type, in_stream=in_stream)


def web_searches(response: dict[str, Any]) -> int:
    """Billed searches: ``tool_usage.web_search.num_requests``, else the ``search`` actions of the output."""
    if response.get("status") in ("in_progress", "queued"):
        return 0
    requests = _dict(_dict(response.get("tool_usage")).get("web_search")).get("num_requests")
    if isinstance(requests, int) and not isinstance(requests, bool):
        return requests
    return sum(1 for item in response.get("output") or [] if isinstance(item, dict)
               and item.get("type") == "web_search_call" and _dict(item.get("action")).get("type") == "search")


def usage_of(response: dict[str, Any], provider: str, provider_url: str, model: str) -> tuple[RequestUsage, bool]:
    """The response's usage (cached input and reasoning tokens in it) and whether the server reported any."""
    searches = web_searches(response)
    raw = response.get("usage")
    if not isinstance(raw, dict):
        if searches:
            return RequestUsage(unmeasured_requests=1, web_searches=searches,
                                details={"web_search_requests": searches}), False
        return RequestUsage(unmeasured_requests=1), False
    details = {k: v for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)
               and k not in ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "total_tokens")}
    output_details = raw.get("output_tokens_details")
    details["reasoning_tokens"] = _int(output_details.get("reasoning_tokens")) if isinstance(output_details, dict) else 0
    if searches:
        details["web_search_requests"] = searches
    usage = RequestUsage.extract(dict(model=model, usage=raw), provider=provider, provider_url=provider_url,
                                 provider_fallback="openai", api_flavor="responses", details=details)
    if searches:
        setattr(usage, "web_searches", searches)
    cache_write = _dict(raw.get("input_tokens_details")).get("cache_write_tokens")
    if isinstance(cache_write, int):
        usage.cache_write_tokens = cache_write
    return usage, True


def _citations(annotations: list[Any], text: str) -> tuple[list[Citation] | None, list[dict[str, Any]]]:
    citations: list[Citation] = []
    raw: list[dict[str, Any]] = []
    for a in annotations:
        if not isinstance(a, dict) or a.get("type") != "url_citation":
            continue
        url, title, start, end = a.get("url"), a.get("title"), a.get("start_index"), a.get("end_index")
        if not (isinstance(url, str) and isinstance(title, str) and isinstance(start, int) and isinstance(end, int)):
            continue
        raw.append({"end_index": end, "start_index": start, "title": title, "type": "url_citation", "url": url})
        anchor = MarkerCitationAnchor(start=start, end=end) if 0 <= start < end <= len(text) else None
        citations.append(Citation(sources=[WebCitationSource(url=url, title=title)], anchor=anchor))
    return citations or None, raw


def _search_parts(item: dict[str, Any], provider: str) -> tuple[NativeToolCallPart, NativeToolReturnPart]:
    item_id = _str(item.get("id")) or ""
    result: dict[str, Any] = {"status": item.get("status")}
    args: dict[str, Any] | None = None
    action = item.get("action")
    if isinstance(action, dict):
        args = {k: v for k, v in action.items() if v is not None}
        if sources := args.pop("sources", None):
            result["sources"] = sources
    return (NativeToolCallPart(tool_name=WebSearchTool.kind, tool_call_id=item_id, args=args, provider_name=provider, id=item_id),
            NativeToolReturnPart(tool_name=WebSearchTool.kind, tool_call_id=item_id, content=result, provider_name=provider))


def _timestamp(created_at: Any) -> datetime | None:
    if isinstance(created_at, int | float) and not isinstance(created_at, bool) and created_at:
        return datetime.fromtimestamp(created_at, tz=timezone.utc)
    return None


@dataclass
class ResponsesStream(StreamedResponse):
    """One Responses stream as pydantic-ai events."""

    _response: Any = None
    _model_name: str = ""
    _provider_name: str = "openai"
    _provider_url: str = ""
    _timestamp: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    _usage_received: bool | None = field(default=False, init=False)
    _events: Any = field(default=None, init=False)
    _first: Any = field(default=None, init=False)
    _args: dict[str, str] = field(default_factory=dict, init=False)
    _finalized: set[str] = field(default_factory=set, init=False)
    _annotations: dict[tuple[str, int], list[Any]] = field(default_factory=dict, init=False)
    _phases: dict[str, str] = field(default_factory=dict, init=False)
    _phase_started: set[tuple[str, int]] = field(default_factory=set, init=False)
    _refusal: str = field(default="", init=False)

    async def open(self) -> None:
        """Read the first event: an ``error`` there is raised before the stream is handed out (as the
        SDK model does, so a fallback can still act on it); a body with no event at all is an error."""
        lines = read_lines(self._response, self._model_name)
        self._events = json_events(lines, model_name=self._model_name, is_end=lambda f, e: _kind(f, e) in TERMINAL)
        try:
            self._first = await self._events.__anext__()
        except StopAsyncIteration:
            raise UnexpectedModelBehavior("Streamed response ended without content or tool calls") from None
        except ModelTimeoutError:
            raise
        except ModelConnectionError as exc:
            # closed before any event (SSE comments do not count): what a server that cannot stream
            # tool calls does, which ``stream_refusal`` reads by this text
            from ketch.wire.stream_end import EMPTY_STREAM

            raise ModelConnectionError(self._model_name, f"{EMPTY_STREAM} ({exc.message})", phase="read") from exc
        frame, event = self._first
        if _kind(frame, event) == "error":
            raise error_for(self._model_name, event.get("code"), event.get("message"), in_stream=True)
        if _kind(frame, event) == "response.created":
            response = _dict(event.get("response"))
            self._model_name = _str(response.get("model")) or self._model_name
            if (when := _timestamp(response.get("created_at"))) is not None:
                self.provider_details = {"timestamp": when}

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        if self._events is None:
            await self.open()
        first, self._first = self._first, None
        if first is not None:
            for out in self._map(_kind(*first), first[1]):
                yield out
        async for frame, event in self._events:
            for out in self._map(_kind(frame, event), event):
                yield out
        if self._refusal:
            self.provider_details = {**(self.provider_details or {}), "refusal": self._refusal}

    # ------------------------------------------------------------ events
    def _map(self, kind: Any, event: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:  # noqa: C901
        if kind in ("response.created", "response.in_progress", "response.queued"):
            response = _dict(event.get("response"))
            if kind == "response.created" and _str(response.get("id")):
                self.provider_response_id = response["id"]
            if kind != "response.created":
                self._record_usage(response)
        elif kind == "response.completed":
            response = _dict(event.get("response"))
            self._terminal(response)
            self._record_usage(response)
            raw = _str(_dict(response.get("incomplete_details")).get("reason")) or _str(response.get("status"))
            if raw and not self._refusal:
                self.provider_details = {**(self.provider_details or {}), "finish_reason": raw}
                self.finish_reason = FINISH.get(raw)  # type: ignore[assignment]
        elif kind == "response.incomplete":
            response = _dict(event.get("response"))
            self._terminal(response)
            self._record_usage(response)
            raw = _str(_dict(response.get("incomplete_details")).get("reason"))
            if raw and not self._refusal:
                self.provider_details = {**(self.provider_details or {}), "finish_reason": raw}
                self.finish_reason = FINISH.get(raw)  # type: ignore[assignment]
        elif kind == "response.failed":
            response = _dict(event.get("response"))
            self._terminal(response)
            self._record_usage(response)
            error = response.get("error")
            if isinstance(error, dict):
                raise error_for(self._model_name, error.get("code"), error.get("message"), error.get("type"), in_stream=True)
            if not self._refusal:
                self.provider_details = {**(self.provider_details or {}), "finish_reason": "failed"}
                self.finish_reason = "error"
        elif kind == "error":
            raise error_for(self._model_name, event.get("code"), event.get("message"), in_stream=True)
        elif kind == "response.output_item.added":
            yield from self._item_added(_dict(event.get("item")))
        elif kind == "response.output_item.done":
            yield from self._item_done(_dict(event.get("item")))
        elif kind == "response.output_text.delta":
            delta, item_id = event.get("delta"), _str(event.get("item_id")) or ""
            if isinstance(delta, str):
                key = (item_id, _int(event.get("content_index")))
                details = None
                if key not in self._phase_started and (phase := self._phases.get(item_id)) is not None:
                    details = {"phase": phase}
                    self._phase_started.add(key)
                yield from self._parts_manager.handle_text_delta(vendor_part_id=key, content=delta, id=item_id,
                                                                 provider_name=self._provider_name, provider_details=details)
        elif kind == "response.output_text.annotation.added":
            key = (_str(event.get("item_id")) or "", _int(event.get("content_index")))
            self._annotations.setdefault(key, []).append(event.get("annotation"))
        elif kind == "response.output_text.done":
            yield from self._text_done(event)
        elif kind == "response.function_call_arguments.delta":
            item_id, delta = _str(event.get("item_id")) or "", event.get("delta")
            if item_id in self._args and item_id not in self._finalized and isinstance(delta, str):
                self._args[item_id] += delta
                yield from self._parts_manager.handle_tool_call_delta_events(vendor_part_id=item_id, args=delta)
        elif kind == "response.function_call_arguments.done":
            yield from self._finalize_call(_str(event.get("item_id")) or "", _str(event.get("arguments")) or "")
        elif kind in ("response.reasoning_summary_part.added", "response.reasoning_summary_text.delta"):
            item_id, index = _str(event.get("item_id")) or "", _int(event.get("summary_index"))
            text = _dict(event.get("part")).get("text") if kind.endswith("part.added") else event.get("delta")
            vendor = item_id if index == 0 else f"{item_id}-{index}"
            yield from self._parts_manager.handle_thinking_delta(vendor_part_id=vendor, content=_str(text) or "",
                                                                 id=item_id, provider_name=self._provider_name)
        elif kind == "response.reasoning_text.delta":
            item_id, delta = _str(event.get("item_id")) or "", _str(event.get("delta")) or ""
            yield from self._parts_manager.handle_thinking_delta(
                vendor_part_id=item_id, id=item_id, provider_name=self._provider_name,
                provider_details=_raw_content_updater(delta, _int(event.get("content_index"))))
        elif kind == "response.refusal.delta":
            self.finish_reason = "content_filter"
            self._refusal += _str(event.get("delta")) or ""
        elif kind == "response.refusal.done":
            self.finish_reason = "content_filter"
            self._refusal = _str(event.get("refusal")) or self._refusal
        # content_part.*, *.done summaries, web_search_call.* progress: nothing to take

    def _item_added(self, item: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        kind = item.get("type")
        if kind == "function_call":
            yield self._call_part(item)
        elif kind == "message" and _str(item.get("phase")) and _str(item.get("id")):
            self._phases[item["id"]] = item["phase"]
        elif kind == "web_search_call":
            call, _ = _search_parts(item, self._provider_name)
            call.args = None
            yield self._parts_manager.handle_part(vendor_part_id=f"{item.get('id')}-call", part=call)

    def _item_done(self, item: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        kind, item_id = item.get("type"), _str(item.get("id"))
        if kind == "function_call" and item_id:
            if not isinstance(self._parts_manager.get_part_by_vendor_id(item_id), ToolCallPart):
                yield self._call_part(item)
                self._finalized.add(item_id)
            else:
                yield from self._finalize_call(item_id, _str(item.get("arguments")) or "")
        elif kind == "reasoning" and item_id and (signature := _str(item.get("encrypted_content"))):
            yield from self._parts_manager.handle_thinking_delta(vendor_part_id=item_id, id=item_id, signature=signature,
                                                                 provider_name=self._provider_name)
        elif kind == "web_search_call" and item_id:
            call, result = _search_parts(item, self._provider_name)
            yield from self._parts_manager.handle_tool_call_delta_events(vendor_part_id=f"{item_id}-call", args=call.args)
            yield self._parts_manager.handle_part(vendor_part_id=f"{item_id}-return", part=result)

    def _call_part(self, item: dict[str, Any]) -> ModelResponseStreamEvent:
        item_id = _str(item.get("id"))
        arguments = _str(item.get("arguments")) or ""
        name, call_id = _str(item.get("name")), _str(item.get("call_id"))
        if not name or not call_id:
            raise UnexpectedModelBehavior("the provider sent a function call without a name or call id", json.dumps(item, allow_nan=False, default=str)[:500])
        if item_id is not None:
            self._args[item_id] = arguments
        details = {"namespace": item["namespace"]} if _str(item.get("namespace")) else None
        return self._parts_manager.handle_tool_call_part(vendor_part_id=item_id, tool_name=name, args=arguments,
                                                         tool_call_id=call_id, id=item_id,
                                                         provider_name=self._provider_name, provider_details=details)

    def _finalize_call(self, item_id: str, final: str) -> Iterator[ModelResponseStreamEvent]:
        if item_id in self._finalized or not final:
            return
        if not isinstance(self._parts_manager.get_part_by_vendor_id(item_id), ToolCallPart):
            return
        received = self._args.get(item_id, "")
        self._finalized.add(item_id)
        if received == final or not final.startswith(received):
            return  # the same, or a snapshot that contradicts what streamed: keep what streamed
        yield from self._parts_manager.handle_tool_call_delta_events(vendor_part_id=item_id, args=final[len(received):])
        self._args[item_id] = final

    def _text_done(self, event: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        item_id = _str(event.get("item_id")) or ""
        key = (item_id, _int(event.get("content_index")))
        text = _str(event.get("text")) or ""
        details: dict[str, Any] = {}
        annotations = self._annotations.pop(key, [])
        if key not in self._phase_started and (phase := self._phases.get(item_id)) is not None:
            details["phase"] = phase
            self._phase_started.add(key)
        existing = self._parts_manager.get_part_by_vendor_id(key)
        citations = None
        if isinstance(existing, TextPart) and existing.content == text:
            citations, raw = _citations(annotations, text)
            if citations:
                details["citations"] = raw
        if details and text:
            yield from self._parts_manager.handle_text_delta(vendor_part_id=key, content="", provider_name=self._provider_name,
                                                             provider_details=details, citations=citations)

    def _terminal(self, response: dict[str, Any]) -> None:
        self._model_name = _str(response.get("model")) or self._model_name
        self.provider_response_id = self.provider_response_id or _str(response.get("id"))
        if (when := _timestamp(response.get("created_at"))) is not None and "timestamp" not in (self.provider_details or {}):
            self.provider_details = {**(self.provider_details or {}), "timestamp": when}
        if tier := _str(response.get("service_tier")):
            self.provider_details = {**(self.provider_details or {}), "service_tier": tier}

    def _record_usage(self, response: dict[str, Any]) -> None:
        usage, reported = usage_of(response, self._provider_name, self._provider_url, self._model_name)
        self._add_usage(usage, reported=reported)

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def provider_name(self) -> str:
        return self._provider_name

    @property
    def provider_url(self) -> str:
        return self._provider_url

    @property
    def timestamp(self) -> datetime:
        return self._timestamp


def _kind(frame: Any, event: dict[str, Any]) -> Any:
    return event.get("type", frame.event)


def _raw_content_updater(delta: str, index: int) -> Any:
    def update(existing: dict[str, Any] | None) -> dict[str, Any]:
        details = {**(existing or {})}
        raw: list[str] = list(details.get("raw_content", []))
        while len(raw) <= index:
            raw.append("")
        raw[index] += delta
        details["raw_content"] = raw
        return details

    return update


# ---------------------------------------------------------------- a whole (non-streamed) response
def whole_response(raw: bytes, *, model_name: str, provider_name: str, provider_url: str) -> ModelResponse:
    """A ``stream: false`` answer as a ``ModelResponse`` (the same parts a stream of it makes)."""
    try:
        response = json.loads(raw, parse_constant=_no_constant)
    except ValueError as exc:
        raise UnexpectedModelBehavior(f"the provider sent a response that is not JSON ({exc})", raw[:500].decode("utf-8", "replace")) from None
    if not isinstance(response, dict):
        raise UnexpectedModelBehavior("the provider sent a response that is not a JSON object", raw[:500].decode("utf-8", "replace"))
    if isinstance(response.get("error"), dict):
        error = response["error"]
        raise error_for(model_name, error.get("code"), error.get("message"), error.get("type"), in_stream=False)
    output = response.get("output")
    if not isinstance(output, list):
        raise UnexpectedModelBehavior("the provider's response has no output list", raw[:500].decode("utf-8", "replace"))
    parts: list[ModelResponsePart] = []
    refusal: str | None = None
    for item in output:
        item = _dict(item)
        kind = item.get("type")
        if kind == "reasoning":
            parts.extend(_reasoning_parts(item, provider_name))
        elif kind == "message":
            for content in item.get("content") or []:
                content = _dict(content)
                if content.get("type") == "refusal":
                    refusal = _str(content.get("refusal"))
                elif content.get("type") == "output_text" and _str(content.get("text")):
                    details: dict[str, Any] = {}
                    citations, raw_citations = _citations(content.get("annotations") or [], content["text"])
                    if citations:
                        details["citations"] = raw_citations
                    if _str(item.get("phase")):
                        details["phase"] = item["phase"]
                    parts.append(TextPart(content["text"], id=_str(item.get("id")), provider_name=provider_name,
                                          provider_details=details or None, citations=citations))
        elif kind == "function_call":
            name, call_id = _str(item.get("name")), _str(item.get("call_id"))
            if not name or not call_id:
                raise UnexpectedModelBehavior("the provider sent a function call without a name or call id")
            details = {"namespace": item["namespace"]} if _str(item.get("namespace")) else None
            parts.append(ToolCallPart(name, _str(item.get("arguments")) or "", tool_call_id=call_id, id=_str(item.get("id")),
                                      provider_name=provider_name, provider_details=details))
        elif kind == "web_search_call":
            parts.extend(_search_parts(item, provider_name))
    usage, _ = usage_of(response, provider_name, provider_url, _str(response.get("model")) or model_name)
    provider_details: dict[str, Any] = {}
    if (when := _timestamp(response.get("created_at"))) is not None:
        provider_details["timestamp"] = when
    raw_finish = _str(_dict(response.get("incomplete_details")).get("reason")) or _str(response.get("status"))
    finish = FINISH.get(raw_finish) if raw_finish else None
    if refusal is not None:
        provider_details["refusal"] = refusal
        finish = "content_filter"
    elif raw_finish:
        provider_details["finish_reason"] = raw_finish
    return ModelResponse(parts=parts, usage=usage, model_name=_str(response.get("model")) or model_name,
                         provider_response_id=_str(response.get("id")), provider_name=provider_name,
                         provider_url=provider_url, provider_details=provider_details or None,
                         finish_reason=finish)  # type: ignore[arg-type]


def _reasoning_parts(item: dict[str, Any], provider_name: str) -> list[ThinkingPart]:
    signature = _str(item.get("encrypted_content"))
    raw = [c.get("text") for c in item.get("content") or [] if isinstance(c, dict) and isinstance(c.get("text"), str)]
    details: dict[str, Any] = {"raw_content": raw} if raw else {}
    item_id = _str(item.get("id"))
    parts: list[ThinkingPart] = []
    summaries = [s for s in item.get("summary") or [] if isinstance(s, dict)]
    for summary in summaries:
        parts.append(ThinkingPart(content=_str(summary.get("text")) or "", id=item_id, signature=signature,
                                  provider_name=provider_name, provider_details=details or None))
        signature, details = None, {}
    if not summaries and (signature or details):
        parts.append(ThinkingPart(content="", id=item_id, signature=signature, provider_name=provider_name,
                                  provider_details=details or None))
    return parts


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


__all__ = ["ResponsesStream", "error_for", "usage_of", "whole_response"]

"""Chat Completions answers -> pydantic-ai parts: the streamed chunks and the whole-answer JSON.

A stream maps each ``choices[0].delta`` as pydantic-ai's Chat model did: reasoning from the
profile's field, ``reasoning`` or ``reasoning_content``; text (with a profile's thinking tags
split out); tool-call deltas by their ``index``; ``refusal`` as a content filter. Usage comes
from the chunk that carries it (the last one, with ``stream_options.include_usage``), cached
prompt tokens included. A stream ends at ``data: [DONE]`` (or, as some compatible servers end
it, after a finish reason); one that stops before either is a cut connection (``wire.sse``),
never a finished answer.

A dialect's stream (``wire.chat_groq_stream``, ``wire.chat_openrouter_stream``) keeps this loop and
overrides only its hook points: ``_map_chunk`` (a chunk's mapping), ``_chunk_extra`` and
``_thinking`` (parts of it), ``_stream_error`` and ``_answer_in_error`` (an error event, or one
that carries the answer), ``_ended`` (after the last chunk).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic_ai.exceptions import ModelConnectionError, ModelHTTPError, UnexpectedModelBehavior
from pydantic_ai.messages import (
    FinishReason,
    ModelResponse,
    ModelResponsePart,
    ModelResponseStreamEvent,
    PartStartEvent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from pydantic_ai.models import StreamedResponse
from pydantic_ai.profiles import DEFAULT_THINKING_TAGS
from pydantic_ai.usage import RequestUsage

import httpx

from ketch.wire.stream_end import EMPTY_STREAM
from ketch.wire.http import read_lines
from ketch.wire.sse import ENDED_EARLY, json_events

FINISH_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length", "tool_calls": "tool_call",
                                           "content_filter": "content_filter", "function_call": "tool_call"}
_TOKEN_KEYS = {"prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "total_tokens"}


def map_usage(usage: Any, *, model: str, provider: str, provider_url: str) -> RequestUsage | None:
    """A Chat ``usage`` object as pydantic-ai's usage (prices read it); None when there is none."""
    if not isinstance(usage, dict):
        return None
    data = {k: v for k, v in usage.items() if v is not None}
    details = {k: v for k, v in data.items() if k not in _TOKEN_KEYS and isinstance(v, int) and not isinstance(v, bool)}
    completion = data.get("completion_tokens_details")
    if isinstance(completion, dict):
        details.update({k: v for k, v in completion.items() if v is not None})
    result = RequestUsage.extract({"model": model, "usage": data}, provider=provider, provider_url=provider_url,
                                  provider_fallback="openai", api_flavor="chat", details=details)
    prompt = data.get("prompt_tokens_details")
    if isinstance(prompt, dict) and isinstance(prompt.get("cache_write_tokens"), int):
        result.cache_write_tokens = prompt["cache_write_tokens"]
    return result


def _text(content: Any) -> Any:
    """``content`` as a string: a list of text parts (some compatible servers) joined."""
    if not isinstance(content, list):
        return content
    texts = [p if isinstance(p, str) else p.get("text") for p in content
             if isinstance(p, str) or (isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))]
    return "".join(texts) if texts else None


def http_error(error: dict[str, Any], model_name: str, *, in_stream: bool = True) -> ModelHTTPError:
    """An ``error`` object a server sent inside a stream or a 200 answer: the HTTP error its
    ``code`` names (500 when the code is not an HTTP error status)."""
    code = error.get("code")
    status = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600 else 500
    return ModelHTTPError(status, model_name, error, in_stream=in_stream)


class AnswerInError(Exception):
    """Raised by a dialect's :meth:`ChatStream._stream_error` for an error event that carries the
    answer itself (Groq's ``tool_use_failed``): the stream ends with the parts
    :meth:`ChatStream._answer_in_error` makes of it instead of failing."""

    def __init__(self, body: Any) -> None:
        super().__init__("an answer inside an error event")
        self.body = body


def first_message(body: Any, provider_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A whole answer's ``choices[0]`` and its ``message``; a body of another shape is an error."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list) or not body["choices"]:
        raise UnexpectedModelBehavior(f"Invalid response from {provider_name} chat completions endpoint, expected a "
                                      "completion with choices", str(body)[:500])
    choice = body["choices"][0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise UnexpectedModelBehavior(f"Invalid response from {provider_name} chat completions endpoint: no message",
                                      str(body)[:500])
    return choice, message


def _timestamp(created: Any) -> datetime | None:
    if isinstance(created, int | float) and not isinstance(created, bool) and created:
        return datetime.fromtimestamp(created, tz=timezone.utc)
    return None


@dataclass
class ChatStream(StreamedResponse):
    """One streamed Chat Completions answer as pydantic-ai events."""

    _response: Any = None
    _model_name: str = ""
    _profile: Any = None
    _provider_name: str = ""
    _provider_url: str = ""
    _timestamp: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    _usage_received: bool | None = field(default=False, init=False)
    _content_generation: int = field(default=0, init=False)
    _reasoning_generation: int = field(default=0, init=False)
    _held_whitespace: str = field(default="", init=False)
    _awaiting_text: bool = field(default=False, init=False)
    _refusal: str = field(default="", init=False)
    _has_finish: bool = field(default=False, init=False)
    _created: bool = field(default=False, init=False)
    _events: Any = field(default=None, init=False)
    _first: Any = field(default=None, init=False)
    _finish_reasons: dict[str, FinishReason] = field(default_factory=lambda: FINISH_REASONS)

    async def prime(self) -> None:
        """Read up to the first event before the stream is handed over, as the SDK did: a server
        that refuses (an error event) or closes the stream before any event fails the request
        itself, where ``providers.stream_refusal`` can still ask for a whole answer."""
        self._events = json_events(read_lines(self._response, self._model_name), model_name=self._model_name,
                                   is_end=lambda f, p: False, done_sentinel="[DONE]")
        try:
            self._first = await anext(self._events, None)
        except ModelConnectionError as exc:
            if getattr(exc, "phase", None) == "read" and not isinstance(exc.__cause__, httpx.TimeoutException):
                raise ModelConnectionError(self._model_name, f"{EMPTY_STREAM} ({exc.message})", phase="read") from exc
            raise
        if self._first is not None and isinstance(self._first[1].get("error"), dict):
            list(self._chunk(self._first[1]))  # raises the provider's error

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        if self._events is None:
            await self.prime()
        try:
            if self._first is not None:
                for event in self._chunk(self._first[1]):
                    yield event
                async for _frame, chunk in self._events:
                    for event in self._chunk(chunk):
                        yield event
        except AnswerInError as answer:  # a dialect's error event that carries the answer
            for event in self._answer_in_error(answer):
                yield event
        except ModelConnectionError as exc:
            # Some compatible servers end a finished answer without [DONE] (providers.stream_end
            # accepts a finish reason as the end too); without either, the answer was cut.
            if not (self._has_finish and ENDED_EARLY in str(exc)):
                raise
        self._ended()

    def _ended(self) -> None:
        """After the last chunk: a refusal's text in the details; no finish reason sent means ``stop``."""
        if self._refusal:
            self.provider_details = {**(self.provider_details or {}), "refusal": self._refusal}
        if not self._has_finish and not self._refusal and not self.cancelled:
            self.finish_reason = "stop"

    def _answer_in_error(self, answer: AnswerInError) -> Iterator[ModelResponseStreamEvent]:
        """The parts a dialect makes of an :class:`AnswerInError` its :meth:`_stream_error` raised (none here)."""
        raise answer

    def _stream_error(self, chunk: dict[str, Any]) -> Exception:
        """What an ``error`` object inside the stream raises: the HTTP error its ``code`` names."""
        return http_error(chunk["error"], self._model_name)

    def _chunk(self, chunk: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        if isinstance(chunk.get("error"), dict):  # an error sent inside the stream
            raise self._stream_error(chunk)
        yield from self._map_chunk(chunk)

    def _map_chunk(self, chunk: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        """One chunk without an error: its top-level fields, then ``choices[0]``'s delta."""
        if not self._created and (stamp := _timestamp(chunk.get("created"))) is not None:
            self._created = True
            self.provider_details = {**(self.provider_details or {}), "timestamp": stamp}
        usage = map_usage(chunk.get("usage"), model=self.model_name, provider=self._provider_name,
                          provider_url=self._provider_url)
        if usage is not None:
            self._add_usage(usage, reported=True)
        if isinstance(chunk.get("id"), str) and chunk["id"]:
            self.provider_response_id = chunk["id"]
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self._model_name = chunk["model"]
        if isinstance(chunk.get("service_tier"), str):
            self.provider_details = {**(self.provider_details or {}), "service_tier": chunk["service_tier"]}
        yield from self._chunk_extra(chunk)
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            return
        choice = choices[0]
        if not isinstance(choice, dict):
            raise UnexpectedModelBehavior("the provider sent a choice that is not an object", str(choice)[:500])
        raw_finish = choice.get("finish_reason")
        self._has_finish = self._has_finish or bool(raw_finish)
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        if isinstance(delta.get("refusal"), str) and delta["refusal"]:
            self._refusal += delta["refusal"]
            self.finish_reason = "content_filter"
            return
        if raw_finish and not self._refusal:
            self.finish_reason = self._finish_reasons.get(raw_finish)
        if raw_finish:
            details = dict(self.provider_details or {})
            if not self._refusal:
                details["finish_reason"] = raw_finish
            self.provider_details = details
        yield from self._thinking(delta)
        yield from self._content(delta)
        yield from self._tool_calls(delta)

    def _chunk_extra(self, chunk: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        """A dialect's top-level chunk fields, as events before the chunk's deltas (none here)."""
        return iter(())

    def _boundary(self, source: str) -> None:
        if source != "reasoning":
            self._reasoning_generation += 1
            self._awaiting_text = False
        if source != "content" and isinstance(
            self._parts_manager.get_part_by_vendor_id(("content", self._content_generation)), TextPart
        ):
            self._content_generation += 1
            self._awaiting_text = source == "reasoning"

    def _thinking(self, delta: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        custom = self._profile.get("openai_chat_thinking_field", None)
        for name in (custom, "reasoning", "reasoning_content"):
            if not name:
                continue
            value = delta.get(name)
            if not value or not isinstance(value, str):
                continue
            for event in self._parts_manager.handle_thinking_delta(
                vendor_part_id=("reasoning", name, self._reasoning_generation), id=name, content=value,
                provider_name=self.provider_name,
            ):
                if isinstance(event, PartStartEvent):
                    self._boundary("reasoning")
                yield event
            break

    def _content(self, delta: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        content = _text(delta.get("content"))
        if not isinstance(content, str) or not content:
            return
        emitted = False
        for event in self._parts_manager.handle_text_delta(
            vendor_part_id=("content", self._content_generation), content=content,
            thinking_tags=self._profile.get("thinking_tags", DEFAULT_THINKING_TAGS),
            ignore_leading_whitespace=self._profile.get("ignore_streamed_leading_whitespace", False),
        ):
            emitted = True
            if isinstance(event, PartStartEvent):
                self._boundary("content")
                if isinstance(event.part, ThinkingPart):
                    event.part.id = "content"
                    event.part.provider_name = self.provider_name
                elif isinstance(event.part, TextPart) and self._held_whitespace:
                    event.part.content = self._held_whitespace + event.part.content
                    self._held_whitespace = ""
            yield event
        if not emitted and content.isspace() and self._awaiting_text:
            self._held_whitespace += content

    def _tool_calls(self, delta: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        calls = delta.get("tool_calls")
        if calls is None:
            return
        if not isinstance(calls, list):
            raise UnexpectedModelBehavior("the provider sent tool_calls that are not a list", str(calls)[:500])
        for call in calls:
            if not isinstance(call, dict) or not isinstance(call.get("index"), int):
                raise UnexpectedModelBehavior("the provider sent a tool call delta without an index", str(call)[:500])
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            name, args = function.get("name"), function.get("arguments")
            extra = call.get("extra_content")
            for event in self._parts_manager.handle_tool_call_delta_events(
                vendor_part_id=call["index"], tool_name=name if isinstance(name, str) else None,
                args=args if isinstance(args, str) else None,
                tool_call_id=call.get("id") if isinstance(call.get("id"), str) else None,
                provider_name=self.provider_name if extra else None,
                provider_details={"extra_content": extra} if extra else None,
            ):
                if isinstance(event, PartStartEvent):
                    self._boundary("tool")
                yield event

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


def completion_response(body: Any, *, model_name: str, profile: Any, provider_name: str, provider_url: str,
                        finish_reasons: dict[str, FinishReason] = FINISH_REASONS) -> ModelResponse:
    """A whole (non-streamed) Chat completion as a ModelResponse; a body of another shape is an error."""
    from pydantic_ai._thinking_part import split_content_into_text_and_thinking
    from pydantic_ai._utils import generate_tool_call_id

    choice, message = first_message(body, provider_name)
    model = body.get("model") if isinstance(body.get("model"), str) else model_name
    details: dict[str, Any] = {}
    raw_finish = choice.get("finish_reason")
    if raw_finish:
        details["finish_reason"] = raw_finish
    finish = finish_reasons.get(raw_finish) if raw_finish else "stop"
    usage = map_usage(body.get("usage"), model=model, provider=provider_name, provider_url=provider_url) or RequestUsage()
    stamp = _timestamp(body.get("created"))
    response_id = body.get("id") if isinstance(body.get("id"), str) and body.get("id") else None
    if isinstance(message.get("refusal"), str) and message["refusal"]:
        details.pop("finish_reason", None)
        details["refusal"] = message["refusal"]
        if stamp:
            details["timestamp"] = stamp
        return ModelResponse(parts=[], usage=usage, model_name=model, provider_details=details or None,
                             provider_response_id=response_id, provider_name=provider_name,
                             provider_url=provider_url, finish_reason="content_filter")
    parts: list[ModelResponsePart] = []
    custom = profile.get("openai_chat_thinking_field", None)
    for name in (custom, "reasoning", "reasoning_content"):
        if name and isinstance(message.get(name), str) and message[name]:
            parts.append(ThinkingPart(id=name, content=message[name], provider_name=provider_name))
            break
    content = _text(message.get("content"))
    if content is not None and not isinstance(content, str):
        raise UnexpectedModelBehavior("the provider sent message content that is not text", str(content)[:500])
    for part in split_content_into_text_and_thinking(content or "", profile.get("thinking_tags", DEFAULT_THINKING_TAGS)):
        if isinstance(part, ThinkingPart):
            part.id, part.provider_name = "content", provider_name
        parts.append(part)
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise UnexpectedModelBehavior("the provider sent a tool call without a function name", str(call)[:500])
        extra = call.get("extra_content")
        args = function.get("arguments")
        parts.append(ToolCallPart(function["name"], args if isinstance(args, str | dict) else None,
                                  tool_call_id=call.get("id") or generate_tool_call_id(),
                                  provider_name=provider_name if extra else None,
                                  provider_details={"extra_content": extra} if extra else None))
    if stamp:
        details["timestamp"] = stamp
    return ModelResponse(parts=parts, usage=usage, model_name=model, provider_details=details or None,
                         provider_response_id=response_id, provider_name=provider_name, provider_url=provider_url,
                         finish_reason=finish)


__all__ = ["AnswerInError", "ChatStream", "completion_response", "first_message", "http_error", "map_usage"]

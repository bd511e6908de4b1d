"""Groq's answers -> pydantic-ai parts, as pydantic-ai's ``GroqModel`` mapped them (no ``groq`` SDK).

``reasoning`` becomes a thinking part; ``executed_tools`` entries of type ``search`` become the
provider-executed ``web_search`` call and its result (``search_results`` in the SDK model's shape,
arguments that are not JSON kept as ``{"unreadable_arguments": ...}``); usage comes from
``x_groq.usage`` in a stream and ``usage`` in a whole answer; Groq's ``tool_use_failed`` error
carries the model's malformed tool call, which becomes that call (for ketch to send back for a
retry) instead of an error; any other ``error`` object in a stream is the HTTP error it names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelResponseStreamEvent, NativeToolCallPart, NativeToolReturnPart
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import DEFAULT_THINKING_TAGS
from pydantic_ai.usage import RequestUsage

from ketch.wire.chat_stream import AnswerInError, ChatStream


def readable_arguments(raw: Any) -> str:
    """An ``executed_tools`` entry's ``arguments``, or ``{"unreadable_arguments": <text>}`` when not JSON."""
    try:
        json.loads(raw or "{}")
    except (TypeError, ValueError):
        return json.dumps({"unreadable_arguments": str(raw)}, allow_nan=False)
    return raw


_RESULT_FIELDS = ("content", "score", "title", "url")


def search_results(raw: Any) -> Any:
    """``search_results`` as the SDK's model dumped it: its declared fields (None when absent) first."""
    if not isinstance(raw, dict):
        return raw
    results = raw.get("results")
    if isinstance(results, list):
        results = [{**{k: r.get(k) for k in _RESULT_FIELDS}, **{k: v for k, v in r.items() if k not in _RESULT_FIELDS}}
                   if isinstance(r, dict) else r for r in results]
    return {"images": raw.get("images"), "results": results,
            **{k: v for k, v in raw.items() if k not in ("images", "results")}}


def executed_parts(tool: Any, provider: str, call_id: str | None = None) -> tuple[NativeToolCallPart | None,
                                                                                  NativeToolReturnPart | None]:
    """The search call and result one ``executed_tools`` entry stands for (other kinds: none)."""
    if not isinstance(tool, dict) or tool.get("type") != "search":
        return None, None
    from pydantic_ai._utils import generate_tool_call_id
    from pydantic_core import from_json

    found = tool.get("search_results")
    results = (search_results(found) if isinstance(found, dict) and (found.get("images") or found.get("results"))
               else tool.get("output"))
    call_id = call_id or generate_tool_call_id()
    call = NativeToolCallPart(tool_name=WebSearchTool.kind, args=from_json(readable_arguments(tool.get("arguments"))),
                              provider_name=provider, tool_call_id=call_id)
    result = NativeToolReturnPart(tool_name=WebSearchTool.kind, content=results, provider_name=provider,
                                  tool_call_id=call_id)
    return call, result


def failed_generation(body: Any) -> Any:
    """The tool call (name, arguments) or text of Groq's ``tool_use_failed`` error body, or None."""
    error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else body
    if not isinstance(error, dict) or error.get("code") != "tool_use_failed" or error.get("type") != "invalid_request_error":
        return None
    text = error.get("failed_generation")
    if not isinstance(text, str) or not isinstance(error.get("message"), str):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict) and isinstance(data.get("name"), str) and isinstance(data.get("arguments"), dict):
        return (data["name"], data["arguments"])
    return text


def groq_usage(usage: Any, *, model: str, provider: str, provider_url: str) -> RequestUsage:
    if not isinstance(usage, dict):
        return RequestUsage(unmeasured_requests=1)
    data = {k: v for k, v in usage.items() if v is not None}
    details = {k: v for k, v in data.items() if k not in {"prompt_tokens", "completion_tokens", "total_tokens"}
               and isinstance(v, int)}
    completion = data.get("completion_tokens_details")
    if isinstance(completion, dict):
        details.update({k: v for k, v in completion.items() if isinstance(v, int)})
    return RequestUsage.extract({"model": model, "usage": data}, provider=provider, provider_url=provider_url,
                                provider_fallback="groq", details=details or None)


def stamp(created: Any) -> datetime | None:
    if isinstance(created, int | float) and not isinstance(created, bool):
        return datetime.fromtimestamp(created, tz=timezone.utc)
    return None


@dataclass
class GroqStream(ChatStream):
    """One streamed Groq answer as pydantic-ai events (``GroqStreamedResponse``'s mapping)."""

    _reasoning_index: int = field(default=0, init=False)
    _reasoning: bool = field(default=False, init=False)
    _executed_call_id: str | None = field(default=None, init=False)
    _first_chunk: bool = field(default=True, init=False)

    async def prime(self) -> None:
        try:
            await super().prime()
        except _ToolUseFailed as failed:  # before any event: the request fails, as the SDK's peek did
            raise ModelHTTPError(400, self._model_name, failed.body, in_stream=True) from None

    def _stream_error(self, chunk: dict[str, Any]) -> Exception:
        if (generation := failed_generation(chunk)) is not None:
            return _ToolUseFailed(generation, chunk)
        return super()._stream_error(chunk)

    def _answer_in_error(self, answer: AnswerInError) -> Iterator[ModelResponseStreamEvent]:
        """The model's malformed tool call (or text), for ketch to send back for a retry."""
        generation = answer.generation if isinstance(answer, _ToolUseFailed) else None
        if isinstance(generation, tuple):
            yield self._parts_manager.handle_tool_call_part(vendor_part_id="tool_use_failed", tool_name=generation[0],
                                                            args=generation[1])
        elif generation:
            yield from self._parts_manager.handle_text_delta(vendor_part_id="tool_use_failed", content=generation)

    def _ended(self) -> None:
        """Groq's mapping leaves the finish reason as sent (none when none came)."""

    def _map_chunk(self, chunk: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        """Groq's own mapping: ``x_groq`` usage, ``reasoning``, ``executed_tools``, no refusal field."""
        if self._first_chunk:
            self._first_chunk = False
            if isinstance(chunk.get("model"), str):
                self._model_name = chunk["model"]
            if (created := stamp(chunk.get("created"))) is not None:
                self.provider_details = {"timestamp": created}
        x_groq = chunk.get("x_groq") if isinstance(chunk.get("x_groq"), dict) else None
        usage = x_groq.get("usage") if x_groq else None
        self._add_usage(groq_usage(usage, model=self._model_name, provider=self._provider_name,
                                   provider_url=self._provider_url), reported=usage is not None)
        if chunk.get("id"):
            self.provider_response_id = chunk["id"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        if raw := choice.get("finish_reason"):
            self.provider_details = {**(self.provider_details or {}), "finish_reason": raw}
            self.finish_reason = self._finish_reasons.get(raw)
            self._has_finish = True
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        reasoning = delta.get("reasoning")
        if reasoning is None:
            self._reasoning = False
        else:
            if not self._reasoning:
                self._reasoning_index += 1
                self._reasoning = True
            yield from self._parts_manager.handle_thinking_delta(vendor_part_id=f"reasoning-{self._reasoning_index}",
                                                                 content=reasoning)
        for tool in delta.get("executed_tools") or []:
            call, result = executed_parts(tool, self.provider_name, self._executed_call_id)
            if call is None or not isinstance(tool, dict):
                continue
            index = tool.get("index")
            if result.content:  # the finished entry: its result (the call came in an earlier delta)
                self._executed_call_id = None
                yield self._parts_manager.handle_part(vendor_part_id=f"executed_tools-{index}-return", part=result)
            else:
                self._executed_call_id = call.tool_call_id
                yield self._parts_manager.handle_part(vendor_part_id=f"executed_tools-{index}-call", part=call)
        if content := delta.get("content"):
            yield from self._parts_manager.handle_text_delta(
                vendor_part_id="content", content=content,
                thinking_tags=self._profile.get("thinking_tags", DEFAULT_THINKING_TAGS),
                ignore_leading_whitespace=self._profile.get("ignore_streamed_leading_whitespace", False))
        for call in delta.get("tool_calls") or []:
            function = call.get("function") if isinstance(call.get("function"), dict) else None
            yield from self._parts_manager.handle_tool_call_delta_events(
                vendor_part_id=call.get("index"), tool_name=function.get("name") if function else None,
                args=function.get("arguments") if function else None, tool_call_id=call.get("id"))


class _ToolUseFailed(AnswerInError):
    """Groq's ``tool_use_failed``: ``generation`` is the call ``(name, arguments)`` or the text."""

    def __init__(self, generation: Any, body: Any) -> None:
        super().__init__(body)
        self.generation = generation


__all__ = ["GroqStream", "executed_parts", "failed_generation", "groq_usage", "readable_arguments", "stamp"]

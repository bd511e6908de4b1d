"""Gemini ``GenerateContentResponse`` chunks as pydantic-ai response parts, usage and finish reason.

Read the way pydantic-ai's ``GoogleModel`` read them through google-genai, so histories and
prices stay what they were: text and thought runs (a run ends at any other part), function
calls with Gemini's ids, each ``thoughtSignature`` kept in the part's ``provider_details`` in
the standard base64 alphabet, hosted search as ``web_search`` native tool parts (Gemini 3's
``toolCall``/``toolResponse`` parts under Gemini's id, with the grounding sources added to the
last return; else one call and return rebuilt from ``groundingMetadata``), cumulative
``usageMetadata`` priced by genai-prices, ``finishReason`` mapped (``MAX_TOKENS`` is ``length``,
``SAFETY`` a content filter), a blocked prompt's ``promptFeedback``, Google's error status.
Anything of the wrong type is an error, never skipped.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from uuid import uuid4

from pydantic_ai import _model_errors, _utils
from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior
from pydantic_ai.messages import (
    BinaryContent,
    FilePart,
    ModelResponseStreamEvent,
    NativeToolCallPart,
    NativeToolReturnPart,
)
from pydantic_ai.models import StreamedResponse
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.usage import RequestUsage

from ketch.wire.gemini_body import dumps

PROVIDER = "google"
"""pydantic-ai's name for the Gemini API, kept so stored histories replay their signatures."""
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "CONTINUATION": "length", "SAFETY": "content_filter",
           "RECITATION": "content_filter", "LANGUAGE": "error", "BLOCKLIST": "content_filter",
           "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter", "MALFORMED_FUNCTION_CALL": "error",
           "IMAGE_SAFETY": "content_filter", "UNEXPECTED_TOOL_CALL": "error", "IMAGE_PROHIBITED_CONTENT": "content_filter",
           "NO_IMAGE": "error", "MODEL_ARMOR": "content_filter"}
"""Gemini's ``finishReason`` -> pydantic-ai's (``OTHER`` and unknown ones: none)."""

def google_error(status: int, model_name: str, body: Any, headers: Any = None, *, in_stream: bool = False) -> ModelHTTPError:
    """Google's error status (``{"error": {"code", "message", "status", "details"}}``) as the
    pydantic-ai error of its kind, as the SDK's model raised it."""
    error = body.get("error") if isinstance(body, dict) else None
    status_name = error.get("status") if isinstance(error, dict) and isinstance(error.get("status"), str) else None
    message = error.get("message") if isinstance(error, dict) else None
    category = _model_errors.google_status_category(status_name, message, body) \
        or _model_errors.http_status_category(status, message)
    result = ModelHTTPError.for_category(category, status_code=status, model_name=model_name, body=body,
                                         headers=headers, provider_error_code=status_name, in_stream=in_stream)
    result.retry_after = _model_errors.google_retry_after(result)
    return result


def is_last(chunk: dict[str, Any]) -> bool:
    if "error" in chunk:
        return True
    candidates = chunk.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) and candidates[0].get("finishReason"):
        return True
    feedback = chunk.get("promptFeedback")
    return isinstance(feedback, dict) and bool(feedback.get("blockReason"))


async def payloads(events: AsyncIterator[tuple[Any, dict[str, Any]]]) -> AsyncIterator[dict[str, Any]]:
    async for _frame, chunk in events:
        yield chunk


async def one(payload: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    yield payload



# ---------------------------------------------------------------- response: chunks -> parts
def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass
class GeminiStream(StreamedResponse):
    """Gemini chunks as pydantic-ai events: text and thought runs, function calls with their ids,
    thought signatures in ``provider_details``, hosted search as native tool parts."""

    _chunks: Any = None
    _model_name: str = ""
    _provider_url: str = ""
    _billed_per_prompt: bool = False
    _timestamp: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    _usage_received: bool | None = field(default=False, init=False)
    _text_run: Any = field(default=None, init=False)
    _tool_invocations: bool = field(default=False, init=False)
    _pending_search: NativeToolReturnPart | None = field(default=None, init=False)
    _grounding: dict[str, Any] | None = field(default=None, init=False)
    _finished: bool = field(default=False, init=False)

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        self.canonical_system = PROVIDER
        async for chunk in self._chunks:
            if "error" in chunk:
                error = _dict(chunk["error"])
                code = error.get("code")
                status = code if isinstance(code, int) and 400 <= code < 600 else 500
                raise google_error(status, self._model_name, chunk, in_stream=True)
            for event in self._chunk(chunk):
                yield event
        if not self._finished:  # a whole response without a finish reason is as cut as a stream
            raise UnexpectedModelBehavior("the Gemini response ended without a finishReason")
        for event in self._trailing_grounding():
            yield event

    def _chunk(self, chunk: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        self._usage_from(chunk)
        if isinstance(chunk.get("modelVersion"), str) and chunk["modelVersion"]:
            self._model_name = chunk["modelVersion"]
        if isinstance(chunk.get("responseId"), str):
            self.provider_response_id = chunk["responseId"]
        candidates = _list(chunk.get("candidates"))
        if not candidates:
            feedback = _dict(chunk.get("promptFeedback"))
            if feedback.get("blockReason"):
                self._finished = True
                self.finish_reason = "content_filter"
                details = {"block_reason": feedback["blockReason"]}
                if feedback.get("blockReasonMessage"):
                    details["block_reason_message"] = feedback["blockReasonMessage"]
                self.provider_details = {**(self.provider_details or {}), **details}
            return
        candidate = _dict(candidates[0])
        if isinstance(reason := candidate.get("finishReason"), str) and reason:
            self._finished = True
            self.finish_reason = _FINISH.get(reason)  # type: ignore[assignment]
            details: dict[str, Any] = {"finish_reason": reason}
            if candidate.get("safetyRatings"):
                details["safety_ratings"] = candidate["safetyRatings"]
            self.provider_details = {**(self.provider_details or {}), **details}
        if isinstance(candidate.get("groundingMetadata"), dict):
            self._grounding = candidate["groundingMetadata"]
        parts = _list(_dict(candidate.get("content")).get("parts"))
        if any(isinstance(p, dict) and ("toolCall" in p or "toolResponse" in p) for p in parts):
            self._tool_invocations = True
        for part in parts:
            if not isinstance(part, dict):
                raise UnexpectedModelBehavior("the provider sent a part that is not a JSON object", str(part)[:500])
            yield from self._part(part)

    def _part(self, part: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        signature = part.get("thoughtSignature")
        details = {"thought_signature": _standard_b64(signature)} if signature else None
        provider = PROVIDER if details else None
        text = part.get("text")
        if text is not None and not isinstance(text, str):
            raise UnexpectedModelBehavior("the provider sent a text part whose text is not a string")
        if text == "" and not details:
            return
        is_text = text is not None and not part.get("thought")
        if is_text and self._text_run is None:
            self._text_run = uuid4()
        if text is not None:
            if part.get("thought"):
                yield from self._parts_manager.handle_thinking_delta(vendor_part_id=None, content=text,
                                                                     provider_name=provider, provider_details=details)
            else:
                yield from self._parts_manager.handle_text_delta(vendor_part_id=self._text_run, content=text,
                                                                 provider_name=provider, provider_details=details)
        elif isinstance(call := part.get("functionCall"), dict):
            if not isinstance(call.get("name"), str) or not isinstance(call.get("args", {}), dict):
                raise UnexpectedModelBehavior("the provider sent a function call without a name or object args")
            yield from self._parts_manager.handle_tool_call_delta_events(
                vendor_part_id=uuid4(), tool_name=call["name"], args=call.get("args", {}),
                tool_call_id=call.get("id") if isinstance(call.get("id"), str) else None,
                provider_name=provider, provider_details=details)
        elif isinstance(blob := part.get("inlineData"), dict):
            if not part.get("thought"):
                data = base64.b64decode(_standard_b64(blob.get("data") or ""), validate=True)
                content = BinaryContent.narrow_type(BinaryContent(data=data, media_type=str(blob.get("mimeType") or "")))
                yield self._parts_manager.handle_part(vendor_part_id=uuid4(), part=FilePart(
                    content=content, provider_name=provider, provider_details=details))
        elif isinstance(part.get("toolCall"), dict) or isinstance(part.get("toolResponse"), dict):
            yield from self._native(part, details)
        elif part.get("functionResponse") is None and not (set(part) <= {"thoughtSignature", "partMetadata"}):
            raise UnexpectedModelBehavior(f"Unsupported response from Gemini: {dumps(part)[:500]}")
        if is_text or not (set(part) <= {"thoughtSignature", "partMetadata"} or "functionResponse" in part):
            if not is_text:
                self._text_run = None  # the next text starts a part of its own

    def _native(self, part: dict[str, Any], details: dict[str, Any] | None) -> Iterator[ModelResponseStreamEvent]:
        raw = _dict(part.get("toolCall") or part.get("toolResponse"))
        if raw.get("toolType") != "GOOGLE_SEARCH_WEB":
            raise UnexpectedModelBehavior(f"Unknown tool type on native tool part: {raw.get('toolType')!r}")
        call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else _utils.generate_tool_call_id()
        if "toolCall" in part:
            item: Any = NativeToolCallPart(provider_name=PROVIDER, tool_name=WebSearchTool.kind, tool_call_id=call_id,
                                           args=raw.get("args"), provider_details=details)
            yield self._parts_manager.handle_part(vendor_part_id=uuid4(), part=item)
            return
        item = NativeToolReturnPart(provider_name=PROVIDER, tool_name=WebSearchTool.kind, tool_call_id=call_id,
                                    content=raw.get("response"), provider_details=details)
        if self._pending_search is not None:  # only the last search of a response gets the sources
            yield self._parts_manager.handle_part(vendor_part_id=self._pending_search.tool_call_id, part=self._pending_search)
        self._pending_search = item
        self._parts_manager.handle_part(vendor_part_id=call_id, part=item)  # its place; shown once complete

    def _sources(self) -> list[dict[str, Any]]:
        chunks = _list(_dict(self._grounding).get("groundingChunks"))
        return [{"domain": web.get("domain"), "title": web.get("title"), "uri": web.get("uri")}
                for web in (_dict(_dict(c).get("web")) for c in chunks) if web]

    def _trailing_grounding(self) -> Iterator[ModelResponseStreamEvent]:
        """Gemini sends the grounding metadata once, on the last chunk, after the text it grounds."""
        if (pending := self._pending_search) is not None:
            if sources := self._sources():
                content = pending.content if _utils.is_str_dict(pending.content) else {}
                pending.content = {**content, "sources": sources}
            yield self._parts_manager.handle_part(vendor_part_id=pending.tool_call_id, part=pending)
        queries = [q for q in _list(_dict(self._grounding).get("webSearchQueries")) if isinstance(q, str)]
        if not self._tool_invocations and queries:
            call_id = _utils.generate_tool_call_id()
            yield self._parts_manager.handle_part(vendor_part_id=uuid4(), part=NativeToolCallPart(
                provider_name=PROVIDER, tool_name=WebSearchTool.kind, tool_call_id=call_id, args={"queries": queries}))
            yield self._parts_manager.handle_part(vendor_part_id=uuid4(), part=NativeToolReturnPart(
                provider_name=PROVIDER, tool_name=WebSearchTool.kind, tool_call_id=call_id,
                content=self._sources() if _dict(self._grounding).get("groundingChunks") else None))

    def _usage_from(self, chunk: dict[str, Any]) -> None:
        """``usageMetadata`` is cumulative: each one replaces the last, keeping fields a later one dropped."""
        metadata = chunk.get("usageMetadata")
        if isinstance(metadata, dict):
            self._add_usage(usage_of(chunk, metadata, self._provider_url, self._usage), reported=True, cumulative=True)
        grounding = [_dict(_dict(c).get("groundingMetadata")) for c in _list(chunk.get("candidates"))]
        queries = {q for g in grounding for q in _list(g.get("webSearchQueries")) if isinstance(q, str) and q.strip()}
        if queries:
            found = any(_dict(_dict(c).get("web")).get("uri") for g in grounding for c in _list(g.get("groundingChunks")))
            self._usage.details["web_search_requests"] = len(queries)
            searches = (1 if found else 0) if self._billed_per_prompt else len(queries)
            if searches:
                self._usage.web_searches = searches  # type: ignore[attr-defined]

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


def _standard_b64(value: Any) -> str:
    """Base64 from the provider (either alphabet, padded or not) in the standard alphabet, as
    pydantic-ai stores a signature; anything that is not base64 is an error."""
    if not isinstance(value, str):
        raise UnexpectedModelBehavior("the provider sent bytes that are not a base64 string")
    padded = (value + "=" * (-len(value) % 4)).replace("-", "+").replace("_", "/")
    try:
        return base64.b64encode(base64.b64decode(padded, validate=True)).decode("ascii")
    except ValueError:
        raise UnexpectedModelBehavior("the provider sent bytes that are not base64", value[:100]) from None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_of(chunk: dict[str, Any], metadata: dict[str, Any], provider_url: str, existing: RequestUsage | None) -> RequestUsage:
    """A chunk's ``usageMetadata`` as pydantic-ai's usage, priced by genai-prices as the SDK model did."""
    details: dict[str, int] = {}
    for key, name in (("cachedContentTokenCount", "cached_content_tokens"), ("thoughtsTokenCount", "thoughts_tokens"),
                      ("toolUsePromptTokenCount", "tool_use_prompt_tokens")):
        if _count(metadata.get(key)):
            details[name] = _count(metadata.get(key))
    for key, prefix in (("promptTokensDetails", "prompt"), ("cacheTokensDetails", "cache"),
                        ("candidatesTokensDetails", "candidates"), ("toolUsePromptTokensDetails", "tool_use_prompt")):
        for item in _list(metadata.get(key)):
            modality, tokens = _dict(item).get("modality"), _count(_dict(item).get("tokenCount"))
            if isinstance(modality, str) and modality and tokens:
                details[f"{modality.lower()}_{prefix}_tokens"] = tokens
    if not any(_count(v) or (isinstance(v, list) and v) for v in metadata.values()):
        return existing or RequestUsage()
    if existing:
        details = {**existing.details, **details}
    usage = RequestUsage.extract({"modelVersion": chunk.get("modelVersion"), "usageMetadata": metadata},
                                 provider=PROVIDER, provider_url=provider_url, provider_fallback=PROVIDER, details=details)
    if existing:
        for name in ("input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens", "input_audio_tokens",
                     "cache_audio_read_tokens", "output_audio_tokens"):
            setattr(usage, name, getattr(usage, name) or getattr(existing, name))
    return usage

"""Gemini ``generateContent`` as a pydantic-ai model of ketch's own, over :mod:`ketch.wire.http`.

``POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`` with the key in
``x-goog-api-key``; ``:generateContent`` for a whole answer (the non-streaming fallback). The
request body is :mod:`ketch.wire.gemini_body`'s; the settings around the history (tools,
``toolConfig``, ``generationConfig`` with the thinking level) follow pydantic-ai's ``GoogleModel``
and its Gemini profiles, so the bytes are the ones google-genai sent. The stream is
``data:`` frames of ``GenerateContentResponse`` chunks with no end event: the chunk carrying a
``finishReason`` (or a blocked prompt's ``promptFeedback``) is the last, and a body that stops
before one is a broken answer. A chunk of the form ``{"error": {...}}`` is Google's error status.

It is one thing at this length: one wire in both directions (settings -> request, chunks ->
parts), which must agree on the same part shapes (signatures, hosted search ids) to replay what
it read.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from uuid import uuid4

from pydantic_ai import _model_errors, _utils
from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior, UserError
from pydantic_ai.messages import (
    BinaryContent,
    FilePart,
    ModelMessage,
    ModelResponse,
    ModelResponseStreamEvent,
    NativeToolCallPart,
    NativeToolReturnPart,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, check_allow_model_requests
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.usage import RequestUsage

from ketch.wire.gemini_body import HistoryEncoder, dumps
from ketch.wire.http import WireClient, read_lines
from ketch.wire.sse import json_events

PROVIDER = "google"
"""pydantic-ai's name for the Gemini API, kept so stored histories replay their signatures."""
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "CONTINUATION": "length", "SAFETY": "content_filter",
           "RECITATION": "content_filter", "LANGUAGE": "error", "BLOCKLIST": "content_filter",
           "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter", "MALFORMED_FUNCTION_CALL": "error",
           "IMAGE_SAFETY": "content_filter", "UNEXPECTED_TOOL_CALL": "error", "IMAGE_PROHIBITED_CONTENT": "content_filter",
           "NO_IMAGE": "error", "MODEL_ARMOR": "content_filter"}
"""Gemini's ``finishReason`` -> pydantic-ai's (``OTHER`` and unknown ones: none)."""
_LEVEL = {"minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH", "xhigh": "HIGH", "max": "HIGH"}
_LEVEL_ORDER = {"MINIMAL": 0, "LOW": 1, "MEDIUM": 2, "HIGH": 3}
_BUDGET = {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576, "xhigh": 24576, "max": 24576}
"""Gemini 2.5's thinking budgets per level (pydantic-ai's table; 128 is 2.5 Pro's smallest)."""
_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def thinking_config(thinking: Any, profile: Any) -> dict[str, Any] | None:
    """``generationConfig.thinkingConfig`` for the unified level: levels on Gemini 3+, budgets on 2.5."""
    if thinking is None:
        return None
    by_level = profile.get("google_supports_thinking_level", True)
    if thinking is False:
        if not by_level:
            return {"thinking_budget": 128 if profile.get("thinking_always_enabled", False) else 0}
        if profile.get("google_disables_thinking_with_zero_budget", False):
            return {"thinking_budget": 0}
        return {"thinking_level": _snap("minimal", profile)}
    if thinking is True:
        return {"include_thoughts": True}
    if not by_level:
        return {"include_thoughts": True, "thinking_budget": _BUDGET[thinking]}
    return {"include_thoughts": True, "thinking_level": _snap(thinking, profile)}


def _snap(thinking: str, profile: Any) -> str:
    """The nearest level the model takes (ties to the cheaper one)."""
    levels = profile.get("google_thinking_levels")
    if levels is None:
        levels = set(_LEVEL_ORDER) if profile.get("google_supports_minimal_thinking_level", True) else set(_LEVEL_ORDER) - {"MINIMAL"}
    if not levels:
        raise UserError("`google_thinking_levels` must contain at least one level when `thinking` is set")
    want = _LEVEL_ORDER[_LEVEL[thinking]]
    return min(levels, key=lambda lv: (abs(_LEVEL_ORDER[lv] - want), _LEVEL_ORDER[lv]))


@dataclass(init=False)
class GeminiModel(Model[Any]):
    """The Gemini API's ``generateContent``, streamed, with ketch's own HTTP client."""

    _relocates_tool_files = True  # as GoogleModel: pydantic-ai prepares the history the same way
    _lookalike_notes_precede_tool_results = True
    _model_name: str = field(repr=False)
    _base_url: str = field(repr=False)

    def __init__(self, model_name: str, *, base_url: str | None, api_key: str, timeout: float = 300.0,
                 max_retries: int = 2, response_hooks: list[Any] | None = None,
                 profile: dict[str, Any] | None = None, transport: Any = None) -> None:
        self._model_name = model_name.removeprefix("models/")
        self._base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._client = WireClient(model_name=self._model_name, headers={"x-goog-api-key": api_key},
                                  connect_timeout=min(timeout, 30.0), idle_timeout=timeout,
                                  max_retries=max_retries, response_hooks=response_hooks or [], transport=transport)
        self._encoder: HistoryEncoder | None = None
        super().__init__(profile=profile)

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def system(self) -> str:
        return PROVIDER

    @property
    def base_url(self) -> str:
        return self._base_url + "/"

    @classmethod
    def supported_native_tools(cls) -> frozenset[type[Any]]:
        return frozenset({WebSearchTool})  # Google Search grounding; ketch asks for no other hosted tool

    def _provider_model_profile(self) -> ModelProfile | None:
        from pydantic_ai.profiles.google import google_model_profile

        return google_model_profile(self._model_name)

    @property
    def encoder(self) -> HistoryEncoder:
        if self._encoder is None:
            combination = bool(self.profile.get("google_supports_tool_combination", False))
            self._encoder = HistoryEncoder(tuple(self.profile.get("google_supported_mime_types_in_tool_returns", ())),
                                           self.accepts_stateless_artifacts, combination)
        return self._encoder

    # ------------------------------------------------------------ request
    def _tools(self, settings: dict[str, Any], params: ModelRequestParameters) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """``tools`` (hosted ones first, then every function in one entry, as the SDK merges them)
        and ``toolConfig``."""
        from pydantic_ai.models._tool_choice import resolve_tool_choice

        tools: list[dict[str, Any]] = []
        if params.native_tools:
            if params.function_tools and not self.profile.get("google_supports_tool_combination", False):
                raise UserError("This model does not support function tools and built-in tools at the same time.")
            for tool in params.native_tools:
                if not isinstance(tool, WebSearchTool):
                    raise UserError(f"ketch's Gemini wire sends no {type(tool).__name__}")
                tools.append({"googleSearch": {}})
        defs = params.declared_tool_defs
        choice = resolve_tool_choice(settings, params)  # type: ignore[arg-type]
        allowed: list[str] = []
        if isinstance(choice, tuple):
            choice, names = choice
            if choice == "auto":  # Gemini has no AUTO with a list of names: send only those
                defs = {k: v for k, v in defs.items() if k in names}
            else:
                allowed = [name for name in defs if name in names]
        config: dict[str, Any] = {}
        if defs:
            mode = _MODES[choice]
            if mode == "AUTO" and self.profile.get("google_supports_strict_tool_definition", False) \
                    and not any(d.strict is False for d in defs.values()):
                mode = "VALIDATED"  # AUTO with the API enforcing each schema
            config["functionCallingConfig"] = {**({"allowedFunctionNames": allowed} if allowed else {}), "mode": mode}
        if params.native_tools and self.profile.get("google_supports_server_side_tool_invocations", False):
            config["includeServerSideToolInvocations"] = True
        declarations = []
        for d in defs.values():
            decl: dict[str, Any] = {"description": d.description or "", "name": d.name,
                                    "parameters_json_schema": d.parameters_json_schema}
            if d.return_schema:
                decl["response_json_schema"] = d.return_schema
            declarations.append(decl)
        if declarations:
            tools.append({"functionDeclarations": declarations})
        return tools, config

    def body(self, messages: list[ModelMessage], settings: dict[str, Any], params: ModelRequestParameters) -> bytes:
        """The bytes of one request for ``messages`` (every settled message encoded once)."""
        if params.function_tools and not self.profile.get("supports_tools", True):
            raise UserError("Tools are not supported by this model.")
        tools, tool_config = self._tools(settings, params)
        texts, first_role, system = self.encoder.encode(messages)
        if not texts or first_role == "model":  # Gemini wants a user content first
            texts.insert(0, dumps({"parts": [{"text": ""}], "role": "user"}))
        system += [p.content for p in self._get_instruction_parts(messages, params) or []]
        rest: dict[str, Any] = {}
        if system:
            rest["systemInstruction"] = {"parts": [{"text": text} for text in system], "role": "user"}
        if tools:
            rest["tools"] = tools
            if tool_config:
                rest["toolConfig"] = tool_config
        generation: dict[str, Any] = {}
        for key, name in (("temperature", "temperature"), ("top_p", "topP"), ("top_k", "topK"),
                          ("max_tokens", "maxOutputTokens"), ("stop_sequences", "stopSequences"),
                          ("presence_penalty", "presencePenalty"), ("frequency_penalty", "frequencyPenalty"),
                          ("seed", "seed")):
            if settings.get(key) is not None:
                generation[name] = settings[key]
        if params.output_mode == "prompted" and not tools and self.profile.get("supports_json_object_output", False):
            generation["responseMimeType"] = "application/json"
        generation["responseModalities"] = ["TEXT"]
        thinking = settings.get("google_thinking_config") or thinking_config(params.thinking, self.profile)
        if thinking:
            generation["thinkingConfig"] = thinking
        rest["generationConfig"] = generation
        return ('{"contents": [' + ", ".join(texts) + "], " + dumps(rest)[1:]).encode("utf-8")

    def _url(self, stream: bool) -> str:
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"{self._base_url}/v1beta/models/{self._model_name}:{method}"

    async def _post(self, messages: list[ModelMessage], model_settings: Any, params: ModelRequestParameters,
                    stream: bool) -> tuple[Any, ModelRequestParameters]:
        check_allow_model_requests()
        settings, params = self.prepare_request(model_settings, params)
        body = self.body(messages, dict(settings or {}), params)
        try:
            response = await self._client.post(self._url(stream), body, stream=stream)
        except ModelHTTPError as error:
            raise google_error(error.status_code, self._model_name, error.body, error.headers) from None
        return response, params

    async def request(self, messages: list[ModelMessage], model_settings: Any,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        """A whole answer from ``:generateContent`` (servers that refuse to stream tools)."""
        response, params = await self._post(messages, model_settings, model_request_parameters, stream=False)
        try:
            payload = response.json()
        except ValueError as exc:
            raise UnexpectedModelBehavior(f"the provider sent a response that is not JSON ({exc})") from None
        finally:
            await response.aclose()
        if not isinstance(payload, dict):
            raise UnexpectedModelBehavior("the provider sent a response that is not a JSON object")
        stream = GeminiStream(model_request_parameters=params, _chunks=_one(payload), _model_name=self._model_name,
                              _provider_url=self.base_url, _billed_per_prompt=self._billed_per_prompt)
        async for _ in stream:
            pass
        return stream.get()

    @asynccontextmanager
    async def request_stream(self, messages: list[ModelMessage], model_settings: Any,
                             model_request_parameters: ModelRequestParameters,
                             run_context: Any = None) -> AsyncIterator[StreamedResponse]:
        response, params = await self._post(messages, model_settings, model_request_parameters, stream=True)
        try:
            chunks = json_events(read_lines(response, self._model_name), model_name=self._model_name,
                                 is_end=lambda _frame, chunk: _is_last(chunk))
            yield GeminiStream(model_request_parameters=params, _chunks=_payloads(chunks), _model_name=self._model_name,
                               _provider_url=self.base_url, _billed_per_prompt=self._billed_per_prompt)
        finally:
            await response.aclose()

    @property
    def _billed_per_prompt(self) -> bool:
        return bool(self.profile.get("google_web_search_billed_per_prompt", False))

    async def aclose(self) -> None:
        await self._client.aclose()


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


def _is_last(chunk: dict[str, Any]) -> bool:
    if "error" in chunk:
        return True
    candidates = chunk.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], dict) and candidates[0].get("finishReason"):
        return True
    feedback = chunk.get("promptFeedback")
    return isinstance(feedback, dict) and bool(feedback.get("blockReason"))


async def _payloads(events: AsyncIterator[tuple[Any, dict[str, Any]]]) -> AsyncIterator[dict[str, Any]]:
    async for _frame, chunk in events:
        yield chunk


async def _one(payload: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
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
                data = base64.b64decode(blob.get("data") or "")
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
    """A signature as pydantic-ai stores it (standard base64 of its bytes), whichever alphabet came."""
    if not isinstance(value, str):
        raise UnexpectedModelBehavior("the provider sent a thought signature that is not a string")
    padded = value + "=" * (-len(value) % 4)
    return base64.b64encode(base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_"))).decode("ascii")


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

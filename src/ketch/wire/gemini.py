"""Gemini ``generateContent`` as a pydantic-ai model of ketch's own, over :mod:`ketch.wire.http`.

``POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`` with the key in
``x-goog-api-key``; ``:generateContent`` for a whole answer (the non-streaming fallback). The
request body is :mod:`ketch.wire.gemini_body`'s; the settings around the history (tools,
``toolConfig``, ``generationConfig`` with the thinking level) follow pydantic-ai's ``GoogleModel``
and its Gemini profiles, so the bytes are the ones google-genai sent. The stream is
``data:`` frames of ``GenerateContentResponse`` chunks with no end event: the chunk carrying a
``finishReason`` (or a blocked prompt's ``promptFeedback``) is the last, and a body that stops
before one is a broken answer (:mod:`ketch.wire.sse`); :mod:`ketch.wire.gemini_stream` reads the
chunks. HTTP errors come back as the pydantic-ai error of Google's status (``RESOURCE_EXHAUSTED``
a rate limit, ``API_KEY_INVALID`` the key), with status and body for the loop to sort.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior, UserError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, check_allow_model_requests
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import ModelProfile

from ketch.wire.gemini_body import HistoryEncoder, dumps
from ketch.wire.gemini_stream import PROVIDER, GeminiStream, google_error, is_last, one, payloads
from ketch.wire.http import WireClient, read_lines
from ketch.wire.sse import json_events

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
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
        stream = GeminiStream(model_request_parameters=params, _chunks=one(payload), _model_name=self._model_name,
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
                                 is_end=lambda _frame, chunk: is_last(chunk))
            yield GeminiStream(model_request_parameters=params, _chunks=payloads(chunks), _model_name=self._model_name,
                               _provider_url=self.base_url, _billed_per_prompt=self._billed_per_prompt)
        finally:
            await response.aclose()

    @property
    def _billed_per_prompt(self) -> bool:
        return bool(self.profile.get("google_web_search_billed_per_prompt", False))

    async def aclose(self) -> None:
        await self._client.aclose()



"""OpenAI's Responses API (``POST {base}/responses``) as ketch's own pydantic-ai model, over ``wire.http``.

It sends what pydantic-ai's ``OpenAIResponsesModel`` sent through the openai SDK, byte for byte
(``tests/test_wire_golden.py``): the SDK's key order (its ``create`` parameters, then ``input`` and
``tools``, which ketch handed over as ``extra_body``) and its encoding (compact, UTF-8). Neither
the SDK nor ``pydantic_ai.models.openai`` nor ``pydantic_ai.providers`` is imported: the profile
comes from ``pydantic_ai.profiles.openai`` as the SDK providers derive it, the items from
``responses_items`` (each message encoded once), the events from ``responses_stream``.

Not mapped (ketch sends none of them): server-side state (``previous_response_id``,
conversations, background responses, WebSockets), tool search and deferred tools, hosted tools
other than web search, a breakpoint after the instructions (GPT-5.6 ``openai_cache_instructions``: the
top-level ``instructions`` cannot carry one, and moving them into the input would change every
request's layout), structured ``text.format`` output, response-scoped tool call ids. A setting or part that would need
one raises instead of being dropped.

Prompt cache on GPT-5.6 and later (the unified ``cache`` setting): ``prompt_cache_options`` and a
``prompt_cache_breakpoint`` on each request message of the history, kept once placed
(``responses_items.mark_last_item``; the Chat wire's ``chat_body.HistoryMarks`` says why).

One thing: the request a history becomes and the answer that comes back, for one protocol; the
encoding of items and the stream's events already live in their own modules.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, check_allow_model_requests
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import ModelProfile

from ketch.wire.lookalike_memo import LookalikeNotesMemo
from ketch.wire.http import WireClient
from ketch.wire.chat_body import HISTORY_BREAKPOINTS
from ketch.wire.responses_items import (
    Flags,
    ItemCache,
    encode,
    encoded_items,
    mark_last_item,
    request_items,
    response_items,
)

_SAMPLING = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "logit_bias", "openai_logprobs",
             "openai_top_logprobs")
_UNMAPPED = ("openai_previous_response_id", "openai_conversation_id", "openai_background", "openai_cache_instructions",
             "openai_transport")


def responses_profile(model_name: str, *, official: bool) -> ModelProfile:
    """The profile the SDK providers give ``model_name``: OpenAI's own (``official``), or the one
    OpenAI-compatible servers share (a ``vendor/model`` name gets its vendor's family)."""
    from pydantic_ai.profiles import merge_profile
    from pydantic_ai.profiles.openai import (
        OpenAIJsonSchemaTransformer,
        OpenAIModelProfile,
        _OpenAIJsonSchemaTransformer,
        openai_model_profile,
    )

    if official:
        base = openai_model_profile(model_name)
        breakpoints = bool(base.get("openai_supports_prompt_cache_breakpoints"))
        return merge_profile(base, OpenAIModelProfile(
            json_schema_transformer=OpenAIJsonSchemaTransformer if model_name.startswith("ft:") else _OpenAIJsonSchemaTransformer,
            supports_cache=breakpoints,
            openai_responses_supports_max_reasoning_effort=breakpoints,
        ))
    from pydantic_ai.profiles._family import vendor_family_model_profile
    from pydantic_ai.profiles._special_tokens import special_token_route_profile

    profile = vendor_family_model_profile(model_name, overrides=_compatible_vendor_profiles()) or openai_model_profile(model_name)
    return merge_profile(OpenAIModelProfile(json_schema_transformer=OpenAIJsonSchemaTransformer), profile,
                         special_token_route_profile("openai-compatible", model_name))


def _compatible_vendor_profiles() -> dict[str, Any]:
    """The vendor overrides ``OpenAICompatibleProvider`` applies, without importing it (it imports the SDK)."""
    from pydantic_ai.profiles.amazon import amazon_model_profile
    from pydantic_ai.profiles.groq import groq_model_profile

    return {"bedrock": amazon_model_profile, "groq": groq_model_profile}


@dataclass(init=False)
class ResponsesModel(Model[Any]):
    """The Responses API, streamed (or whole, for servers that refuse streaming with tools)."""

    _model_name: str = field(repr=False)
    _base_url: str = field(repr=False)

    def __init__(self, model_name: str, *, base_url: str, api_key: str, provider_name: str = "openai",
                 official: bool = True, timeout: float = 300.0, max_retries: int = 2,
                 response_hooks: list[Any] | None = None, profile: Any = None, transport: Any = None) -> None:
        self._model_name = model_name
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._system = provider_name
        self._official = official
        self._timeout = timeout
        self._max_retries = max(0, max_retries)
        self._hooks = list(response_hooks or [])
        self._transport = transport
        self._client: WireClient | None = None
        self._items = ItemCache()
        super().__init__(profile=profile)

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def system(self) -> str:
        return self._system

    @property
    def base_url(self) -> str:
        return self._base_url

    @classmethod
    def supported_native_tools(cls) -> frozenset[type[Any]]:
        return frozenset({WebSearchTool})

    def _provider_model_profile(self) -> ModelProfile:
        return responses_profile(self._model_name, official=self._official)

    def prepare_request(self, model_settings: Any, model_request_parameters: ModelRequestParameters) -> Any:
        settings, params = super().prepare_request(model_settings, model_request_parameters)
        return self._translate_cache(settings, params), params

    def _translate_cache(self, settings: Any, params: ModelRequestParameters) -> Any:
        """The unified ``cache`` setting on models with explicit breakpoints (GPT-5.6 on): OpenAI's
        ``prompt_cache_options`` (implicit: OpenAI's breakpoint at the newest message stays) and, when
        the whole conversation is cached, a breakpoint on each request message of the history, unless
        the caller set OpenAI's own options. Other models cache implicitly: nothing is sent."""
        if (not params.cache or not self.profile.get("openai_supports_prompt_cache_breakpoints", False)
                or "openai_prompt_cache_options" in (settings or {})):
            return settings
        from pydantic_ai.models._prompt_cache import split_cache_setting

        retention, whole = split_cache_setting(params.cache)
        options = {"mode": "implicit", "ttl": "12h" if retention == "12h" else "30m"}
        return {**(settings or {}), "openai_prompt_cache_options": options, HISTORY_BREAKPOINTS: whole}

    # ------------------------------------------------------------ the body
    def _flags(self, settings: dict[str, Any]) -> Flags:
        profile = self.profile
        encrypted = bool(profile.get("openai_supports_encrypted_reasoning_content", False))
        return Flags(
            system=self._system,
            send_item_ids=bool(settings.get("openai_send_reasoning_ids", encrypted)),
            encrypted_reasoning=encrypted,
            system_role=profile.get("openai_system_prompt_role", None) or "system",
            strict_status_none=bool(profile.get("openai_responses_requires_function_call_status_none", False)),
            supports_phase=bool(profile.get("openai_supports_phase", False)),
            carry_thinking_in_user_turn=bool(profile.get("mimics_assistant_message_formatting", False)),
            breakpoints=bool(settings.get(HISTORY_BREAKPOINTS)
                             and profile.get("openai_supports_prompt_cache_breakpoints", False)),
        )

    def _input(self, messages: list[ModelMessage], flags: Flags) -> str:
        """The ``input`` array's JSON text; each message's items come from the cache when it holds them."""
        pieces: list[str] = []
        cache = self._items
        cache.start()
        for message in messages:
            if isinstance(message, ModelRequest):
                text = cache.get(message, flags, True)
                if text is None:
                    items = list(request_items(message, flags))
                    text = encoded_items(mark_last_item(items) if flags.breakpoints else items)
                    cache.put(message, flags, True, text)
            elif isinstance(message, ModelResponse):
                same_endpoint = message.provider_name != self._system or self.accepts_server_state(message)
                text = cache.get(message, flags, same_endpoint)
                if text is None:
                    items = response_items(message, flags, same_endpoint=same_endpoint,
                                           stateless_ok=self.accepts_stateless_artifacts)
                    text = encoded_items(items)
                    cache.put(message, flags, same_endpoint, text)
            else:
                raise UserError(f"{type(message).__name__} is not a message")
            if text:
                pieces.append(text)
        cache.finish()
        return "[" + ",".join(pieces) + "]" if pieces else '[{"role":"user","content":""}]'

    def _tools(self, params: ModelRequestParameters) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        for native in params.native_tools:
            if not isinstance(native, WebSearchTool):
                raise UserError(f"{type(native).__name__} is not offered on ketch's Responses wire")
            tools.append(_web_search_tool(native))
        if params.allow_image_output:
            tools.append({"type": "image_generation"})
        strict_ok = self.profile.get("openai_supports_strict_tool_definition", True)
        for tool in params.declared_tool_defs.values():
            tools.append({"name": tool.name, "parameters": tool.parameters_json_schema, "type": "function",
                          "description": tool.description, "strict": bool(tool.strict and strict_ok)})
        return tools

    def _tool_choice(self, settings: dict[str, Any], params: ModelRequestParameters, tools: list[Any]) -> Any:
        from pydantic_ai.models._tool_choice import resolve_tool_choice

        if not tools:
            return None
        resolved = resolve_tool_choice(settings, params)  # type: ignore[arg-type]
        if resolved in ("auto", "none"):
            return resolved
        forcing = self.profile.get("openai_supports_tool_choice_required", True)
        if resolved == "required":
            return "required" if forcing else "auto"
        mode, names = resolved
        if mode == "required" and len(names) == 1 and forcing:
            return {"type": "function", "name": next(iter(names))}
        return {"type": "allowed_tools", "mode": "auto" if mode == "auto" or not forcing else mode,
                "tools": [{"type": "function", "name": n} for n in params.tool_defs if n in names]}

    def _reasoning(self, settings: dict[str, Any], params: ModelRequestParameters) -> dict[str, Any] | None:
        from pydantic_ai.profiles.openai import OPENAI_REASONING_EFFORT_MAP

        effort = settings.get("openai_reasoning_effort")
        if effort is None and params.thinking is not None:
            profile = self.profile
            supported = profile.get("openai_reasoning_efforts")
            supports_max = bool(profile.get("openai_responses_supports_max_reasoning_effort", False))
            if supported is not None:
                effort = _effort_among(params.thinking, list(supported), supports_max)
            elif params.thinking is False and profile.get("thinking_always_enabled", False):
                effort = None
            elif params.thinking == "minimal" and not profile.get("openai_supports_minimal_reasoning_effort", True):
                effort = "low"
            elif params.thinking == "max" and supports_max:
                effort = "max"
            else:
                effort = OPENAI_REASONING_EFFORT_MAP[params.thinking]
        reasoning: dict[str, Any] = {}
        if effort:
            reasoning["effort"] = effort
        if settings.get("openai_reasoning_summary"):
            reasoning["summary"] = settings["openai_reasoning_summary"]
        return reasoning or None

    def _reasoning_on(self, settings: dict[str, Any], params: ModelRequestParameters) -> bool:
        profile = self.profile
        if (effort := settings.get("openai_reasoning_effort")) is not None:
            return effort != "none"
        if params.thinking is not None:
            return params.thinking is not False or bool(profile.get("thinking_always_enabled", False))
        return bool(profile.get("thinking_enabled_by_default", False))

    def body(self, messages: list[ModelMessage], settings: dict[str, Any], params: ModelRequestParameters,
             *, stream: bool) -> bytes:
        """One request's JSON bytes, keys in the order the SDK sent them."""
        from pydantic_ai._instrumentation import get_instructions

        for name in _UNMAPPED:
            if settings.get(name) is not None:
                raise UserError(f"{name} is not supported on ketch's Responses wire")
        profile = self.profile
        settings = dict(settings)
        for name in profile.get("openai_unsupported_model_settings", ()):
            settings.pop(name, None)
        if profile.get("openai_supports_reasoning", False) and (
            self._reasoning_on(settings, params) or not _effort_none_ok(profile)):
            for name in _SAMPLING:
                settings.pop(name, None)
        tools = self._tools(params)
        tool_choice = self._tool_choice(settings, params, tools)
        flags = self._flags(settings)
        include = []
        if flags.encrypted_reasoning:
            include.append("reasoning.encrypted_content")
        if settings.get("openai_include_web_search_sources"):
            include.append("web_search_call.action.sources")
        store = False if profile.get("openai_responses_requires_store_false", False) else settings.get("openai_store")
        head: dict[str, Any] = {"model": self._model_name, "stream": stream}
        _put(head, "service_tier", settings.get("openai_service_tier"))
        _put(head, "include", include or None)
        _put(head, "instructions", get_instructions(messages, params) or None)
        _put(head, "max_output_tokens", settings.get("max_tokens"))
        if tools and "parallel_tool_calls" not in profile.get("openai_unsupported_model_settings", ()):
            _put(head, "parallel_tool_calls", settings.get("parallel_tool_calls"))
        _put(head, "prompt_cache_key", settings.get("openai_prompt_cache_key"))
        if settings.get("openai_prompt_cache_options") is not None:
            if not profile.get("openai_supports_prompt_cache_breakpoints", False):
                raise UserError(f"openai_prompt_cache_options is not supported with {self._model_name!r}")
            head["prompt_cache_options"] = settings["openai_prompt_cache_options"]
        _put(head, "prompt_cache_retention", settings.get("openai_prompt_cache_retention"))
        _put(head, "reasoning", self._reasoning(settings, params))
        _put(head, "store", store)
        _put(head, "temperature", settings.get("temperature"))
        if settings.get("openai_text_verbosity"):
            head["text"] = {"verbosity": settings["openai_text_verbosity"]}
        _put(head, "tool_choice", tool_choice)
        _put(head, "top_p", settings.get("top_p"))
        _put(head, "truncation", settings.get("openai_truncation"))
        _put(head, "user", settings.get("openai_user"))
        extra = settings.get("extra_body")
        if isinstance(extra, dict):
            head.update({k: v for k, v in extra.items() if k not in ("input", "tools")})
        text = encode(head)[:-1] + ',"input":' + self._input(messages, flags)
        if tools:
            text += ',"tools":' + encode(tools)
        return (text + "}").encode("utf-8")

    # ------------------------------------------------------------ requests
    async def request(self, messages: list[ModelMessage], model_settings: Any,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        """A whole answer (``stream: false``): servers that cannot stream tool calls are asked this way."""
        from ketch.wire.responses_stream import whole_response

        check_allow_model_requests()
        settings, params = self.prepare_request(model_settings, model_request_parameters)
        response = await self._send(self.body(messages, dict(settings or {}), params, stream=False), stream=False)
        try:
            return whole_response(response.content, model_name=self._model_name, provider_name=self._system,
                                  provider_url=self._base_url)
        finally:
            await response.aclose()

    @asynccontextmanager
    async def request_stream(self, messages: list[ModelMessage], model_settings: Any,
                             model_request_parameters: ModelRequestParameters,
                             run_context: Any = None) -> AsyncIterator[StreamedResponse]:
        from ketch.wire.responses_stream import ResponsesStream

        check_allow_model_requests()
        settings, params = self.prepare_request(model_settings, model_request_parameters)
        response = await self._send(self.body(messages, dict(settings or {}), params, stream=True), stream=True)
        try:
            stream = ResponsesStream(model_request_parameters=params, _response=response, _model_name=self._model_name,
                                     _provider_name=self._system, _provider_url=self._base_url)
            await stream.open()
            yield stream
        finally:
            await response.aclose()

    def _http(self) -> WireClient:
        if self._client is None:
            headers = {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}
            self._client = WireClient(model_name=self._model_name, headers=headers,
                                      connect_timeout=min(self._timeout, 30.0), idle_timeout=self._timeout,
                                      max_retries=self._max_retries, response_hooks=self._hooks,
                                      transport=self._transport)
        return self._client

    async def _send(self, body: bytes, *, stream: bool) -> Any:
        return await self._http().post(f"{self._base_url}/responses", body, stream=stream)


def _put(head: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        head[key] = value


def _effort_none_ok(profile: Any) -> bool:
    supported = profile.get("openai_reasoning_efforts")
    if supported is not None:
        return "none" in supported
    return bool(profile.get("openai_supports_reasoning_effort_none", False))


_EFFORT_ORDER = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def _effort_among(thinking: Any, supported: list[str], supports_max: bool) -> str | None:
    """The lowest effort the model accepts at or above ``thinking``'s (pydantic-ai's own resolution)."""
    from pydantic_ai.profiles.openai import OPENAI_REASONING_EFFORT_MAP

    accepted = sorted((e for e in supported if e in _EFFORT_ORDER and (e != "max" or supports_max)), key=_EFFORT_ORDER.index)
    if thinking is False:
        return next(iter(accepted), None)
    wanted = "max" if thinking == "max" and supports_max else OPENAI_REASONING_EFFORT_MAP[thinking]
    active = [e for e in accepted if e != "none"]
    for effort in active:
        if _EFFORT_ORDER.index(effort) >= _EFFORT_ORDER.index(wanted):
            return effort
    return active[-1] if active else None


def _web_search_tool(tool: WebSearchTool) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "web_search", "search_context_size": tool.search_context_size}
    if tool.user_location:
        item["user_location"] = {"type": "approximate", **tool.user_location}
    filters: dict[str, Any] = {}
    if tool.allowed_domains:
        filters["allowed_domains"] = tool.allowed_domains
    if tool.blocked_domains:
        filters["blocked_domains"] = tool.blocked_domains
    if filters:
        item["filters"] = filters
    if tool.external_web_access is not None:
        item["external_web_access"] = tool.external_web_access
    return item


class NotedResponsesModel(LookalikeNotesMemo, ResponsesModel):
    """``ResponsesModel`` whose pydantic-ai pass for text resembling its own frames (run before
    every request over the whole history) is remembered per request (``wire.lookalike_memo``)."""


def model_class() -> type[ResponsesModel]:
    """The class ``build_model`` uses: the noted one while its memo fits pydantic-ai's methods and
    the fast paths are on (``KETCH_SDK_FASTPATHS``)."""
    from ketch.wire import history_scans, lookalike_memo

    return NotedResponsesModel if history_scans.enabled() and lookalike_memo.usable(ResponsesModel) else ResponsesModel


__all__ = ["NotedResponsesModel", "ResponsesModel", "model_class", "responses_profile"]

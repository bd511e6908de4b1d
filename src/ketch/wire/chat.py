"""OpenAI Chat Completions (``POST {base}/chat/completions``) as ketch's own pydantic-ai model.

It sends the bytes pydantic-ai's Chat model sent through the OpenAI SDK (field order, compact
separators, non-ASCII kept), over ``wire.http.WireClient``, so neither the ``openai`` SDK nor
``pydantic_ai.models.openai`` is imported on this wire. Requests stream (``stream_options``
asks for usage in the last chunk); :meth:`ChatCompletionsModel.request` asks for a whole answer,
which ``providers.stream_refusal`` uses for servers that cannot stream tool calls and the
summary uses. The history mapping is ``wire.chat_body`` (each settled message encoded once),
the answer mapping ``wire.chat_stream``, the per-preset profile ``wire.chat_profile``.

Dialect: ``string_content`` makes a tool-calling assistant message carry ``"content": ""``
instead of ``null`` (``providers.local_chat``); the output cap's field follows the profile
(``openai_chat_supports_max_completion_tokens``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from pydantic_ai.exceptions import UnexpectedModelBehavior, UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ThinkingPart
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, check_allow_model_requests
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import ModelProfile, merge_profile

from ketch.wire import chat_options
from ketch.wire.chat_body import HISTORY_BREAKPOINTS, ChatEncoder, HistoryMarks, MessageMemo, backfill_thinking_field
from ketch.wire.chat_stream import FINISH_REASONS, ChatStream, completion_response
from ketch.wire.http import WireClient

_BODY_ORDER = (
    "model", "stream", "service_tier", "messages", "frequency_penalty", "logit_bias", "logprobs",
    "max_completion_tokens", "max_tokens", "moderation", "parallel_tool_calls", "prediction", "presence_penalty",
    "prompt_cache_key", "prompt_cache_options", "prompt_cache_retention", "reasoning_effort", "response_format",
    "seed", "stop", "store", "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p",
    "user", "verbosity", "web_search_options",
)
"""The order the OpenAI SDK wrote a Chat request's fields in (the caller's extra fields follow)."""

_SETTING_FIELDS = (
    ("seed", "seed"), ("openai_user", "user"), ("openai_prediction", "prediction"), ("temperature", "temperature"),
    ("top_p", "top_p"), ("presence_penalty", "presence_penalty"), ("frequency_penalty", "frequency_penalty"),
    ("logit_bias", "logit_bias"), ("openai_logprobs", "logprobs"), ("openai_top_logprobs", "top_logprobs"),
    ("openai_store", "store"), ("openai_moderation", "moderation"), ("openai_text_verbosity", "verbosity"),
    ("openai_prompt_cache_key", "prompt_cache_key"), ("openai_prompt_cache_retention", "prompt_cache_retention"),
    ("openai_prompt_cache_options", "prompt_cache_options"), ("stop_sequences", "stop"),
)
"""pydantic-ai settings -> the body field each becomes."""

_CACHE_KEYS = ("openai_prompt_cache_options", "openai_cache_instructions")
"""OpenAI's own cache settings, which win over the unified ``cache`` setting."""
_PREFIX_ONLY = {"30m": {"mode": "explicit", "ttl": "30m"}, "12h": {"mode": "explicit", "ttl": "12h"}}
"""The options of a prefix-only cache, recognised by identity (never mutated; a caller's equal dict is theirs)."""
_SAMPLING = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "logit_bias", "openai_logprobs",
             "openai_top_logprobs")


def encode(body: dict[str, Any]) -> bytes:
    """The body as the SDK wrote it: compact, UTF-8 (not ASCII-escaped), no NaN."""
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except ValueError as exc:
        raise UnexpectedModelBehavior(f"the request holds a number JSON cannot carry ({exc})") from None


@dataclass(init=False)
class ChatCompletionsModel(Model[Any]):
    """A Chat Completions endpoint: OpenAI's, or any server that speaks it."""

    unsupported_settings = frozenset({"top_k"})
    _unsupported_file_inputs = frozenset({"video"})
    _relocates_tool_files = True

    _model_name: str = field(repr=False)
    _base_url: str = field(repr=False)
    stream_class: ClassVar[type[ChatStream]] = ChatStream
    """The stream mapping (a dialect's subclass reads its own chunk fields)."""
    finish_reasons: ClassVar[dict[str, Any]] = FINISH_REASONS

    def __init__(self, model_name: str, *, base_url: str, api_key: str, provider_name: str,
                 provider_profile: ModelProfile | None = None, profile: dict[str, Any] | None = None,
                 timeout: float = 300.0, max_retries: int = 2, response_hooks: list[Any] | None = None,
                 string_content: bool = False, headers: dict[str, str] | None = None) -> None:
        self._model_name = model_name
        self._base_url = base_url.rstrip("/") + "/"
        self._api_key = api_key
        self._provider_name = provider_name
        self._provider_profile = provider_profile
        self._timeout = timeout
        self._max_retries = max(0, max_retries)
        self._hooks = list(response_hooks or [])
        self._headers = dict(headers or {})
        self._client: WireClient | None = None
        self._encoder = ChatEncoder(self, string_content=string_content)
        self._memo = MessageMemo()
        self._marks = HistoryMarks()
        super().__init__(profile=profile)

    # ------------------------------------------------------------ identity
    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def system(self) -> str:
        return self._provider_name

    @property
    def base_url(self) -> str:
        return self._base_url

    @classmethod
    def supported_native_tools(cls) -> frozenset[type[Any]]:
        return frozenset({WebSearchTool})

    def unsupported_native_tool_settings(self, native_tool: Any) -> frozenset[str]:
        return native_tool.restricting_settings

    def _provider_model_profile(self) -> ModelProfile | None:
        return self._provider_profile

    @cached_property
    def profile(self) -> Any:  # type: ignore[override]
        """The preset's profile with the caller's overrides; hosted search only where the profile says so."""
        profile = super().profile
        if not profile.get("openai_chat_supports_document_input", True):
            from pydantic_ai._file_input import KNOWN_DOCUMENT_MEDIA_TYPES, TEXT_DOCUMENT_MEDIA_TYPES

            kinds = profile.get("supported_document_media_types", KNOWN_DOCUMENT_MEDIA_TYPES)
            profile = merge_profile(profile, ModelProfile(supported_document_media_types=kinds & TEXT_DOCUMENT_MEDIA_TYPES))
        if not profile.get("openai_chat_supports_web_search", False):
            from pydantic_ai.native_tools import SUPPORTED_NATIVE_TOOLS

            tools = profile.get("supported_native_tools", SUPPORTED_NATIVE_TOOLS) - {WebSearchTool}
            profile = merge_profile(profile, ModelProfile(supported_native_tools=tools))
        return profile

    def _unsupported_settings(self) -> frozenset[str]:
        return self.unsupported_settings | frozenset(self.profile.get("openai_unsupported_model_settings", ()))

    def prepare_request(self, model_settings: Any, model_request_parameters: ModelRequestParameters) -> Any:
        if (any(isinstance(t, WebSearchTool) for t in model_request_parameters.native_tools)
                and not self.profile.get("openai_chat_supports_web_search", False)
                and not any(t.unless_native == "web_search" for t in model_request_parameters.function_tools)):
            raise UserError(f"WebSearchTool is not supported on Chat Completions with model {self.model_name!r}")
        settings, params = super().prepare_request(model_settings, model_request_parameters)
        return self._translate_cache(settings, params), params

    def _translate_cache(self, settings: Any, params: ModelRequestParameters) -> Any:
        """The unified ``cache`` setting on models with explicit breakpoints (GPT-5.6 on): OpenAI's
        ``prompt_cache_options``, a breakpoint after the static instructions and, when the whole
        conversation is cached, one on each request message of the history (:func:`mark_history`),
        unless the caller set OpenAI's own cache settings. Other models cache implicitly: nothing is sent."""
        if (not params.cache or not self.profile.get("openai_supports_prompt_cache_breakpoints", False)
                or any(k in (settings or {}) for k in _CACHE_KEYS)):
            return settings
        from pydantic_ai.models._prompt_cache import split_cache_setting

        retention, whole = split_cache_setting(params.cache)
        ttl = "12h" if retention == "12h" else "30m"
        options = {"mode": "implicit", "ttl": ttl} if whole else _PREFIX_ONLY[ttl]
        return {**(settings or {}), "openai_prompt_cache_options": options, "openai_cache_instructions": True,
                HISTORY_BREAKPOINTS: (settings or {}).get(HISTORY_BREAKPOINTS, whole)}

    # ------------------------------------------------------------ requests
    async def request(self, messages: list[ModelMessage], model_settings: Any,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        """A whole answer (``stream: false``)."""
        check_allow_model_requests()
        settings, params = self.prepare_request(model_settings, model_request_parameters)
        body = self.body(messages, dict(settings or {}), params, stream=False)
        response = await self._send(body, stream=False)
        try:
            data = json.loads(response.content, parse_constant=_no_constant)
        except ValueError as exc:
            raise UnexpectedModelBehavior(f"Invalid response from {self.system} chat completions endpoint, expected "
                                          f"JSON data ({exc})", response.text[:500]) from None
        finally:
            await response.aclose()
        return self.completion(data)

    def completion(self, data: Any) -> ModelResponse:
        """A whole answer's JSON as a ModelResponse (a dialect adds its own top-level fields)."""
        return completion_response(data, model_name=self._model_name, profile=self.profile, provider_name=self.system,
                                   provider_url=self._base_url, finish_reasons=self.finish_reasons)

    @asynccontextmanager
    async def request_stream(self, messages: list[ModelMessage], model_settings: Any,
                             model_request_parameters: ModelRequestParameters,
                             run_context: Any = None) -> AsyncIterator[StreamedResponse]:
        check_allow_model_requests()
        settings, params = self.prepare_request(model_settings, model_request_parameters)
        body = self.body(messages, dict(settings or {}), params, stream=True)
        response = await self._send(body, stream=True)
        try:
            stream = self.stream_class(model_request_parameters=params, _response=response, _model_name=self._model_name,
                                    _profile=self.profile, _provider_name=self.system, _provider_url=self._base_url,
                                    _finish_reasons=self.finish_reasons)
            await stream.prime()
            yield stream
        finally:
            await response.aclose()

    def _http(self) -> WireClient:
        if self._client is None:
            from pydantic_ai.models import get_user_agent

            headers = {"authorization": f"Bearer {self._api_key}", "user-agent": get_user_agent(), **self._headers}
            self._client = WireClient(model_name=self._model_name, headers=headers,
                                      connect_timeout=min(self._timeout, 30.0), idle_timeout=self._timeout,
                                      max_retries=self._max_retries, response_hooks=self._hooks)
        return self._client

    async def _send(self, body: dict[str, Any], *, stream: bool) -> Any:
        return await self._http().post(f"{self._base_url}chat/completions", encode(body), stream=stream)

    # ------------------------------------------------------------ the body
    def messages(self, messages: list[ModelMessage], settings: dict[str, Any],
                 params: ModelRequestParameters) -> list[dict[str, Any]]:
        """The ``messages`` of a request for this history (the settled ones from the memo)."""
        profile = self.profile
        send_back = profile.get("openai_chat_send_back_thinking_parts", "auto")
        field_name = profile.get("openai_chat_thinking_field", None) if send_back == "field" else None
        backfill = bool(field_name and profile.get("openai_chat_thinking_requires_field_on_tool_calls", False)
                        and self._thinks(settings, params))
        out: list[dict[str, Any]] = []
        marks = self._marks.start() if (settings.get(HISTORY_BREAKPOINTS)
                                        and profile.get("openai_supports_prompt_cache_breakpoints", False)) else None
        for message, encoded in self._memo.encode(messages, self._encoder):
            if marks is not None and isinstance(message, ModelRequest):
                encoded = marks.marked(encoded)
            if isinstance(message, ModelResponse):
                backfill = backfill or any(isinstance(p, ThinkingPart) for p in message.parts)
                if backfill and field_name:
                    encoded = [{**m, field_name: ""} if m["role"] == "assistant" and m.get("tool_calls")
                               and field_name not in m else m for m in encoded]
            out.extend(encoded)
        out = backfill_thinking_field(out, profile)
        role = profile.get("openai_system_prompt_role", None) or "system"
        instructions = self._get_instruction_parts(messages, params) or []
        if instructions:
            leading = next((i for i, m in enumerate(out) if m["role"] != role), len(out))
            out[leading:leading] = [{"role": role, "content": p.content} for p in instructions]
        if (settings.get("openai_cache_instructions") and profile.get("openai_supports_prompt_cache_breakpoints", False)
                and role != "user" and profile.get("openai_chat_supports_multiple_system_messages", True)
                and not _dynamic_system_prompt(messages)):
            static = next((i for i, p in enumerate(instructions) if p.dynamic), len(instructions))
            at = next((i for i, m in enumerate(out) if m["role"] != role), len(out)) - len(instructions) + static - 1
            if at >= 0:
                content = out[at]["content"]
                parts = [{"type": "text", "text": content}] if isinstance(content, str) else [dict(c) for c in content]
                parts[-1]["prompt_cache_breakpoint"] = {"mode": "explicit"}
                out[at] = {**out[at], "content": parts}  # a copy: the memoized message stays as it was
        options = settings.get("openai_prompt_cache_options")
        if any(options is o for o in _PREFIX_ONLY.values()) and not any(
                isinstance(m.get("content"), list) and any("prompt_cache_breakpoint" in c for c in m["content"]) for m in out):
            # caching only the prefix, with no breakpoint placed, would cache nothing: cache as usual
            settings["openai_prompt_cache_options"] = {"mode": "implicit", "ttl": options["ttl"]}
        if not profile.get("openai_chat_supports_multiple_system_messages", True) and role in ("system", "developer"):
            leading = next((i for i, m in enumerate(out) if m["role"] != role), len(out))
            if leading >= 2:
                out = [{**out[0], "content": "\n\n".join(m["content"] for m in out[:leading])}, *out[leading:]]
        return out

    def body(self, messages: list[ModelMessage], settings: dict[str, Any], params: ModelRequestParameters, *,
             stream: bool) -> dict[str, Any]:
        """The JSON of one Chat Completions request."""
        profile = self.profile
        tools, tool_choice = self.tools_and_choice(settings, params)
        fields: dict[str, Any] = {"model": self._model_name, "stream": stream,
                                  "messages": self.messages(messages, settings, params)}
        if profile.get("openai_supports_reasoning", False) and self._thinks(settings, params):
            for key in _SAMPLING:  # reasoning models take no sampling parameters while they reason
                settings.pop(key, None)
        for key in profile.get("openai_unsupported_model_settings", ()):
            settings.pop(key, None)
        if (tier := settings.get("openai_service_tier") or settings.get("service_tier")):
            fields["service_tier"] = tier
        if "max_tokens" in settings:
            cap = "max_completion_tokens" if profile.get("openai_chat_supports_max_completion_tokens", True) else "max_tokens"
            fields[cap] = settings["max_tokens"]
        if tools and "parallel_tool_calls" in settings:
            fields["parallel_tool_calls"] = settings["parallel_tool_calls"]
        for setting, name in _SETTING_FIELDS:
            if setting in settings:
                fields[name] = settings[setting]
        if (effort := self.reasoning_effort(settings, params)) is not None:
            fields["reasoning_effort"] = effort
        if params.output_mode == "native" and params.output_object is not None:
            fields["response_format"] = chat_options.json_schema_format(self.profile, params.output_object)
        elif params.output_mode == "prompted" and profile.get("supports_json_object_output", False):
            fields["response_format"] = {"type": "json_object"}
        if stream:
            fields["stream_options"] = {"include_usage": True, **(
                {"continuous_usage_stats": True} if settings.get("openai_continuous_usage_stats") else {})}
        if tool_choice is not None:
            fields["tool_choice"] = tool_choice
        if tools:
            fields["tools"] = tools
        if (search := self.web_search_options(params)) is not None:
            fields["web_search_options"] = search
        body = {name: fields[name] for name in _BODY_ORDER if name in fields}
        extra = settings.get("extra_body")
        false_body = profile.get("openai_chat_thinking_false_body")
        if false_body is not None and params.thinking is False and not settings.get("openai_reasoning_effort"):
            extra = {**false_body, **(extra or {})}
        if isinstance(extra, dict):
            body.update(extra)
        return body

    def _thinks(self, settings: dict[str, Any], params: ModelRequestParameters) -> bool:
        effort = settings.get("openai_reasoning_effort")
        if effort is not None:
            return effort != "none"
        if params.thinking is not None:
            return params.thinking is not False or self.profile.get("thinking_always_enabled", False)
        return self.profile.get("thinking_enabled_by_default", False)

    def reasoning_effort(self, settings: dict[str, Any], params: ModelRequestParameters) -> str | None:
        """``reasoning_effort``: the explicit setting, else the unified level on the profile's scale."""
        return chat_options.reasoning_effort(self.profile, settings, params.thinking)

    def _tools(self, settings: dict[str, Any], params: ModelRequestParameters) -> tuple[list[dict[str, Any]], Any]:
        return chat_options.tools_and_choice(self.profile, self.model_name, settings, params, self._thinks(settings, params))

    def tools_and_choice(self, settings: dict[str, Any], params: ModelRequestParameters) -> tuple[list[dict[str, Any]], Any]:
        """The request's ``tools`` and ``tool_choice`` (a dialect adds its hosted tools)."""
        return self._tools(settings, params)

    def web_search_options(self, params: ModelRequestParameters) -> dict[str, Any] | None:
        """OpenAI's ``web_search_options`` for a request that carries ``WebSearchTool``."""
        for tool in params.native_tools:
            if isinstance(tool, WebSearchTool):
                options: dict[str, Any] = {"search_context_size": tool.search_context_size}
                if tool.user_location:
                    options["user_location"] = {"type": "approximate", "approximate": dict(tool.user_location)}
                return options
        return None


def _dynamic_system_prompt(messages: list[ModelMessage]) -> bool:
    """A system prompt that can change between requests cannot sit inside the cached prefix."""
    from pydantic_ai.messages import ModelRequest, SystemPromptPart

    return any(isinstance(p, SystemPromptPart) and p.dynamic_ref is not None
               for m in messages if isinstance(m, ModelRequest) for p in m.parts)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


__all__ = ["ChatCompletionsModel", "encode"]

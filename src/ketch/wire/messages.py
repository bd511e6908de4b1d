"""Anthropic's Messages API (``POST {base}/v1/messages``) as ketch's own pydantic-ai model.

No SDK: the body is built by ``wire.messages_body`` (each history message mapped and encoded
once) and sent over ``wire.http.WireClient``; the answer is read by ``wire.messages_stream``.
What it sends is what ketch sent through the SDK adapter, byte for byte
(``tests/test_wire_golden.py``): the same keys in the same order (``max_tokens, messages, model,
cache_control, metadata, stop_sequences, stream, system, thinking, tool_choice, tools``, then the
sampling settings), compact JSON with UTF-8 text, and the cache breakpoints
``providers.prompt_cache`` asks for: the last tool definition, the last system block, and
automatic caching (a top-level ``cache_control``). Headers: ``x-api-key``, ``anthropic-version``
and, when a request has betas, ``anthropic-beta``. ``count_tokens`` asks
``/v1/messages/count_tokens`` with the request's own messages, system prompt and tools (the
local-window calibration uses it).

One thing at this length: the settings → body rules (thinking, max_tokens, tools and tool choice,
system blocks and their breakpoints) and the three requests that share them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, check_allow_model_requests
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.usage import RequestUsage

from ketch.wire import messages_body as mb
from ketch.wire.http import RETRY_STATUS, WireClient
from ketch.wire.messages_stream import MessagesStream, http_error, message_events, stream_events

PROVIDER = "anthropic"
API_VERSION = "2026-10-21"
"""The ``anthropic-version`` ketch has been sending (the SDK's)."""
RETRY = RETRY_STATUS | {529}
"""The SDK also retried Anthropic's 529 (overloaded)."""
DEFAULT_MAX_TOKENS, LEGACY_MAX_TOKENS, AFTER_THINKING = 16384, 4096, 4096
_CACHE_KEYS = ("anthropic_cache", "anthropic_cache_instructions", "anthropic_cache_tool_definitions",
               "anthropic_cache_messages")
_SAMPLING = ("temperature", "top_p", "top_k")


def _schema_transformer() -> type:
    """Tool schemas as the Messages API takes them: without ``title`` and ``$schema`` (what the
    SDK provider's transformer does for a tool that is not strict; ketch offers no strict tool
    here, so none is marked strict and no schema is rewritten for strict mode)."""
    from pydantic_ai._json_schema import JsonSchemaTransformer

    class MessagesSchema(JsonSchemaTransformer):
        def walk(self) -> Any:
            schema = super().walk()
            self.is_strict_compatible = False
            return schema

        def transform(self, schema: Any) -> Any:
            schema.pop("title", None)
            schema.pop("$schema", None)
            return schema

    return MessagesSchema


def messages_profile(model_name: str) -> ModelProfile:
    """pydantic-ai's Anthropic profile for ``model_name``, with what the Messages API itself offers
    (prompt caching, automatic caching); ketch renders no inline ``system`` entries."""
    from pydantic_ai.profiles import merge_profile
    from pydantic_ai.profiles.anthropic import AnthropicModelProfile, anthropic_model_profile

    return merge_profile(
        AnthropicModelProfile(json_schema_transformer=_schema_transformer()),
        anthropic_model_profile(model_name),
        AnthropicModelProfile(supports_inline_system_prompts=False, supports_request_scoped_system_prompts=False,
                              supports_cache=True, supported_cache_retentions=("5m", "1h"), supports_auto_cache=True),
    )


# ---------------------------------------------------------------- the model
@dataclass(init=False)
class AnthropicMessagesModel(Model[Any]):
    """Anthropic's Messages API over ketch's own HTTP client."""

    _model_name: str = field(repr=False)
    _base_url: str = field(repr=False)

    def __init__(self, model_name: str, *, base_url: str, api_key: str, timeout: float = 300.0,
                 max_retries: int = 2, response_hooks: list[Any] | None = None,
                 profile: dict[str, Any] | None = None, transport: Any = None) -> None:
        self._model_name = model_name
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = timeout
        self._max_retries = max(0, max_retries)
        self._hooks = list(response_hooks or [])
        self._transport = transport
        self._client: WireClient | None = None
        self._memo = mb.MessageMemo()
        super().__init__(profile=profile)

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def system(self) -> str:
        return PROVIDER

    @property
    def base_url(self) -> str:
        return self._base_url

    @classmethod
    def supported_native_tools(cls) -> frozenset[type[Any]]:
        return frozenset({WebSearchTool})  # the one hosted tool ketch offers on this wire

    def unsupported_native_tool_settings(self, native_tool: Any) -> frozenset[str]:
        if isinstance(native_tool, WebSearchTool):
            return native_tool.restricting_settings - {"allowed_domains", "blocked_domains", "max_uses"}
        return frozenset()

    def _provider_model_profile(self) -> ModelProfile:
        return messages_profile(self._model_name)

    def prepare_request(self, model_settings: Any, model_request_parameters: ModelRequestParameters) -> Any:
        settings, params = super().prepare_request(model_settings, model_request_parameters)
        from pydantic_ai.models._anthropic_max_tokens import cap_max_tokens

        if "context-1m" not in ",".join(sorted((settings or {}).get("anthropic_betas") or ())):
            settings = cap_max_tokens(settings, self.profile.get("anthropic_max_output_tokens"))
        if (cache := params.cache) and not any(k in (settings or {}) for k in _CACHE_KEYS):
            from pydantic_ai.models._prompt_cache import split_cache_setting

            retention, messages = split_cache_setting(cache)
            ttl = retention if retention in ("5m", "1h") else "5m"
            settings = {**(settings or {}), "anthropic_cache_instructions": ttl, "anthropic_cache_tool_definitions": ttl}
            if messages:
                settings["anthropic_cache"] = ttl
        return settings, params

    # ------------------------------------------------------------ request body
    def _thinking(self, settings: dict[str, Any], params: ModelRequestParameters) -> dict[str, Any] | None:
        if anthropic := settings.get("anthropic_thinking"):
            return dict(anthropic)
        if params.thinking is False:
            if self.profile.get("thinking_enabled_by_default", False):
                return {"type": "disabled"}
            return None
        if params.thinking is None:
            return None
        if self.profile.get("anthropic_supports_adaptive_thinking", False):
            return {"type": "adaptive"}
        from pydantic_ai.profiles.anthropic import ANTHROPIC_THINKING_BUDGET_MAP

        return {"type": "enabled", "budget_tokens": ANTHROPIC_THINKING_BUDGET_MAP[params.thinking]}

    def _max_tokens(self, settings: dict[str, Any], thinking: dict[str, Any] | None) -> int:
        if "max_tokens" in settings:
            return settings["max_tokens"]
        if self.profile.get("anthropic_rejects_max_tokens_beyond_context_window", False):
            default = LEGACY_MAX_TOKENS
        else:
            default = self.profile.get("anthropic_max_output_tokens") or DEFAULT_MAX_TOKENS
        budget = (thinking or {}).get("budget_tokens") if (thinking or {}).get("type") == "enabled" else None
        return max(default, (budget if isinstance(budget, int) else 0) + AFTER_THINKING)

    def _tools(self, settings: dict[str, Any], params: ModelRequestParameters) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        from pydantic_ai.models._tool_choice import resolve_tool_choice

        defs = params.declared_tool_defs
        choice: dict[str, Any]
        resolved = resolve_tool_choice(settings, params)
        forcing = self._forces_tools(settings, params)
        if resolved == "auto":
            choice = {"type": "auto"}
        elif resolved == "none":
            choice = {"type": "none"}
        elif resolved == "required":
            choice = {"type": "any"} if forcing else {"type": "auto"}
        else:
            mode, names = resolved
            if mode == "required" and len(names) == 1 and forcing:
                choice = {"type": "tool", "name": next(iter(names))}
            else:
                defs = {k: v for k, v in defs.items() if k in names}
                choice = {"type": "auto"} if mode == "auto" or not forcing else {"type": "any"}
        tools: list[dict[str, Any]] = []
        for tool in defs.values():
            entry: dict[str, Any] = {"name": tool.name, "description": tool.description or "",
                                     "input_schema": tool.parameters_json_schema}
            if tool.strict and self.profile.get("supports_json_schema_output", False):
                entry["strict"] = tool.strict
            if settings.get("anthropic_eager_input_streaming"):
                entry["eager_input_streaming"] = True
            tools.append(entry)
        if tools and (ttl := settings.get("anthropic_cache_tool_definitions")):
            tools[-1]["cache_control"] = mb.cache_control("5m" if ttl is True else ttl)
        if tools and "parallel_tool_calls" in settings and choice["type"] != "none":
            choice["disable_parallel_tool_use"] = not settings["parallel_tool_calls"]
        for native in params.native_tools:
            if not isinstance(native, WebSearchTool):
                from pydantic_ai.exceptions import UserError

                raise UserError(f"{type(native).__name__} is not offered on ketch's Anthropic wire")
            tools.append(self._web_search(native, settings, params))
        return tools, (choice if defs else None)

    def _forces_tools(self, settings: dict[str, Any], params: ModelRequestParameters) -> bool:
        """Whether the model may be forced to call a tool: not while it thinks (Anthropic refuses that)."""
        if not self.profile.get("supports_forced_tool_choice", True):
            return False
        thinking = self._thinking(settings, params)
        return not (thinking and thinking.get("type") in ("enabled", "adaptive")
                    and self.profile.get("forced_tool_choice_disables_thinking", True))

    def _web_search(self, tool: WebSearchTool, settings: dict[str, Any], params: ModelRequestParameters) -> dict[str, Any]:
        """The hosted search tool; the dynamic-filtering version where the model has it, called
        directly when the answer is to be cited (code execution's reads come back uncited)."""
        location = {"type": "approximate", **tool.user_location} if tool.user_location else None
        kind = "web_search_20260209" if self.profile.get("anthropic_supports_dynamic_filtering", False) else "web_search_20250305"
        entry: dict[str, Any] = {"name": "web_search", "type": kind, "max_uses": tool.max_uses,
                                 "allowed_domains": tool.allowed_domains, "blocked_domains": tool.blocked_domains,
                                 "user_location": location}
        if (callers := settings.get("anthropic_web_tools_allowed_callers")) is not None:
            entry["allowed_callers"] = callers
        elif kind == "web_search_20260209" and settings.get("citations") and params.output_mode == "text":
            entry["allowed_callers"] = ["direct"]
        return entry

    def _system(self, parts: list[str], messages: list[ModelMessage], params: ModelRequestParameters,
                settings: dict[str, Any]) -> str | list[dict[str, Any]]:
        from pydantic_ai.models._prompt_cache import instruction_cache_boundaries

        instructions = self._get_instruction_parts(messages, params) or []
        prompt = "\n\n".join(parts)
        cache = settings.get("anthropic_cache_instructions")
        if not instructions and not (prompt and cache):
            return prompt
        leading = [prompt] if prompt else []
        blocks: list[dict[str, Any]] = [{"type": "text", "text": t} for t in [*leading, *(p.content for p in instructions)]]
        if cache:
            ttl = "5m" if cache is True else cache
            static, stable = instruction_cache_boundaries(instructions)
            if len(leading) + static:
                blocks[len(leading) + static - 1]["cache_control"] = mb.cache_control(ttl)
            if stable > static:
                blocks[len(leading) + stable - 1]["cache_control"] = mb.cache_control(ttl)
        return blocks

    def encode(self, messages: list[ModelMessage], settings: dict[str, Any], params: ModelRequestParameters,
               *, stream: bool) -> bytes:
        """The bytes of one Messages request for ``messages``."""
        system_parts, turns, texts = mb.map_history(self, messages, self.profile, self._memo)
        if mb.drop_unpaired_searches(turns):
            texts = [None] * len(turns)  # rare: a search the provider never answered; encode the whole list again
        tools, tool_choice = self._tools(settings, params)
        system = self._system(system_parts, messages, params, settings)
        auto = settings.get("anthropic_cache")
        if auto and settings.get("anthropic_cache_messages"):
            from pydantic_ai.exceptions import UserError

            raise UserError("`anthropic_cache` and `anthropic_cache_messages` cannot both be enabled.")
        if ttl := settings.get("anthropic_cache_messages"):
            mb.mark_last_block(turns, texts, "5m" if ttl is True else ttl)
        top_cache = mb.cache_control("5m" if auto is True else auto) if auto and not mb.last_block_marked(turns) else None
        mb.limit_cache_points(system, turns, texts, tools, automatic=top_cache is not None)
        thinking = self._thinking(settings, params)
        body: dict[str, Any] = {"max_tokens": self._max_tokens(settings, thinking)}
        tail: dict[str, Any] = {"model": self._model_name}
        if top_cache:
            tail["cache_control"] = top_cache
        if (metadata := settings.get("anthropic_metadata")) is not None:
            tail["metadata"] = metadata
        if (stops := settings.get("stop_sequences")) is not None:
            tail["stop_sequences"] = stops
        tail["stream"] = stream
        if system:
            tail["system"] = system
        if thinking is not None:
            tail["thinking"] = thinking
        if tool_choice:
            tail["tool_choice"] = tool_choice
        if tools:
            tail["tools"] = tools
        tail.update({k: settings[k] for k in _SAMPLING if settings.get(k) is not None})
        if isinstance(extra := settings.get("extra_body"), dict):
            tail.update(extra)
        encoded = ",".join(text if text is not None else mb.dumps(turn) for turn, text in zip(turns, texts))
        head = mb.dumps(body)[:-1]
        return f'{head},"messages":[{encoded}],{mb.dumps(tail)[1:]}'.encode("utf-8")

    def _headers(self, settings: dict[str, Any]) -> dict[str, str]:
        headers = {str(k).lower(): str(v) for k, v in (settings.get("extra_headers") or {}).items()}
        betas = set(settings.get("anthropic_betas") or ())
        if headers.get("anthropic-beta"):
            betas |= {b.strip() for b in headers.pop("anthropic-beta").split(",") if b.strip()}
        if betas:
            headers["anthropic-beta"] = ",".join(sorted(betas))
        return headers

    # ------------------------------------------------------------ sending
    def _http(self) -> WireClient:
        if self._client is None:
            self._client = WireClient(model_name=self._model_name,
                                      headers={"x-api-key": self._api_key, "anthropic-version": API_VERSION},
                                      connect_timeout=min(self._timeout, 30.0), idle_timeout=self._timeout,
                                      max_retries=self._max_retries, response_hooks=self._hooks,
                                      transport=self._transport, retry_status=RETRY)
        return self._client

    async def _post(self, path: str, body: bytes, *, stream: bool, headers: dict[str, str],
                    client: WireClient | None = None) -> Any:
        url = f"{self._base_url}{path}"
        try:
            return await (client or self._http()).post(url, body, stream=stream, headers=headers)
        except ModelHTTPError as exc:
            error = http_error(exc.status_code, self._model_name, exc.body, exc.headers, in_stream=False)
            import httpx

            error.request = httpx.Request("POST", url)  # type: ignore[attr-defined]  # the path tried, for the advice
            raise error from exc

    async def request(self, messages: list[ModelMessage], model_settings: Any,
                      model_request_parameters: ModelRequestParameters) -> ModelResponse:
        """A whole answer, not streamed (``stream: false``), read through the stream's own mapping."""
        check_allow_model_requests()
        settings, params = self.prepare_request(model_settings, model_request_parameters)
        settings = dict(settings or {})
        body = self.encode(messages, settings, params, stream=False)
        response = await self._post("/v1/messages", body, stream=False, headers=self._headers(settings))
        try:
            message = json.loads(response.content, parse_constant=_no_constant)
        except ValueError as exc:
            raise UnexpectedModelBehavior(f"the provider sent a message that is not JSON ({exc})") from None
        if not isinstance(message, dict) or message.get("type") == "error":
            raise http_error(500, self._model_name, message, None, in_stream=False)
        stream = MessagesStream(model_request_parameters=params, _events=message_events(message),
                                _model_name=self._model_name, _provider_url=self._base_url,
                                _search_offered=_offers_search(params))
        async for _ in stream:
            pass
        return stream.get()

    @asynccontextmanager
    async def request_stream(self, messages: list[ModelMessage], model_settings: Any,
                             model_request_parameters: ModelRequestParameters,
                             run_context: Any = None) -> AsyncIterator[StreamedResponse]:
        check_allow_model_requests()
        settings, params = self.prepare_request(model_settings, model_request_parameters)
        settings = dict(settings or {})
        body = self.encode(messages, settings, params, stream=True)
        response = await self._post("/v1/messages", body, stream=True, headers=self._headers(settings))
        try:
            events = await _primed(stream_events(response, self._model_name), self._model_name)
            yield MessagesStream(model_request_parameters=params, _events=events, _model_name=self._model_name,
                                 _provider_url=self._base_url, _search_offered=_offers_search(params))
        finally:
            await response.aclose()

    async def count_tokens(self, messages: list[ModelMessage], model_settings: Any,
                           model_request_parameters: ModelRequestParameters) -> RequestUsage:
        """The request's input tokens by ``/v1/messages/count_tokens``: the same messages, system
        prompt, thinking and tools (one try, within the settings' ``timeout``)."""
        check_allow_model_requests()
        settings, params = self.prepare_request(model_settings, model_request_parameters)
        settings = dict(settings or {})
        request = json.loads(self.encode(messages, settings, params, stream=False))
        body = {k: request[k] for k in ("messages", "model", "cache_control", "system", "thinking", "tool_choice", "tools")
                if k in request}
        timeout = settings.get("timeout")
        limit = float(timeout) if isinstance(timeout, (int, float)) else self._timeout
        client = WireClient(model_name=self._model_name, headers={"x-api-key": self._api_key, "anthropic-version": API_VERSION},
                            connect_timeout=min(limit, 30.0), idle_timeout=limit,
                            max_retries=int(settings.get("max_retries", 0) or 0), transport=self._transport)
        headers = self._headers(settings)
        headers["anthropic-beta"] = ",".join(filter(None, [headers.get("anthropic-beta"), "token-counting-2024-11-01"]))
        try:
            response = await self._post("/v1/messages/count_tokens", mb.dumps(body).encode("utf-8"), stream=False,
                                        headers=headers, client=client)
            answer = json.loads(response.content, parse_constant=_no_constant)
        except ValueError as exc:
            raise UnexpectedModelBehavior(f"the token count is not JSON ({exc})") from None
        finally:
            await client.aclose()
        tokens = answer.get("input_tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise UnexpectedModelBehavior("the token count has no input_tokens", str(answer)[:500])
        return RequestUsage(input_tokens=tokens)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _offers_search(params: ModelRequestParameters) -> bool:
    return any(isinstance(t, WebSearchTool) for t in params.native_tools)


__all__ = ["AnthropicMessagesModel", "messages_profile"]


async def _primed(events: AsyncIterator[dict[str, Any]], model_name: str) -> AsyncIterator[dict[str, Any]]:
    """``events`` with the first one already read, before the stream is handed out (as the SDK
    model did): a connection closed before any event is the text ``stream_refusal`` reads (a
    server that cannot stream tool calls), so the whole-answer fallback can still act."""
    from pydantic_ai.exceptions import ModelConnectionError, ModelTimeoutError

    from ketch.wire.stream_end import EMPTY_STREAM

    try:
        first = await events.__anext__()
    except StopAsyncIteration:
        raise UnexpectedModelBehavior("Streamed response ended without content or tool calls") from None
    except ModelTimeoutError:
        raise
    except ModelConnectionError as exc:
        raise ModelConnectionError(model_name, f"{EMPTY_STREAM} ({exc.message})", phase="read") from exc

    async def rest() -> AsyncIterator[dict[str, Any]]:
        yield first
        async for event in events:
            yield event

    return rest()

"""Anthropic's Messages API (``POST {base}/v1/messages``) as ketch's own pydantic-ai model.

No SDK: the body is built by ``wire.messages_body`` (each history message mapped and encoded
once) and sent over ``wire.http.WireClient``; the stream is read with ``wire.sse``. What it sends
is what ketch sent through the SDK adapter, byte for byte (``tests/test_wire_golden.py``): the
same keys in the same order (``max_tokens, messages, model, cache_control, metadata,
stop_sequences, stream, system, thinking, tool_choice, tools``, then the sampling settings),
compact ASCII JSON, and the cache breakpoints ``providers.prompt_cache`` asks for: the last tool
definition, the last system block, and automatic caching (a top-level ``cache_control``).
Headers: ``x-api-key``, ``anthropic-version`` and, when a request has betas, ``anthropic-beta``.

Events → parts: ``message_start`` (id, usage), ``content_block_start`` / ``_delta`` / ``_stop``
for text (and its ``citations_delta``), ``tool_use`` (``input_json_delta``), ``thinking``
(``thinking_delta``, ``signature_delta``), ``redacted_thinking``, ``server_tool_use`` of a
search the request offered and its ``web_search_tool_result``; ``message_delta`` (stop reason,
usage), ``message_stop`` (the end: a stream without it is a broken connection), ``ping``, and
``error`` (raised as the HTTP error its type stands for, e.g. ``overloaded_error`` → 529).
Usage keeps Anthropic's names (``cache_creation_input_tokens``, ``cache_read_input_tokens``)
and is priced by pydantic-ai's ``RequestUsage.extract`` as before. A whole (non-streamed) message
is read through the same mapping. ``count_tokens`` asks ``/v1/messages/count_tokens`` with the
request's own messages, system prompt and tools (the local-window calibration uses it).

One thing at this length: the request, the stream and the count are one protocol whose shapes
must agree (a block read from the stream is replayed by ``messages_body``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior
from pydantic_ai.messages import (
    Citation,
    ContentCitationAnchor,
    ModelMessage,
    ModelResponse,
    ModelResponseStreamEvent,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    WebCitationSource,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse, check_allow_model_requests
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.usage import RequestUsage

from ketch.wire import messages_body as mb
from ketch.wire.http import RETRY_STATUS, WireClient, read_lines
from ketch.wire.sse import json_events

PROVIDER = "anthropic"
API_VERSION = "2026-10-21"
"""The ``anthropic-version`` ketch has been sending (the SDK's)."""
RETRY = RETRY_STATUS | {529}
"""The SDK also retried Anthropic's 529 (overloaded)."""
DEFAULT_MAX_TOKENS, LEGACY_MAX_TOKENS, AFTER_THINKING = 16384, 4096, 4096
FINISH = {"compaction": "stop", "end_turn": "stop", "max_tokens": "length", "model_context_window_exceeded": "length",
          "stop_sequence": "stop", "tool_use": "tool_call", "pause_turn": None, "refusal": "content_filter"}
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                "rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529}
_CACHE_KEYS = ("anthropic_cache", "anthropic_cache_instructions", "anthropic_cache_tool_definitions",
               "anthropic_cache_messages")
_SAMPLING = ("temperature", "top_p", "top_k")
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_SEARCH_RESULT_KEYS = ("encrypted_content", "page_age", "title", "type", "url")
_CITATION_KEYS = ("cited_text", "encrypted_index", "title", "type", "url")


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
            tools.append(self._web_search(native))
        return tools, (choice if defs else None)

    def _forces_tools(self, settings: dict[str, Any], params: ModelRequestParameters) -> bool:
        """Whether the model may be forced to call a tool: not while it thinks (Anthropic refuses that)."""
        if not self.profile.get("supports_forced_tool_choice", True):
            return False
        thinking = self._thinking(settings, params)
        return not (thinking and thinking.get("type") in ("enabled", "adaptive")
                    and self.profile.get("forced_tool_choice_disables_thinking", True))

    def _web_search(self, tool: WebSearchTool) -> dict[str, Any]:
        location = {"type": "approximate", **tool.user_location} if tool.user_location else None
        kind = "web_search_20260209" if self.profile.get("anthropic_supports_dynamic_filtering", False) else "web_search_20250305"
        return {"name": "web_search", "type": kind, "max_uses": tool.max_uses, "allowed_domains": tool.allowed_domains,
                "blocked_domains": tool.blocked_domains, "user_location": location}

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
            _mark_last_block(turns, texts, "5m" if ttl is True else ttl)
        top_cache = mb.cache_control("5m" if auto is True else auto) if auto and not _last_block_marked(turns) else None
        _limit_cache_points(system, turns, texts, tools, automatic=top_cache is not None)
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
        try:
            return await (client or self._http()).post(f"{self._base_url}{path}", body, stream=stream, headers=headers)
        except ModelHTTPError as exc:
            raise http_error(exc.status_code, self._model_name, exc.body, exc.headers, in_stream=False) from exc

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
        stream = MessagesStream(model_request_parameters=params, _events=_message_events(message),
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
            events = _stream_events(response, self._model_name)
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


# ---------------------------------------------------------------- cache breakpoints
def _last_block(turns: list[dict[str, Any]]) -> tuple[int, int] | None:
    """Where automatic caching (and ``anthropic_cache_messages``) puts its breakpoint: the last
    cacheable block of the last turn."""
    if not turns:
        return None
    content = turns[-1]["content"]
    for b in range(len(content) - 1, -1, -1):
        if "cache_control" in content[b] or content[b].get("type") in mb.CACHEABLE:
            return len(turns) - 1, b
    return None


def _last_block_marked(turns: list[dict[str, Any]]) -> bool:
    at = _last_block(turns)
    return at is not None and "cache_control" in turns[at[0]]["content"][at[1]]


def _set_block(turns: list[dict[str, Any]], texts: list[str | None], t: int, b: int, block: dict[str, Any]) -> None:
    """Replace one block without touching the memo's copy (the turn is encoded again)."""
    content = list(turns[t]["content"])
    content[b] = block
    turns[t] = {**turns[t], "content": content}
    texts[t] = None


def _mark_last_block(turns: list[dict[str, Any]], texts: list[str | None], ttl: str) -> None:
    at = _last_block(turns)
    if at is not None and "cache_control" not in turns[at[0]]["content"][at[1]]:
        _set_block(turns, texts, *at, {**turns[at[0]]["content"][at[1]], "cache_control": mb.cache_control(ttl)})


def _limit_cache_points(system: Any, turns: list[dict[str, Any]], texts: list[str | None], tools: list[dict[str, Any]],
                        *, automatic: bool) -> None:
    """At most four breakpoints (one fewer with automatic caching): the tools' and the first
    system one are kept; the oldest message ones go first, then a second system one."""
    budget = 4 - (1 if automatic else 0)
    system_points = [b for b in system if "cache_control" in b] if isinstance(system, list) else []
    reserved = min(1, len(system_points)) + sum(1 for t in tools if "cache_control" in t)
    points = [(t, b) for t, b, block in mb.iter_blocks_newest_first(turns) if "cache_control" in block]
    extra_system = system_points[1:]
    if reserved + len(points) + len(extra_system) <= budget:
        return
    if reserved > budget:
        from pydantic_ai.exceptions import UserError

        raise UserError(f"the Anthropic request asks for more than {budget} cache points in its system prompt and tools")
    keep = budget - reserved
    for t, b in points[keep:]:
        block = dict(turns[t]["content"][b])
        del block["cache_control"]
        _set_block(turns, texts, t, b, block)
    for block in extra_system[max(0, keep - len(points)):]:
        del block["cache_control"]


# ---------------------------------------------------------------- response: events -> parts
async def _stream_events(response: Any, model_name: str) -> AsyncIterator[dict[str, Any]]:
    lines = read_lines(response, model_name)
    async for frame, event in json_events(lines, model_name=model_name,
                                          is_end=lambda frame, event: event.get("type", frame.event) in ("message_stop", "error")):
        if "type" not in event and frame.event:
            event = {**event, "type": frame.event}
        yield event


async def _message_events(message: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
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


__all__ = ["AnthropicMessagesModel", "MessagesStream", "http_error", "messages_profile"]

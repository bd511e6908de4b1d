"""OpenRouter's Chat Completions dialect on ketch's own Chat model (no ``openai`` SDK).

:class:`OpenRouterChatModel` sends what pydantic-ai's ``OpenRouterModel`` sent through the SDK
(``tests/test_wire_openrouter.py`` compares the bytes), for what ketch asks of it:

- the thinking level as OpenRouter's ``reasoning`` body field (``{"effort": ..., "enabled": true}``;
  ``none`` to turn it off, the route's lowest effort where reasoning is mandatory), never
  ``reasoning_effort`` unless ``openai_reasoning_effort`` is set;
- the unified ``cache`` setting as ``cache_control`` breakpoints where the routed provider takes
  them (``wire.chat_openrouter_cache``);
- a mid-conversation change of the thinking level, on a route that takes one, as a
  ``configuration_update`` system message where it happened (the window's opening level stays the
  request's ``reasoning.effort``, so the prefix does not change);
- hosted search as the ``openrouter:web_search`` server tool after the function tools;
- reasoning that came as ``reasoning_details`` goes back as ``reasoning_details`` (signed and
  encrypted details included), other reasoning in the ``reasoning`` field; a mid-conversation system
  message on an Anthropic route moves to just before the next generation.

Answers are read by ``wire.chat_openrouter_stream``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

from pydantic_ai.messages import (
    FinishReason,
    ModelMessage,
    ModelResponse,
    TextPart,
    ThinkingPart,
)
from pydantic_ai.native_tools import WebSearchTool

from ketch.wire.chat import ChatCompletionsModel
from ketch.wire.chat_body import ChatEncoder
from ketch.wire.chat_openrouter_cache import CacheMarks, system_prefix_count
from ketch.wire.chat_openrouter_stream import (
    OpenRouterStream,
    annotations_details,
    choice_details,
    raise_error,
    usage_details,
)
from ketch.wire.chat_stream import FINISH_REASONS, ChatStream

PROVIDER = "openrouter"
OPENROUTER_FINISH_REASONS: dict[str, FinishReason] = {**FINISH_REASONS, "error": "error"}
_EFFORT = {True: "medium", False: "none", "minimal": "low", "low": "low", "medium": "medium", "high": "high",
           "xhigh": "high", "max": "max"}
"""The unified thinking level -> OpenRouter's ``reasoning.effort`` (pydantic-ai's map)."""
_CACHE_KEYS = ("openrouter_cache_instructions", "openrouter_cache_messages", "openrouter_cache_tool_definitions")
_SEARCH_OPTIONS = ("engine", "max_results", "max_total_results", "search_prompt")


def openrouter_settings(settings: dict[str, Any], params: Any, profile: Any) -> dict[str, Any]:
    """pydantic-ai's ``openrouter_*`` settings and the unified thinking level and cache setting, as
    OpenRouter's body fields in ``extra_body`` and the cache settings the messages read."""
    settings = dict(settings)
    extra = dict(settings.get("extra_body") or {})
    for key, name in (("openrouter_models", "models"), ("openrouter_provider", "provider"),
                      ("openrouter_preset", "preset"), ("openrouter_transforms", "transforms")):
        if value := settings.pop(key, None):
            extra[name] = value
    if "openrouter_reasoning" not in settings and params.thinking is not None:
        thinking = params.thinking
        if thinking is False and profile.get("thinking_always_enabled", False):
            reasoning: dict[str, Any] = {"effort": profile.get("openrouter_lowest_reasoning_effort", "low")}
        else:
            reasoning = {"effort": _EFFORT[thinking]}
        if thinking is not False:
            reasoning["enabled"] = True
        settings["openrouter_reasoning"] = reasoning
    if params.cache and not any(k in settings for k in _CACHE_KEYS):
        from pydantic_ai.models._prompt_cache import split_cache_setting

        retention, whole = split_cache_setting(params.cache)
        ttl = retention if retention in ("5m", "1h") else "5m"
        settings["openrouter_cache_instructions"] = ttl
        settings["openrouter_cache_tool_definitions"] = ttl
        if whole:
            settings["openrouter_cache_messages"] = ttl
    if reasoning := settings.get("openrouter_reasoning"):
        extra["reasoning"] = reasoning
    if usage := settings.pop("openrouter_usage", None):
        extra["usage"] = usage
    settings["extra_body"] = extra
    return settings


def search_tool(tool: WebSearchTool) -> dict[str, Any]:
    """OpenRouter's ``openrouter:web_search`` server tool for pydantic-ai's ``WebSearchTool``."""
    parameters: dict[str, Any] = {"search_context_size": tool.search_context_size}
    if tool.user_location is not None:
        parameters["user_location"] = {"type": "approximate", **tool.user_location}
    if tool.allowed_domains is not None:
        parameters["allowed_domains"] = tool.allowed_domains
    if tool.blocked_domains is not None:
        parameters["excluded_domains"] = tool.blocked_domains
    if tool.max_uses is not None:
        parameters["max_uses"] = tool.max_uses
    own = (tool.provider_settings or {}).get("openrouter", {})
    parameters.update({k: v for k, v in own.items() if k in _SEARCH_OPTIONS})
    return {"type": "openrouter:web_search", "parameters": parameters}


class OpenRouterEncoder(ChatEncoder):
    """Reasoning OpenRouter can verify again (a thinking part of this system) goes back as
    ``reasoning_details``, after the rest of the assistant message; a mid-conversation change of
    the thinking level (a ``ModelSettingsDeltaPart`` kept for a model that takes one) is
    OpenRouter's content-less ``configuration_update`` system message, where it happened."""

    def request(self, message: Any) -> list[dict[str, Any]]:
        from pydantic_ai.messages import ModelSettingsDeltaPart

        if not any(isinstance(p, ModelSettingsDeltaPart) for p in message.parts):
            return super().request(message)
        out: list[dict[str, Any]] = []
        group: list[Any] = []
        for part in [*message.parts, None]:
            if part is not None and not isinstance(part, ModelSettingsDeltaPart):
                group.append(part)
                continue
            if group:
                out.extend(super().request(dataclasses.replace(message, parts=group)))
                group = []
            effort = part.settings.get("thinking") if part is not None else None
            if part is not None and not part.top_level and effort is not None:
                out.append({"role": "system", "content": "",
                            "configuration_update": {"reasoning": {"effort": _EFFORT[effort]}}})
        return out

    def response(self, message: ModelResponse) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        from pydantic_ai.models._reasoning_details import into_reasoning_detail

        details: list[dict[str, Any]] = []
        kept = []
        for part in message.parts:
            if isinstance(part, ThinkingPart) and self._model.accepts_stateless_artifacts(message, part):
                if (detail := into_reasoning_detail(part)) is not None:
                    details.append(detail.model_dump())
                continue
            kept.append(part)
        if not details and len(kept) == len(message.parts):
            return super().response(message)
        carry, out = super().response(dataclasses.replace(message, parts=kept))
        if details:
            out = out if out is not None else {"role": "assistant", "content": None}
            out["reasoning_details"] = details
        return carry, out


class OpenRouterChatModel(ChatCompletionsModel):
    """OpenRouter's Chat Completions (see the module docstring)."""

    stream_class: ClassVar[type[ChatStream]] = OpenRouterStream
    _renders_effort_deltas: ClassVar[bool] = True
    finish_reasons: ClassVar[dict[str, Any]] = OPENROUTER_FINISH_REASONS

    def __init__(self, model_name: str, **kwargs: Any) -> None:
        kwargs.setdefault("provider_name", PROVIDER)
        if "provider_profile" not in kwargs:
            from ketch.wire.openrouter_profile import openrouter_profile

            kwargs["provider_profile"] = openrouter_profile(model_name)
        super().__init__(model_name, **kwargs)
        self._encoder = OpenRouterEncoder(self)

    @property
    def canonical_system(self) -> str:
        return PROVIDER

    def unsupported_native_tool_settings(self, native_tool: Any) -> frozenset[str]:
        if isinstance(native_tool, WebSearchTool):
            return native_tool.restricting_settings - {"allowed_domains", "blocked_domains", "max_uses"}
        return frozenset()

    async def request(self, messages: list[ModelMessage], model_settings: Any, params: Any) -> ModelResponse:
        messages, model_settings = self._effort_deltas(messages, model_settings, params)
        return await super().request(messages, model_settings, params)

    @asynccontextmanager
    async def request_stream(self, messages: list[ModelMessage], model_settings: Any, params: Any,
                             run_context: Any = None) -> AsyncIterator[Any]:
        messages, model_settings = self._effort_deltas(messages, model_settings, params)
        async with super().request_stream(messages, model_settings, params, run_context) as stream:
            yield stream

    def _effort_deltas(self, messages: list[ModelMessage], model_settings: Any, params: Any) -> tuple[Any, Any]:
        """``OpenRouterModel._effort_delta_request``: a history with a mid-conversation level change, on
        a model that takes one, keeps its changes and the window's opening level as ``reasoning.effort``
        (the prefix stays the same); otherwise the changes go and the current level is sent."""
        from pydantic_ai.models import _effort_window_baseline, _without_model_settings_deltas
        from pydantic_ai.settings import merge_model_settings

        baseline, changed = _effort_window_baseline(messages)
        merged = merge_model_settings(self.settings, model_settings) or {}
        if (changed and self.profile.get("supports_mid_conversation_effort", False)
                and "openrouter_reasoning" not in merged and merged.get("openai_reasoning_effort") is None):
            if baseline is not None and isinstance(merged.get("thinking", params.thinking), str):
                model_settings = {**(model_settings or {}), "thinking": baseline}
            return messages, model_settings
        return _without_model_settings_deltas(messages), model_settings

    def _settings_overriding_thinking(self, model_settings: Any) -> tuple[str, ...]:
        return ("openrouter_reasoning",) if "openrouter_reasoning" in model_settings else ()

    def prepare_request(self, model_settings: Any, model_request_parameters: Any) -> Any:
        settings, params = super().prepare_request(model_settings, model_request_parameters)
        return openrouter_settings(dict(settings or {}), params, self.profile), params

    # ------------------------------------------------------------ thinking
    def reasoning_effort(self, settings: dict[str, Any], params: Any) -> str | None:
        return settings.get("openai_reasoning_effort") or None  # the level goes in `reasoning`

    def _thinks(self, settings: dict[str, Any], params: Any) -> bool:
        if "openrouter_reasoning" in settings:
            reasoning = settings["openrouter_reasoning"]
            return bool(reasoning) and reasoning.get("enabled", True) and reasoning.get("effort") != "none"
        return super()._thinks(settings, params)

    # ------------------------------------------------------------ tools
    def _tools(self, settings: dict[str, Any], params: Any) -> tuple[list[dict[str, Any]], Any]:
        from ketch.wire import chat_options

        thinks = self._thinks(settings, params)
        requested = thinks and params.thinking is not False and (
            "openrouter_reasoning" in settings or settings.get("openai_reasoning_effort") is not None
            or params.thinking is not None)
        return chat_options.tools_and_choice(self.profile, self.model_name, settings, params, thinks,
                                             forcing_thinks=requested, remedy=(
                                                 "OpenRouter would silently drop reasoning. Disable thinking with "
                                                 "`thinking=False` or `openrouter_reasoning={'enabled': False}`"))

    def tools_and_choice(self, settings: dict[str, Any], params: Any) -> tuple[list[dict[str, Any]], Any]:
        tools, choice = self._tools(settings, params)
        ttl = settings.get("openrouter_cache_tool_definitions")
        if tools and ttl and self.profile.get("openrouter_supports_tool_cache", False):
            tools[-1]["cache_control"] = CacheMarks(self.profile).control(ttl)
        search = next((t for t in params.native_tools if isinstance(t, WebSearchTool)), None)
        if search is not None:
            tools = [*tools, search_tool(search)]
        return tools, choice

    def web_search_options(self, params: Any) -> None:
        return None  # OpenRouter searches through its server tool

    # ------------------------------------------------------------ messages
    def messages(self, messages: list[ModelMessage], settings: dict[str, Any], params: Any) -> list[dict[str, Any]]:
        mapped = super().messages(messages, settings, params)
        profile = self.profile
        if profile.get("supports_inline_system_prompts", False) and profile.get(
                "openrouter_system_messages_precede_generation", False):
            _place_system_messages_before_generation(mapped)
        # a configuration_update has no content to carry a breakpoint: they are placed without it
        updates = [(i, m) for i, m in enumerate(mapped) if "configuration_update" in m]
        out = [m for m in mapped if "configuration_update" not in m]
        CacheMarks(profile).place(out, messages, settings, params, self._get_instruction_parts(messages, params) or [])
        for index, update in updates:
            out.insert(index, update)
        return out

    def body(self, messages: list[ModelMessage], settings: dict[str, Any], params: Any, *, stream: bool) -> dict[str, Any]:
        body = super().body(messages, settings, params, stream=stream)
        CacheMarks(self.profile).finalize_ttls(body.get("tools") or [], body["messages"])
        return body

    def completion(self, data: Any) -> ModelResponse:
        raise_error(data, self._model_name, in_stream=False)
        message = None
        if isinstance(data, dict) and isinstance(data.get("choices"), list) and data["choices"]:
            choice = data["choices"][0]
            message = choice.get("message") if isinstance(choice, dict) else None
        details_in = message.get("reasoning_details") if isinstance(message, dict) else None
        if details_in:  # read below, instead of the `reasoning` text
            data = {**data, "choices": [{**data["choices"][0], "message": {
                k: v for k, v in message.items() if k not in ("reasoning", "reasoning_content")}}]}
        result = super().completion(data)
        if details_in:
            from pydantic import TypeAdapter
            from pydantic_ai.models._reasoning_details import ReasoningDetail, from_reasoning_detail

            adapter = TypeAdapter(list[ReasoningDetail])
            thinking = [from_reasoning_detail(d, self.system) for d in adapter.validate_python(details_in)]
            result.parts = [*thinking, *result.parts]
        details = dict(result.provider_details or {})
        details.update(choice_details(data))
        details.update(usage_details(data.get("usage")))
        annotations = message.get("annotations") if isinstance(message, dict) else None
        if isinstance(annotations, list) and annotations:
            details["annotations"] = annotations
            text = next((p for p in reversed(result.parts) if isinstance(p, TextPart)), None)
            if text is not None:
                text.provider_details = {**(text.provider_details or {}), **annotations_details(annotations)}
        result.provider_details = details or None
        return result


def _place_system_messages_before_generation(messages: list[dict[str, Any]]) -> None:
    """An Anthropic route keeps a mid-conversation system message only right before a generation:
    each moves past the user and tool messages after it (pydantic-ai's rule)."""
    for index in range(len(messages) - 1, system_prefix_count(messages) - 1, -1):
        if messages[index]["role"] != "system" or "configuration_update" in messages[index]:
            continue
        target = index + 1
        while target < len(messages) and (messages[target]["role"] in ("user", "tool")
                                          or "configuration_update" in messages[target]):
            target += 1
        if target > index + 1:
            messages.insert(target - 1, messages.pop(index))


__all__ = ["OpenRouterChatModel", "openrouter_settings", "search_tool"]

"""OpenRouter's Chat Completions dialect on ketch's own Chat model (no ``openai`` SDK).

:class:`OpenRouterChatModel` sends what pydantic-ai's ``OpenRouterModel`` sent through the SDK
(``tests/test_wire_openrouter.py`` compares the bytes), for what ketch asks of it:

- the thinking level as OpenRouter's ``reasoning`` body field (``{"effort": ..., "enabled": true}``;
  ``none`` to turn it off, the route's lowest effort where reasoning is mandatory), never
  ``reasoning_effort`` unless ``openai_reasoning_effort`` is set;
- the unified ``cache`` setting as ``cache_control`` breakpoints where the routed provider takes
  them (Anthropic: after the tool definitions, the static instructions and the conversation, at most
  four, with a TTL; Gemini: instructions and conversation, the last one never ending the request);
- hosted search as the ``openrouter:web_search`` server tool after the function tools;
- reasoning that came as ``reasoning_details`` goes back as ``reasoning_details`` (signed and
  encrypted details included), other reasoning in the ``reasoning`` field; a mid-conversation system
  message on an Anthropic route moves to just before the next generation.

Answers are read by ``wire.chat_openrouter_stream``.
"""

from __future__ import annotations

import dataclasses
from itertools import chain
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
    ``reasoning_details``, after the rest of the assistant message."""

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
            tools[-1]["cache_control"] = self._cache_control(ttl)
        search = next((t for t in params.native_tools if isinstance(t, WebSearchTool)), None)
        if search is not None:
            tools = [*tools, search_tool(search)]
        return tools, choice

    def web_search_options(self, params: Any) -> None:
        return None  # OpenRouter searches through its server tool

    # ------------------------------------------------------------ messages
    def messages(self, messages: list[ModelMessage], settings: dict[str, Any], params: Any) -> list[dict[str, Any]]:
        out = super().messages(messages, settings, params)
        profile = self.profile
        if profile.get("supports_inline_system_prompts", False) and profile.get(
                "openrouter_system_messages_precede_generation", False):
            _place_system_messages_before_generation(out)
        if not profile.get("openrouter_supports_cache_control", False):
            return out
        if out and (ttl := settings.get("openrouter_cache_messages")):
            from pydantic_ai.models import _request_scoped_suffix_start, _request_scoped_tail_texts
            from pydantic_ai.models._prompt_cache import previous_tail_needing_breakpoint

            tail = previous_tail_needing_breakpoint([m["role"] for m in out], [_block_count(m) for m in out])
            if tail is not None:
                self._mark(out, tail, ttl)
            end, _ = _request_scoped_suffix_start(out, _request_scoped_tail_texts(messages), _scoped_text)
            if end:
                self._mark(out, end - 1, ttl)
        if ttl := settings.get("openrouter_cache_instructions"):
            self._mark_instructions(out, messages, params, ttl)
        if not profile.get("openrouter_supports_trailing_cache_control", True):
            self._move_trailing(out)
        tool_point = bool(settings.get("openrouter_cache_tool_definitions") and params.declared_tool_defs
                          and profile.get("openrouter_supports_tool_cache", False))
        self._limit(out, tool_point)
        return out

    def body(self, messages: list[ModelMessage], settings: dict[str, Any], params: Any, *, stream: bool) -> dict[str, Any]:
        body = super().body(messages, settings, params, stream=stream)
        self._finalize_ttls(body.get("tools") or [], body["messages"])
        return body

    def _cache_control(self, ttl: Any) -> dict[str, str]:
        out = {"type": "ephemeral"}
        if self.profile.get("openrouter_supports_cache_ttl", False):
            out["ttl"] = "5m" if isinstance(ttl, bool) else ttl
        return out

    def _mark(self, out: list[dict[str, Any]], index: int, ttl: Any) -> None:
        """A breakpoint on the last block of ``out[index]``, on copies (the encoded history is memoized)."""
        message = out[index]
        content = message.get("content")
        if isinstance(content, str):
            out[index] = {**message, "content": [{"type": "text", "text": content, "cache_control": self._cache_control(ttl)}]}
        elif isinstance(content, list) and content and "cache_control" not in content[-1]:
            out[index] = {**message, "content": [*content[:-1], {**content[-1], "cache_control": self._cache_control(ttl)}]}

    def _mark_instructions(self, out: list[dict[str, Any]], messages: list[ModelMessage], params: Any, ttl: Any) -> None:
        instructions = self._get_instruction_parts(messages, params)
        if not instructions:
            if count := _system_prefix_count(out):
                self._mark(out, count - 1, ttl)
            return
        role = self.profile.get("openai_system_prompt_role", None) or "system"
        if role not in ("system", "developer"):
            return
        prefix_cache = self.profile.get("openrouter_supports_dynamic_instruction_cache", False)
        if not prefix_cache and any(p.dynamic for p in instructions):
            return
        prefix = next((i for i, m in enumerate(out) if m.get("role") != role), len(out))
        if not prefix_cache:
            self._mark(out, prefix - 1, ttl)
            return
        from pydantic_ai.models._prompt_cache import instruction_cache_boundaries

        first = prefix - len(instructions)
        static, stable = instruction_cache_boundaries(instructions)
        if first + static:
            self._mark(out, first + static - 1, ttl)
        if stable > static:
            self._mark(out, first + stable - 1, ttl)

    def _move_trailing(self, out: list[dict[str, Any]]) -> None:
        """Gemini routes: only the last conversation breakpoint counts, and never at the request's end
        or on a tool result (it would bill the prompt twice), so it moves to an earlier message."""
        carriers = [(mi, pi) for mi, m in enumerate(out) if m["role"] not in ("system", "developer")
                    and isinstance(m.get("content"), list) for pi, p in enumerate(m["content"]) if "cache_control" in p]
        if not carriers:
            return
        last_mi, last_pi = carriers[-1]
        control = out[last_mi]["content"][last_pi]["cache_control"]
        for mi, pi in carriers:
            content = list(out[mi]["content"])
            content[pi] = {k: v for k, v in content[pi].items() if k != "cache_control"}
            out[mi] = {**out[mi], "content": content}
        message = out[last_mi]
        at_end = last_mi == len(out) - 1 and last_pi == len(message["content"]) - 1
        if message["role"] != "tool" and not at_end:
            content = list(message["content"])
            content[last_pi] = {**content[last_pi], "cache_control": control}
            out[last_mi] = {**message, "content": content}
            return
        for i in range(last_mi - 1, -1, -1):
            earlier = out[i]
            content = earlier.get("content")
            if earlier["role"] in ("user", "assistant") and content:
                if isinstance(content, str):
                    out[i] = {**earlier, "content": [{"type": "text", "text": content, "cache_control": control}]}
                else:
                    out[i] = {**earlier, "content": [*content[:-1], {**content[-1], "cache_control": control}]}
                return

    def _limit(self, out: list[dict[str, Any]], tool_point: bool) -> None:
        """At most the downstream's number of breakpoints (Anthropic: 4): the tools' and the first
        instructions' stay, the oldest message breakpoints go."""
        most = self.profile.get("openrouter_max_cache_points")
        if most is None:
            return
        from pydantic_ai.models._prompt_cache import excess_cache_points, split_instruction_cache_points

        prefix = _system_prefix_count(out)
        reserved, optional = split_instruction_cache_points(
            [p for m in out[:prefix] if isinstance(m.get("content"), list) for p in m["content"] if "cache_control" in p])
        reserved += int(tool_point)
        parts = (p for m in reversed(out[prefix:]) if isinstance(m.get("content"), list) for p in reversed(m["content"]))
        # every part carrying a breakpoint is a copy made by _mark/_move_trailing: safe to change in place
        for part in excess_cache_points(chain(parts, optional), max_points=most, reserved=reserved,
                                        is_cache_point=lambda p: "cache_control" in p, description="downstream provider"):
            del part["cache_control"]

    def _finalize_ttls(self, tools: list[Any], out: list[dict[str, Any]]) -> None:
        """Anthropic refuses a 1h breakpoint after a 5m one: each takes the longest TTL after it."""
        if not self.profile.get("openrouter_supports_cache_ttl", False):
            return
        from pydantic_ai.models._prompt_cache import raise_earlier_cache_ttls

        blocks = [*tools, *(b for m in out if isinstance(m.get("content"), list) for b in m["content"])]
        carriers = [b for b in blocks if isinstance(b, dict) and b.get("cache_control")]
        ttls = [c["cache_control"].get("ttl", "5m") for c in carriers]
        for carrier, ttl, raised in zip(carriers, ttls, raise_earlier_cache_ttls(ttls), strict=True):
            if raised != ttl:
                carrier["cache_control"] = self._cache_control(raised)

    # ------------------------------------------------------------ answers
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


def _block_count(message: dict[str, Any]) -> int:
    content = message.get("content")
    count = len(content) if isinstance(content, list) else int(bool(content))
    if message["role"] == "assistant":
        count += len(message.get("tool_calls") or [])
    return count


def _scoped_text(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    return content if message["role"] in ("user", "system") and isinstance(content, str) else None


def _system_prefix_count(messages: list[dict[str, Any]]) -> int:
    return next((i for i, m in enumerate(messages) if m["role"] not in ("system", "developer")), len(messages))


def _place_system_messages_before_generation(messages: list[dict[str, Any]]) -> None:
    """An Anthropic route keeps a mid-conversation system message only right before a generation:
    each moves past the user and tool messages after it (pydantic-ai's rule)."""
    for index in range(len(messages) - 1, _system_prefix_count(messages) - 1, -1):
        if messages[index]["role"] != "system":
            continue
        target = index + 1
        while target < len(messages) and messages[target]["role"] in ("user", "tool"):
            target += 1
        if target > index + 1:
            messages.insert(target - 1, messages.pop(index))


__all__ = ["OpenRouterChatModel", "openrouter_settings", "search_tool"]

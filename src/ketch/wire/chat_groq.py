"""Groq's Chat Completions dialect on ketch's own Chat model (no ``groq`` SDK).

:class:`GroqChatModel` sends what pydantic-ai's ``GroqModel`` (with ketch's compound rules,
``providers.groq``) sent through the ``groq`` SDK; ``tests/test_wire_groq.py`` compares the bytes:

- the body in the SDK's order (``messages``, ``model``, then the other fields alphabetically, the
  caller's extra fields last), ``n: 1``, ``max_tokens``, no ``stream_options``;
- the thinking level as ``reasoning_format`` (``parsed``; ``hidden`` to keep a model that cannot stop
  reasoning quiet) and, on the families that grade it, ``reasoning_effort`` (gpt-oss: low to high;
  qwen3: ``none`` turns it off);
- reasoning goes back as tagged text in the assistant's content (Groq takes no reasoning field);
- hosted search: a compound system searches on its own (no tool is sent; domain filters go in
  ``search_settings``), takes no function tools, and is refused a request that may not search.

Answers are read by ``wire.chat_groq_stream``.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar

from pydantic_ai.exceptions import ModelHTTPError, UserError
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelResponse,
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from pydantic_ai.models import Model
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import DEFAULT_THINKING_TAGS, ModelProfile, merge_profile

from ketch.wire.chat import ChatCompletionsModel
from ketch.wire.chat_body import ChatEncoder
from ketch.wire.chat_groq_stream import GroqStream, executed_parts, failed_generation, groq_usage, stamp
from ketch.wire.chat_stream import ChatStream, first_message

PROVIDER = "groq"
def groq_profile(model_name: str) -> ModelProfile:
    """``GroqProvider.model_profile(model_name)`` (its module imports the SDK)."""
    from pydantic_ai.profiles._special_tokens import special_token_route_profile
    from pydantic_ai.profiles.deepseek import deepseek_model_profile
    from pydantic_ai.profiles.google import google_model_profile
    from pydantic_ai.profiles.groq import groq_model_profile
    from pydantic_ai.profiles.meta import meta_model_profile
    from pydantic_ai.profiles.mistral import mistral_model_profile
    from pydantic_ai.profiles.moonshotai import moonshotai_model_profile
    from pydantic_ai.profiles.openai import openai_model_profile
    from pydantic_ai.profiles.qwen import qwen_model_profile

    def moonshot(name: str) -> ModelProfile | None:
        return merge_profile(ModelProfile(supports_json_object_output=True, supports_json_schema_output=True),
                             moonshotai_model_profile(name))

    def meta(name: str) -> ModelProfile | None:
        if name in {"llama-4-maverick-17b-128e-instruct", "llama-4-scout-17b-16e-instruct"}:
            return merge_profile(ModelProfile(supports_json_object_output=True, supports_json_schema_output=True),
                                 meta_model_profile(name))
        return meta_model_profile(name)

    prefixes = {"llama": meta_model_profile, "meta-llama/": meta, "gemma": google_model_profile,
                "qwen": qwen_model_profile, "deepseek": deepseek_model_profile, "mistral": mistral_model_profile,
                "moonshotai/": moonshot, "compound-": groq_model_profile, "openai/": openai_model_profile}
    name = model_name.lower()
    profile: ModelProfile | None = None
    for prefix, func in prefixes.items():
        if name.startswith(prefix):
            profile = func(name[len(prefix):] if prefix.endswith("/") else name)
            break
    return merge_profile(profile, groq_model_profile(model_name), ModelProfile(supports_inline_system_prompts=True),
                         special_token_route_profile("groq", model_name))


class GroqEncoder(ChatEncoder):
    """Groq's messages: images only as files, reasoning as tagged text, no ``content`` key on an
    assistant message without text."""

    def _content_item(self, item: Any) -> dict[str, Any]:
        """Text and images as the plain Chat encoder writes them; anything else is refused here."""
        if (isinstance(item, str | TextContent) or (isinstance(item, ImageUrl) and not item.force_download)
                or (isinstance(item, BinaryContent) and item.is_image)):
            return super()._content_item(item)
        raise UserError(f"{type(item).__name__} ({getattr(item, 'media_type', '?')}) cannot be sent to Groq "
                        "(it takes text and images)")

    def response(self, message: ModelResponse) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        from pydantic_ai._utils import guard_tool_call_id

        start, end = self.profile.get("thinking_tags", DEFAULT_THINKING_TAGS)
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                texts.append(part.content)
            elif isinstance(part, ThinkingPart):
                texts.append("\n".join([start, part.content, end]))
            elif isinstance(part, ToolCallPart):
                calls.append({"id": guard_tool_call_id(t=part), "type": "function",
                              "function": {"name": part.tool_name, "arguments": part.args_as_json_str()}})
            elif not isinstance(part, NativeToolCallPart | NativeToolReturnPart):
                continue  # files and compactions are not sent back to Groq
        out: dict[str, Any] = {"role": "assistant"}
        if texts:
            out["content"] = "\n\n".join(texts)
        if calls:
            out["tool_calls"] = calls
        return None, out


_SETTING_FIELDS = ("frequency_penalty", "logit_bias", "presence_penalty", "seed", "temperature", "top_p")


class GroqChatModel(ChatCompletionsModel):
    """Groq's Chat Completions (see the module docstring)."""

    unsupported_settings = frozenset({"service_tier", "top_k"})
    _unsupported_file_inputs = frozenset({"document", "audio", "video"})
    stream_class: ClassVar[type[ChatStream]] = GroqStream

    def __init__(self, model_name: str, *, compound_refusal: str | None = None, **kwargs: Any) -> None:
        """``compound_refusal``: for a compound system (``providers.groq.is_compound``), the line a
        request that may not search is refused with; None for every other model."""
        kwargs.setdefault("provider_name", PROVIDER)
        kwargs.setdefault("provider_profile", groq_profile(model_name))
        super().__init__(model_name, **kwargs)
        self._encoder = GroqEncoder(self)
        self._compound_refusal = compound_refusal

    @property
    def compound(self) -> bool:
        """A compound system: it searches on its own and takes no function tools."""
        return self._compound_refusal is not None

    def unsupported_native_tool_settings(self, native_tool: Any) -> frozenset[str]:
        return native_tool.restricting_settings - {"allowed_domains", "blocked_domains"}

    @cached_property
    def profile(self) -> Any:  # type: ignore[override]
        profile = Model.profile.func(self)  # type: ignore[attr-defined]
        if not profile.get("groq_always_has_web_search_builtin_tool", False):
            tools = profile.get("supported_native_tools", frozenset()) - {WebSearchTool}
            profile = merge_profile(profile, ModelProfile(supported_native_tools=tools))
        return profile

    def _unsupported_settings(self) -> frozenset[str]:
        return self.unsupported_settings

    def prepare_request(self, model_settings: Any, params: Any) -> Any:
        if self._compound_refusal is not None and not any(isinstance(t, WebSearchTool) for t in params.native_tools):
            raise UserError(self._compound_refusal)
        if (not self.profile.get("groq_always_has_web_search_builtin_tool", False)
                and any(isinstance(t, WebSearchTool) and not t.optional for t in params.native_tools)
                and not any(t.unless_native == WebSearchTool.kind for t in params.function_tools)):
            raise UserError(f"`WebSearchTool` is not supported by Groq model {self.model_name!r}. Use a compound "
                            "model such as 'groq/compound', or a local fallback such as `WebSearch(local='duckduckgo')`.")
        return Model.prepare_request(self, model_settings, params)

    async def request(self, messages: list[ModelMessage], model_settings: Any, params: Any) -> ModelResponse:
        try:
            return await super().request(messages, model_settings, params)
        except ModelHTTPError as exc:
            generation = failed_generation(exc.body)
            if generation is None:
                raise
            parts: list[ModelResponsePart] = []
            if isinstance(generation, tuple):
                parts.append(ToolCallPart(tool_name=generation[0], args=generation[1]))
            elif generation:
                parts.append(TextPart(content=generation))
            return ModelResponse(parts=parts, model_name=exc.model_name, provider_name=self.system,
                                 provider_url=self.base_url, finish_reason="error")

    # ------------------------------------------------------------ the body
    def _tools_and_choice(self, settings: dict[str, Any], params: Any) -> tuple[list[dict[str, Any]], Any]:
        if self.compound:
            return [], None  # compound takes no user-provided tools
        from pydantic_ai.models._tool_choice import resolve_tool_choice

        resolved = resolve_tool_choice(settings, params)  # type: ignore[arg-type]
        defs = params.declared_tool_defs
        if resolved in ("auto", "required", "none"):
            choice: Any = resolved
        else:
            mode, names = resolved
            if mode == "required" and len(names) == 1:
                choice = {"type": "function", "function": {"name": next(iter(names))}}
            else:
                defs = {k: v for k, v in defs.items() if k in names}
                choice = mode
        tools = [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                                   "parameters": t.parameters_json_schema}} for t in defs.values()]
        return (tools, choice) if tools else (tools, None)

    def _reasoning(self, settings: dict[str, Any], params: Any) -> tuple[Any, Any]:
        """``(reasoning_format, reasoning_effort)`` for this request (None: not sent)."""
        from pydantic_ai.profiles.groq import GROQ_GPT_OSS_REASONING_EFFORT_MAP

        profile = self.profile
        thinking = params.thinking
        disable = thinking is False and profile.get("groq_supports_reasoning_disable", False)
        effort = "none" if disable else settings.get("groq_reasoning_effort")
        if effort is None and profile.get("groq_supports_graded_reasoning_effort", False):
            if thinking is True:
                effort = "medium"
            elif thinking is False:
                effort = GROQ_GPT_OSS_REASONING_EFFORT_MAP["minimal"]
            elif thinking is not None:
                effort = GROQ_GPT_OSS_REASONING_EFFORT_MAP[thinking]
        fmt = settings.get("groq_reasoning_format")
        if not fmt:
            if thinking is False:
                fmt = None if disable or (profile.get("thinking_always_enabled", False) and not profile.get(
                    "groq_supports_graded_reasoning_effort", False)) else "hidden"
            elif thinking is not None:
                fmt = "parsed"
        return fmt, effort

    def body(self, messages: list[ModelMessage], settings: dict[str, Any], params: Any, *, stream: bool) -> dict[str, Any]:
        tools, choice = self._tools_and_choice(settings, params)
        search: dict[str, Any] | None = None
        for tool in params.native_tools:
            if isinstance(tool, WebSearchTool):
                found: dict[str, Any] = {}
                if tool.allowed_domains:
                    found["include_domains"] = tool.allowed_domains
                if tool.blocked_domains:
                    found["exclude_domains"] = tool.blocked_domains
                search = found or search
        fields: dict[str, Any] = {"messages": self.messages(messages, settings, params), "model": self._model_name}
        for key in _SETTING_FIELDS:
            if key in settings:
                fields[key] = settings[key]
        if "max_tokens" in settings:
            fields["max_tokens"] = settings["max_tokens"]
        fields["n"] = 1
        if tools and "parallel_tool_calls" in settings:
            fields["parallel_tool_calls"] = settings["parallel_tool_calls"]
        fmt, effort = self._reasoning(settings, params)
        if fmt:
            fields["reasoning_format"] = fmt
        if params.output_mode == "native" and params.output_object is not None:
            output = params.output_object
            schema: dict[str, Any] = {"name": output.name or _default_output_name(), "schema": output.json_schema,
                                      "strict": output.strict}
            if output.description:
                schema["description"] = output.description
            fields["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif params.output_mode == "prompted" and not tools and self.profile.get("supports_json_object_output", False):
            fields["response_format"] = {"type": "json_object"}
        if search is not None:
            fields["search_settings"] = search
        if "stop_sequences" in settings:
            fields["stop"] = settings["stop_sequences"]
        fields["stream"] = stream
        if choice is not None:
            fields["tool_choice"] = choice
        if tools:
            fields["tools"] = tools
        body = {k: fields[k] for k in ("messages", "model")}
        body.update({k: fields[k] for k in sorted(fields) if k not in ("messages", "model")})
        extra = settings.get("extra_body")
        extra = dict(extra) if isinstance(extra, dict) else {}
        if effort is not None:
            extra["reasoning_effort"] = effort
        body.update(extra)
        return body

    # ------------------------------------------------------------ answers
    def completion(self, data: Any) -> ModelResponse:
        """A whole answer (``GroqModel._process_response``)."""
        from pydantic_ai._thinking_part import split_content_into_text_and_thinking

        choice, message = first_message(data, self.system)
        parts: list[ModelResponsePart] = []
        if message.get("reasoning") is not None:
            parts.append(ThinkingPart(content=message["reasoning"]))
        for tool in message.get("executed_tools") or []:
            call, result = executed_parts(tool, self.system)
            if call and result:
                parts += [call, result]
        if message.get("content"):
            parts.extend(split_content_into_text_and_thinking(message["content"],
                                                              self.profile.get("thinking_tags", DEFAULT_THINKING_TAGS)))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            parts.append(ToolCallPart(tool_name=function.get("name"), args=function.get("arguments"),
                                      tool_call_id=call.get("id")))
        raw = choice.get("finish_reason")
        details: dict[str, Any] = {"finish_reason": raw}
        if data.get("created") and (created := stamp(data["created"])) is not None:
            details["timestamp"] = created
        model = data.get("model") if isinstance(data.get("model"), str) else self._model_name
        return ModelResponse(parts=parts, usage=groq_usage(data.get("usage"), model=model, provider=self.system,
                                                           provider_url=self.base_url),
                             model_name=model, provider_response_id=data.get("id"), provider_name=self.system, provider_url=self.base_url,
                             finish_reason=self.finish_reasons.get(raw) if raw else None, provider_details=details)


def _default_output_name() -> str:
    from pydantic_ai._output import DEFAULT_OUTPUT_TOOL_NAME

    return DEFAULT_OUTPUT_TOOL_NAME


__all__ = ["GroqChatModel", "GroqEncoder", "groq_profile"]

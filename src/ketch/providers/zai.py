"""Z.AI (GLM) on its Chat Completions endpoint, with the endpoint's own ``web_search`` tool.

:class:`ZaiChatModel` is ketch's own Chat model (``wire.chat``) in Z.AI's dialect, as pydantic-ai's
``ZaiModel`` spoke it: ``reasoning_content`` sent back, the unified thinking level as a
``thinking`` field (never ``reasoning_effort``), Z.AI's extra finish reasons; it adds hosted search. When the session routes search here (``websearch.capability``: the ``zai-chat``
protocol), the request carries Z.AI's tool next to the function tools::

    {"type": "web_search", "web_search": {"enable": true, "search_engine": "search_pro_jina",
                                          "search_result": true}}

and the answer reports what was searched in a top-level ``web_search`` array (in the completion,
or in a stream chunk): rows with ``title``, ``link``, ``content``, ``media``, ``refer``... Those rows
become one provider-executed ``web_search`` call and its result in the response, so the UI and
exports get source rows and the history keeps Z.AI's rows as they came. Z.AI's API takes no search
parts back: a later turn replays the answer text alone, which is its own shape.

This is only the chat tool. Z.AI's standalone Web Search API (``POST /paas/v4/web_search``) is a
separate product and is never called.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from pydantic_ai.messages import FinishReason, ModelResponseStreamEvent, NativeToolCallPart, NativeToolReturnPart
from pydantic_ai.native_tools import WebSearchTool
from pydantic_ai.profiles import ModelProfile, merge_profile

from ketch.wire.chat import ChatCompletionsModel
from ketch.wire.chat_stream import FINISH_REASONS, ChatStream

PROVIDER = "zai"
HOSTS = frozenset({"api.z.ai", "open.bigmodel.cn"})
"""Z.AI's own API hosts: a connection there is built on this model whatever its preset."""
SEARCH_ENGINE = "search_pro_jina"
"""The engine Z.AI's chat ``web_search`` tool takes on its general endpoint."""
ZAI_FINISH_REASONS: dict[str, FinishReason] = {**FINISH_REASONS, "sensitive": "content_filter",
                                              "model_context_window_exceeded": "length", "network_error": "error"}
"""Z.AI's finish reasons on top of OpenAI's (docs.z.ai, chat completion)."""


def speaks_zai(preset: str, base_url: str | None) -> bool:
    """Whether a Chat Completions connection is Z.AI's own API (its preset, or one of its hosts)."""
    from ketch.providers.base_url import host_of

    return preset == PROVIDER or host_of(base_url) in HOSTS


def search_tool() -> dict[str, Any]:
    """Z.AI's chat ``web_search`` tool, asking for the searched rows back (``search_result``)."""
    return {"type": "web_search", "web_search": {"enable": True, "search_engine": SEARCH_ENGINE, "search_result": True}}


def search_parts(rows: Any, call_id: str) -> tuple[NativeToolCallPart, NativeToolReturnPart] | None:
    """The provider-executed call and result for one ``web_search`` array, or None if it holds no row."""
    if not isinstance(rows, list) or not any(isinstance(r, dict) for r in rows):
        return None
    kept = [dict(r) for r in rows if isinstance(r, dict)]
    call = NativeToolCallPart(tool_name=WebSearchTool.kind, args={}, tool_call_id=call_id, provider_name=PROVIDER)
    result = NativeToolReturnPart(tool_name=WebSearchTool.kind, content=kept, tool_call_id=call_id,
                                  provider_name=PROVIDER)
    return call, result


def zai_profile(model_name: str) -> ModelProfile:
    """The profile pydantic-ai's Z.AI provider gave ``model_name``."""
    from pydantic_ai.profiles._special_tokens import special_token_route_profile
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer, OpenAIModelProfile
    from pydantic_ai.profiles.zai import zai_model_profile

    return merge_profile(
        OpenAIModelProfile(json_schema_transformer=OpenAIJsonSchemaTransformer),
        zai_model_profile(model_name),
        OpenAIModelProfile(supports_json_object_output=True, openai_chat_thinking_field="reasoning_content",
                           openai_chat_send_back_thinking_parts="field"),
        special_token_route_profile("zai", model_name),
    )


def zai_settings(settings: dict[str, Any], thinking: Any, profile: Any) -> dict[str, Any]:
    """The unified thinking level and ``zai_clear_thinking`` as Z.AI's ``thinking`` (and, where the
    model takes one, ``reasoning_effort``) body fields, in ``extra_body`` as ``ZaiModel`` sent them."""
    extra = dict(settings.get("extra_body") or {})
    payload: dict[str, Any] = {}
    if thinking is False and profile.get("thinking_always_enabled", False):
        thinking = "minimal"
    if thinking is False:
        payload["type"] = "disabled"
    elif thinking is not None:
        payload["type"] = "enabled"
    clear = settings.get("zai_clear_thinking")
    if clear is None and profile.get("supports_thinking", False):
        clear = False
    if clear is not None:
        payload["clear_thinking"] = clear
    if payload:
        extra["thinking"] = payload
    if profile.get("zai_supports_reasoning_effort", False) and isinstance(thinking, str):
        extra["reasoning_effort"] = profile.get("zai_reasoning_effort_mapping", {}).get(thinking, thinking)
    out = {k: v for k, v in settings.items() if not k.startswith("zai_")}
    if extra:
        out["extra_body"] = extra
    return out


@dataclass
class ZaiSearchStream(ChatStream):
    """A Z.AI stream: a chunk's ``web_search`` rows become the search call and result, before the
    text of that chunk; the same rows repeated in a later chunk are one search, not two."""

    _seen_rows: set[str] = field(default_factory=set, init=False)
    _searches: int = field(default=0, init=False)

    def _chunk_extra(self, chunk: dict[str, Any]) -> Iterator[ModelResponseStreamEvent]:
        from ketch.protocol import strict_json

        rows = chunk.get("web_search")
        key = strict_json.dumps(rows, sort_keys=True, default=str) if rows else ""
        if not rows or key in self._seen_rows:
            return
        self._seen_rows.add(key)
        self._searches += 1
        parts = search_parts(rows, f"zai_search_{chunk.get('id') or 'stream'}_{self._searches}")
        for n, part in enumerate(parts or ()):
            yield self._parts_manager.handle_part(vendor_part_id=f"zai-web-search-{self._searches}-{n}", part=part)


class ZaiChatModel(ChatCompletionsModel):
    """Z.AI's Chat Completions dialect; its ``web_search`` tool goes on the wire when the request
    carries pydantic-ai's ``WebSearchTool`` (only then), and its rows are read back."""

    stream_class: ClassVar[type[ChatStream]] = ZaiSearchStream
    finish_reasons: ClassVar[dict[str, Any]] = ZAI_FINISH_REASONS

    @cached_property
    def profile(self) -> Any:  # type: ignore[override]
        from pydantic_ai.profiles.openai import OpenAIModelProfile

        # Lets WebSearchTool through the Chat model's check; this class, not `web_search_options`, sends it.
        native = OpenAIModelProfile(openai_chat_supports_web_search=True, supported_native_tools=frozenset({WebSearchTool}))
        return merge_profile(ChatCompletionsModel.profile.func(self), native)  # type: ignore[attr-defined]

    def prepare_request(self, model_settings: Any, model_request_parameters: Any) -> Any:
        settings, params = super().prepare_request(model_settings, model_request_parameters)
        return zai_settings(dict(settings or {}), params.thinking, self.profile), params

    def reasoning_effort(self, settings: dict[str, Any], params: Any) -> str | None:
        return None  # the level goes in Z.AI's `thinking` field (zai_settings)

    def tools_and_choice(self, settings: dict[str, Any], params: Any) -> tuple[list[dict[str, Any]], Any]:
        tools, choice = super().tools_and_choice(settings, params)
        if any(isinstance(t, WebSearchTool) for t in params.native_tools):
            tools, choice = [*tools, search_tool()], choice or "auto"
        return tools, choice

    def web_search_options(self, params: Any) -> None:
        return None  # Z.AI takes its own tool, never OpenAI's `web_search_options`

    def completion(self, data: Any) -> Any:
        result = super().completion(data)
        parts = search_parts(data.get("web_search"), f"zai_search_{data.get('id') or 'result'}")
        if parts is not None:
            result.parts = [*parts, *result.parts]
        return result


__all__ = ["HOSTS", "PROVIDER", "ZaiChatModel", "search_parts", "search_tool", "speaks_zai", "zai_profile"]

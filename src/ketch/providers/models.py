"""Build pydantic-ai models and settings from a resolved Connection.

Every wire is ketch's own model over httpx (``wire.*``, ``providers.mistral_conversations``):
no provider SDK is imported, and each model module only when its wire is in use.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ketch.config.settings import Connection
from ketch.providers.openrouter import openrouter_model, speaks_openrouter

if TYPE_CHECKING:
    from pydantic_ai.models import Model
    from pydantic_ai.settings import ModelSettings

os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")

_NO_KEY = "not-needed"
"""Local servers take no key; the bearer header the SDKs sent for none carried this (kept, so the
bytes on the wire stay as they were)."""


def _response_hooks(wire: str) -> list[Any]:
    """httpx response hooks of a model client: the end-of-stream check, then text coalescing."""
    from ketch.providers import coalesce
    from ketch.wire import stream_end

    return [stream_end.response_hook(wire), coalesce.response_hook()]


def _own_wire_hooks() -> list[Any]:
    """httpx response hooks of ketch's own wire models: text coalescing only (their SSE reader
    already fails a stream that ends before its end event, with the model errors core reads)."""
    from ketch.providers import coalesce

    return [coalesce.response_hook()]


def wire_module(conn: Connection) -> str:
    """The module a connection's model comes from (for preloading it off the event loop): ketch's
    own wire module on every wire (on Chat Completions, the dialect's)."""
    own = {"openai-responses": "ketch.wire.responses", "anthropic-messages": "ketch.wire.messages",
           "gemini": "ketch.wire.gemini", "mistral-conversations": "ketch.providers.mistral_conversations"}
    if conn.wire in own:
        return own[conn.wire]
    return chat_wire_module(conn)


def chat_wire_module(conn: Connection) -> str:
    """The module a Chat Completions connection's model comes from (for preloading it): the
    dialect's (``wire.chat_openrouter``, ``wire.chat_groq``) or ``wire.chat``."""
    from ketch.providers.groq import speaks_groq

    if speaks_openrouter(conn.preset.name, "openai-chat", conn.base_url):
        return "ketch.wire.chat_openrouter"
    if speaks_groq(conn.preset.name, conn.base_url):
        return "ketch.wire.chat_groq"
    return "ketch.wire.chat"


def build_model(
    conn: Connection, wire: str | None = None, *, profile: dict[str, Any] | None = None
) -> Model:
    """The pydantic-ai model for ``conn`` over ``wire`` (default: the connection's wire).

    ``profile`` overrides model-profile settings (``websearch.model_profile_overrides``: the
    hosted search tool version follows model metadata, not the SDK's guess)."""
    wire = wire or conn.wire
    from ketch.providers import ordered_results, settled_history
    from ketch.wire import history_scans

    history_scans.install()  # the SDK's per-step scans of the whole history, skipped where they find nothing
    settled_history.install()  # its per-step repair of the whole history, skipped where there is nothing to repair
    ordered_results.install()  # its per-step reorderings of tool results, skipped where nothing would move
    extra: dict[str, Any] = {"profile": profile} if profile else {}
    if wire == "anthropic-messages":  # ketch's own Messages model: no SDK on this wire
        from ketch.providers import coalesce
        from ketch.wire.messages import AnthropicMessagesModel

        # text coalescing only: wire.sse itself fails a stream without its message_stop
        return AnthropicMessagesModel(conn.model_name, base_url=conn.base_url, api_key=conn.api_key or _NO_KEY,
                                      timeout=conn.timeout, max_retries=conn.max_retries,
                                      response_hooks=[coalesce.response_hook()], **extra)
    if wire == "gemini":  # ketch's own wire (wire.gemini): no Google SDK
        from ketch.providers import coalesce
        from ketch.wire.gemini import GeminiModel

        # text coalescing only: the model checks the end of its stream itself (wire.sse)
        return GeminiModel(conn.model_name, base_url=conn.base_url, api_key=conn.api_key or "",
                           timeout=conn.timeout, max_retries=conn.max_retries,
                           response_hooks=[coalesce.response_hook()], **extra)
    if wire == "mistral-conversations":  # only a Mistral session whose route searches (websearch.wiring)
        from ketch.providers.mistral_conversations import MistralConversationsModel

        return MistralConversationsModel(conn.model_name, base_url=conn.base_url, api_key=conn.api_key or "",
                                         timeout=conn.timeout, max_retries=conn.max_retries,
                                         response_hooks=_response_hooks(wire), **extra)
    if wire == "openai-responses":  # ketch's own model: no SDK on this wire (wire.responses)
        from ketch.providers import coalesce
        from ketch.wire.responses import model_class

        official = conn.preset.official_openai
        name = "openai" if official else (conn.preset.name if conn.preset.name != "openai-compatible" else conn.name)
        return model_class()(conn.model_name, base_url=conn.base_url, api_key=conn.api_key or "",
                              provider_name=name, official=official, timeout=conn.timeout,
                              max_retries=conn.max_retries, response_hooks=[coalesce.response_hook()], **extra)
    if speaks_openrouter(conn.preset.name, wire, conn.base_url):
        return openrouter_model(conn, _own_wire_hooks(), profile)
    from ketch.providers.groq import speaks_groq
    from ketch.providers.zai import speaks_zai

    if speaks_groq(conn.preset.name, conn.base_url):
        from ketch.providers.groq import api_base_url, compound_refusal
        from ketch.wire.chat_groq import GroqChatModel

        return GroqChatModel(conn.model_name, base_url=api_base_url(conn.base_url), api_key=conn.api_key or _NO_KEY,
                             compound_refusal=compound_refusal(conn.model_name), profile=profile, timeout=conn.timeout, max_retries=conn.max_retries,
                             response_hooks=_own_wire_hooks())

    if speaks_zai(conn.preset.name, conn.base_url):
        from ketch.providers.zai import PROVIDER, ZaiChatModel, zai_profile

        return ZaiChatModel(conn.model_name, base_url=conn.base_url, api_key=conn.api_key or _NO_KEY,
                            provider_name=PROVIDER, provider_profile=zai_profile(conn.model_name), profile=profile,
                            timeout=conn.timeout, max_retries=conn.max_retries, response_hooks=_own_wire_hooks())
    return chat_model(conn, _own_wire_hooks(), profile)


def chat_model(conn: Connection, hooks: list[Any], profile: dict[str, Any] | None = None) -> Model:
    """ketch's own Chat Completions model (``wire.chat``) for a preset without a dialect of its own:
    OpenAI's, DeepSeek, xAI, Mistral, and local or compatible servers (``providers.local_chat``)."""
    from ketch.providers.local_chat import LOCAL_DIALECT_PRESETS, PROFILE
    from ketch.wire.chat import ChatCompletionsModel
    from ketch.wire.chat_profile import chat_profile, provider_name

    local = conn.preset.name in LOCAL_DIALECT_PRESETS
    overrides = {**PROFILE, **(profile or {})} if local else profile
    return ChatCompletionsModel(
        conn.model_name, base_url=conn.base_url, api_key=conn.api_key or _NO_KEY,
        provider_name=provider_name(conn.preset.name, conn.name),
        provider_profile=chat_profile(conn.preset.name, conn.model_name, official_openai=conn.preset.official_openai),
        profile=overrides or None, timeout=conn.timeout, max_retries=conn.max_retries, response_hooks=hooks,
        string_content=local,
    )


def model_settings(think: str, *, wire: str | None = None, model: Any = None, conn: Connection | None = None) -> ModelSettings:
    """Thinking level → the SDK's unified ``thinking`` setting, or the wire's own field for a model
    the SDK does not know to reason on a connection that declares ``reasoning`` (``thinking``)."""
    from ketch.providers.thinking import thinking_settings

    return thinking_settings(think, model, conn, wire)  # type: ignore[return-value]

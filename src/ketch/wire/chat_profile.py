"""The model profile of a Chat Completions connection, by preset, without a provider SDK.

pydantic-ai keeps these per-provider profiles on its provider classes, whose modules import the
``openai`` SDK; the same merges are made here from ``pydantic_ai.profiles`` alone, so the
profile (JSON schema transformer, thinking field, output-cap field, reasoning efforts) is the
one the SDK path used. ``system`` is the name the SDK's provider reported (pricing and replay
of provider-specific parts read it).
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.profiles import ModelProfile, merge_profile


def provider_name(preset: str, connection_name: str) -> str:
    """The provider name the SDK path gave a connection of ``preset`` (``openai-compatible`` takes
    the connection's own name)."""
    return connection_name if preset == "openai-compatible" else preset


def chat_profile(preset: str, model_name: str, *, official_openai: bool = False) -> ModelProfile:
    """The profile pydantic-ai's provider for ``preset`` gave ``model_name`` on Chat Completions."""
    if official_openai:
        return _openai(model_name)
    if preset == "deepseek":
        return _deepseek(model_name)
    if preset == "ollama":
        return _ollama(model_name)
    return _compatible(model_name)


def _openai(model_name: str) -> ModelProfile:
    from pydantic_ai.profiles._special_tokens import special_token_route_profile
    from pydantic_ai.profiles.openai import (
        _GPT_6_MODEL_PREFIXES,
        OpenAIJsonSchemaTransformer,
        OpenAIModelProfile,
        _OpenAIJsonSchemaTransformer,
        openai_model_profile,
    )

    profile = openai_model_profile(model_name)
    breakpoints = bool(profile.get("openai_supports_prompt_cache_breakpoints"))
    from datetime import timedelta

    return merge_profile(profile, OpenAIModelProfile(
        json_schema_transformer=OpenAIJsonSchemaTransformer if model_name.startswith("ft:") else _OpenAIJsonSchemaTransformer,
        tool_addition_mode="with_definitions",
        tool_deferral_mode="with_tool_search",
        default_cache_retention=timedelta(minutes=30) if breakpoints else None,
        supports_cache=breakpoints,
        supported_cache_retentions=("30m", "12h") if breakpoints else (),
        openai_responses_supports_prompt_cache_diagnostics=breakpoints,
        supports_audio_file_input="audio" in model_name,
        openai_responses_tool_choice_accepts_additional_tools=breakpoints,
        openai_responses_supports_max_reasoning_effort=breakpoints,
        openai_chat_supports_allowed_tools=True,
        supports_mid_conversation_effort=model_name.startswith(_GPT_6_MODEL_PREFIXES),
        openai_supports_batch_api=True,
    ), special_token_route_profile("openai", model_name))


def _compatible(model_name: str) -> ModelProfile:
    """``OpenAICompatibleProvider``'s profile: a ``vendor/model`` name's family, else OpenAI's defaults."""
    from pydantic_ai.profiles._family import vendor_family_model_profile
    from pydantic_ai.profiles._special_tokens import special_token_route_profile
    from pydantic_ai.profiles.amazon import amazon_model_profile
    from pydantic_ai.profiles.groq import groq_model_profile
    from pydantic_ai.profiles.mistral import mistral_model_profile
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer, OpenAIModelProfile, openai_model_profile

    def mistral(name: str) -> ModelProfile:
        profile = mistral_model_profile(name)
        return profile if name.startswith("magistral") else merge_profile(openai_model_profile(name), profile)

    overrides: dict[str, Any] = {"bedrock": amazon_model_profile, "groq": groq_model_profile,
                                 "mistral": mistral, "mistralai": mistral}
    profile = vendor_family_model_profile(model_name, overrides=overrides) or openai_model_profile(model_name)
    return merge_profile(OpenAIModelProfile(json_schema_transformer=OpenAIJsonSchemaTransformer), profile,
                         special_token_route_profile("openai-compatible", model_name))


def _deepseek(model_name: str) -> ModelProfile:
    from pydantic_ai.profiles.deepseek import deepseek_model_profile
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer, OpenAIModelProfile

    flash_or_v4 = model_name == "deepseek-flash" or model_name.startswith("deepseek-v4-")
    return merge_profile(
        OpenAIModelProfile(json_schema_transformer=OpenAIJsonSchemaTransformer),
        deepseek_model_profile(model_name),
        ModelProfile(supports_thinking=True) if model_name == "deepseek-flash" else None,
        OpenAIModelProfile(
            supports_json_object_output=True,
            openai_chat_thinking_field="reasoning_content",
            openai_chat_send_back_thinking_parts="field",
            openai_chat_thinking_requires_field_on_tool_calls=True,
            openai_responses_supports_interleaved_function_calls=False,
            supports_forced_tool_choice=model_name != "deepseek-reasoner",
            supports_forced_tool_choice_with_thinking=not flash_or_v4,
            thinking_enabled_by_default=flash_or_v4 or model_name == "deepseek-reasoner",
            openai_responses_supports_json_schema_output=True,
            openai_chat_supports_max_reasoning_effort=flash_or_v4,
            openai_chat_supports_max_completion_tokens=False,
        ),
    )


def _ollama(model_name: str) -> ModelProfile:
    from pydantic_ai.profiles._special_tokens import special_token_route_profile
    from pydantic_ai.profiles.cohere import cohere_model_profile
    from pydantic_ai.profiles.deepseek import deepseek_model_profile
    from pydantic_ai.profiles.google import google_model_profile
    from pydantic_ai.profiles.harmony import harmony_model_profile
    from pydantic_ai.profiles.meta import meta_model_profile
    from pydantic_ai.profiles.mistral import mistral_model_profile
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer, OpenAIModelProfile
    from pydantic_ai.profiles.qwen import qwen_model_profile
    from pydantic_ai.profiles.zai import _glm_5_3_schema_profile

    families = {"llama": meta_model_profile, "gemma": google_model_profile, "qwen": qwen_model_profile,
                "qwq": qwen_model_profile, "deepseek": deepseek_model_profile, "mistral": mistral_model_profile,
                "command": cohere_model_profile, "gpt-oss": harmony_model_profile, "glm": _glm_5_3_schema_profile}
    name = model_name.lower()
    profile = None
    for prefix, func in families.items():
        if name.startswith(prefix):
            profile = func(name)
    return merge_profile(
        OpenAIModelProfile(json_schema_transformer=OpenAIJsonSchemaTransformer),
        profile,
        OpenAIModelProfile(openai_chat_thinking_field="reasoning", openai_supports_strict_tool_definition=False,
                           supports_json_schema_output=True, supports_json_object_output=True),
        special_token_route_profile("ollama", model_name),
    )


__all__ = ["chat_profile", "provider_name"]

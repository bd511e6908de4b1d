"""The Chat Completions dialect of local and OpenAI-compatible servers.

Two rules of OpenAI's Chat API that its own servers relax and others do not:

- the output cap: OpenAI takes ``max_completion_tokens`` (and deprecates ``max_tokens``),
  while llama-cpp-python's server reads only ``max_tokens`` (its output is unbounded
  otherwise) and older vLLM, Ollama and LM Studio builds read ``max_tokens`` first. Every
  compatible server reads ``max_tokens``, so that is what a local or compatible connection sends;
- an assistant message that only calls tools: OpenAI accepts ``"content": null``;
  llama-cpp-python's server answers it with HTTP 500 (its message type wants a string), so such
  a message carries ``"content": ""`` instead, which every server accepts.

:func:`local_chat_model` builds the SDK's Chat model with both, for the presets listed in
:data:`LOCAL_DIALECT_PRESETS`; hosted providers keep the SDK's own body.
"""

from __future__ import annotations

from typing import Any

LOCAL_DIALECT_PRESETS = ("llamacpp", "ollama", "lmstudio", "openai-compatible")
"""Presets whose Chat requests use the compatible dialect."""

PROFILE = {"openai_chat_supports_max_completion_tokens": False}
"""Model-profile settings of the dialect: the SDK then sends its ``max_tokens`` as ``max_tokens``."""


def string_contents(messages: list[Any]) -> list[Any]:
    """``messages`` with every assistant ``content`` of None made ``""`` (in place; returned)."""
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant" and message.get("content", "") is None:
            message["content"] = ""
    return messages


_MODEL_CLASS: Any = None


def _model_class() -> Any:
    global _MODEL_CLASS
    if _MODEL_CLASS is None:
        from pydantic_ai.models.openai import OpenAIChatModel

        class CompatibleChatModel(OpenAIChatModel):
            """The SDK's Chat model; its assistant messages carry string content."""

            async def _map_messages(self, *args: Any, **kwargs: Any) -> Any:
                return string_contents(await super()._map_messages(*args, **kwargs))

        _MODEL_CLASS = CompatibleChatModel
    return _MODEL_CLASS


def local_chat_model(model_name: str, provider: Any, profile: dict[str, Any] | None = None) -> Any:
    """The SDK's ``OpenAIChatModel`` speaking the compatible dialect."""
    return _model_class()(model_name, provider=provider, profile={**PROFILE, **(profile or {})})


__all__ = ["LOCAL_DIALECT_PRESETS", "local_chat_model", "string_contents"]

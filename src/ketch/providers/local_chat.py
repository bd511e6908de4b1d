"""The Chat Completions dialect of local and OpenAI-compatible servers.

Two rules of OpenAI's Chat API that its own servers relax and others do not:

- the output cap: OpenAI takes ``max_completion_tokens`` (and deprecates ``max_tokens``),
  while llama-cpp-python's server reads only ``max_tokens`` (its output is unbounded
  otherwise) and older vLLM, Ollama and LM Studio builds read ``max_tokens`` first. Every
  compatible server reads ``max_tokens``, so that is what a local or compatible connection sends;
- an assistant message that only calls tools: OpenAI accepts ``"content": null``;
  llama-cpp-python's server answers it with HTTP 500 (its message type wants a string), so such
  a message carries ``"content": ""`` instead, which every server accepts.

``providers.models.chat_model`` builds ketch's own Chat model (``wire.chat``) with both for the
presets listed in :data:`LOCAL_DIALECT_PRESETS` (``string_content``, :data:`PROFILE`); hosted
providers keep OpenAI's body.
"""

from __future__ import annotations

LOCAL_DIALECT_PRESETS = ("llamacpp", "ollama", "lmstudio", "openai-compatible")
"""Presets whose Chat requests use the compatible dialect."""

PROFILE = {"openai_chat_supports_max_completion_tokens": False}
"""Model-profile settings of the dialect: the SDK then sends its ``max_tokens`` as ``max_tokens``."""


__all__ = ["LOCAL_DIALECT_PRESETS", "PROFILE"]

"""The prompt-cache fields each connection's requests carry, by what its provider documents.

Every request already extends the one before it byte for byte (``core.prefix_keeper``); these
settings tell the providers that take a marker where to cache and how to route:

- Anthropic (the ``anthropic`` preset): automatic caching (a top-level ``cache_control`` the
  server moves to the newest block) plus breakpoints after the tool definitions and after the
  system prompt (``anthropic_cache*`` settings of pydantic-ai), and the fourth at the end of the
  settled history (:func:`settled_cache_point`). Anthropic reads a cache entry only at a
  breakpoint or up to 20 blocks before one, so when a compaction placeholders older results the
  history up to the change would otherwise be prefilled again: the entry at the end of what the
  compaction had already rewritten is what the next one reads back.
- OpenAI (the ``openai`` preset, Chat and Responses): ``prompt_cache_key``, the session's cache
  key, so the requests of one conversation reach the machine holding its prefix; and pydantic-ai's
  unified ``cache`` setting, which ketch's wires turn into ``prompt_cache_options`` and a
  ``prompt_cache_breakpoint`` on each request message of the history (kept once placed, so the
  newest one always ends on a breakpoint; Chat also one after the static instructions) on the
  models that take them (GPT-5.6 on), and which the others ignore.
- OpenRouter: the unified ``cache`` setting (cache_control for its Anthropic and Gemini models;
  its other providers cache by themselves).
- Gemini, DeepSeek, Groq, xAI, Mistral, Z.AI and local or unknown servers: nothing is sent
  (their caching is implicit on a stable prefix, or their rules are unknown, and a strict
  server may refuse a field it does not know).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import CachePoint, ModelMessage, UserPromptPart

from ketch.context.rendering import compacted

CACHE_KEY_PREFIX = "ketch-"


def cache_settings(connection: Any, cache_key: str) -> dict[str, Any]:
    """The model settings that mark ``connection``'s requests for its provider's prompt cache."""
    if connection is None:
        return {}
    preset = getattr(getattr(connection, "preset", None), "name", "")
    wire = getattr(connection, "wire", "")
    if preset == "anthropic" and wire == "anthropic-messages":
        return {"anthropic_cache": True, "anthropic_cache_instructions": True, "anthropic_cache_tool_definitions": True}
    if preset == "openai" and wire in ("openai-chat", "openai-responses"):
        return {"openai_prompt_cache_key": CACHE_KEY_PREFIX + cache_key, "cache": True}
    if preset == "openrouter" and wire == "openai-chat":
        return {"cache": True}
    return {}


def settled_cache_point(messages: Sequence[ModelMessage]) -> list[ModelMessage] | None:
    """``messages`` with a cache breakpoint after the newest message a compaction rewrote (a copy
    of that message ending in a ``CachePoint``; the others shared), or None when there is none
    before the newest message (the automatic breakpoint then covers what there is). For one
    request only: the history keeps no marker, and a wire without breakpoints never sees one."""
    for index in range(len(messages) - 2, -1, -1):
        message = messages[index]
        if compacted(message):
            marked = dataclasses.replace(message, parts=[*message.parts, UserPromptPart([CachePoint()])])  # type: ignore[arg-type]
            return [*messages[:index], marked, *messages[index + 1 :]]
    return None


async def mark_settled_history(ctx: Any, request_context: Any) -> Any:
    """The ``prepare_model_request`` hook: on a model served with Anthropic's breakpoints (this
    connection's ``anthropic_cache`` setting, an Anthropic model serving this attempt), one more
    at the end of the settled history, for this attempt only (:func:`settled_cache_point`)."""
    settings = request_context.model_settings or {}
    if settings.get("anthropic_cache") and getattr(request_context.model, "system", None) == "anthropic":
        marked = settled_cache_point(request_context.messages)
        if marked is not None:
            request_context.messages = marked
    return request_context


def root_session(store: Any, session_id: str, *, hops: int = 64) -> str:
    """The session ``session_id`` was forked from, followed to its origin (itself when it was
    not forked): a fork starts with its parent's prefix, so it keeps its parent's cache key."""
    if store is None:
        return session_id
    seen = {session_id}
    current = session_id
    for _ in range(hops):
        try:
            row = store.get_session(current)
        except Exception:  # noqa: BLE001 - a key is a routing hint: the session's own id will do
            return current
        parent = getattr(row, "parent_id", None) if row is not None else None
        if not isinstance(parent, str) or not parent or parent in seen:
            return current
        seen.add(parent)
        current = parent
    return current


__all__ = ["cache_settings", "mark_settled_history", "root_session", "settled_cache_point"]

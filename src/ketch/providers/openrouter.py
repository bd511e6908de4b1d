"""OpenRouter connections on ketch's own Chat model in OpenRouter's dialect (``wire.chat_openrouter``).

A connection speaks OpenRouter when it is on the Chat Completions wire and either uses the
``openrouter`` preset or points at ``openrouter.ai``. Such a connection is built on
``OpenRouterChatModel``: its hosted search goes out as OpenRouter's ``openrouter:web_search``
server tool, and the ``url_citation`` annotations of an answer stay on its text part
(``provider_details["annotations"]``), where ``protocol.search_rows`` reads the source rows.

A model id with OpenRouter's ``:online`` variant (``openai/gpt-5:online``) means "search the
web": ketch takes the tag off the id it sends and routes search through the server tool
instead (``websearch.wiring``), so search is on the wire once, only on the session's own
requests, and never in privacy mode, in a child without the tool or in an auxiliary call.

No provider SDK is imported; the model's base URL and key are the ones the connection resolved,
so the key goes exactly where the (trust-checked) connection says.
"""

from __future__ import annotations

from typing import Any

from ketch.providers.base_url import host_of

OPENROUTER_HOST = "openrouter.ai"
ONLINE_TAG = "online"
"""OpenRouter's model variant that turns its web search on (``vendor/model:online``)."""


def speaks_openrouter(preset: str | None, wire: str | None, base_url: str | None) -> bool:
    """Whether a connection talks to OpenRouter's Chat Completions API."""
    if (wire or "openai-chat") != "openai-chat":
        return False
    host = host_of(base_url)
    return (preset or "").lower() == "openrouter" or host == OPENROUTER_HOST or host.endswith("." + OPENROUTER_HOST)


def is_online(model_name: str) -> bool:
    """Whether ``model_name`` carries the ``:online`` variant (``openai/gpt-5:online``, ``x:free:online``)."""
    return ONLINE_TAG in model_name.split(":")[1:]


def without_online(model_name: str) -> str:
    """``model_name`` with every ``:online`` tag taken off (other tags, such as ``:free``, stay)."""
    head, *tags = model_name.split(":")
    return ":".join([head, *(t for t in tags if t != ONLINE_TAG)])


def openrouter_model(conn: Any, hooks: list[Any], profile: dict[str, Any] | None = None) -> Any:
    """ketch's own OpenRouter model for ``conn``'s model (``:online`` taken off), URL, key and limits."""
    from ketch.wire.chat_openrouter import OpenRouterChatModel

    return OpenRouterChatModel(without_online(conn.model_name), base_url=conn.base_url, api_key=conn.api_key or "not-needed",
                               profile=profile, timeout=conn.timeout, max_retries=conn.max_retries,
                               response_hooks=hooks)


__all__ = ["ONLINE_TAG", "OPENROUTER_HOST", "is_online", "openrouter_model", "speaks_openrouter", "without_online"]

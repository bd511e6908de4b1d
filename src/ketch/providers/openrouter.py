"""OpenRouter connections on pydantic-ai's OpenRouter model (Chat Completions, OpenRouter's extensions).

A connection speaks OpenRouter when it is on the Chat Completions wire and either uses the
``openrouter`` preset or points at ``openrouter.ai``. Such a connection is built on
``OpenRouterModel``: its hosted search goes out as OpenRouter's ``openrouter:web_search``
server tool, and the ``url_citation`` annotations of an answer stay on its text part
(``openai_include_raw_annotations``), where ``websearch.normalize`` reads the source rows.

A model id with OpenRouter's ``:online`` variant (``openai/gpt-5:online``) means "search the
web": ketch takes the tag off the id it sends and routes search through the server tool
instead (``websearch.wiring``), so search is on the wire once, only on the session's own
requests, and never in privacy mode, in a child without the tool or in an auxiliary call.

Nothing here imports the SDK at import time; the client (base URL, key, hooks) is the one the
connection resolved, so the key goes exactly where the (trust-checked) connection says.
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


def openrouter_model(model_name: str, openai_client: Any, profile: dict[str, Any] | None = None) -> Any:
    """An ``OpenRouterModel`` for ``model_name`` (``:online`` taken off) over ``openai_client``."""
    from pydantic_ai.models.openrouter import OpenRouterModel
    from pydantic_ai.providers.openrouter import OpenRouterProvider

    extra: dict[str, Any] = {"profile": profile} if profile else {}
    return OpenRouterModel(
        without_online(model_name),
        provider=OpenRouterProvider(openai_client=openai_client),
        settings={"openai_include_raw_annotations": True},  # the sources stay on the text part
        **extra,
    )


__all__ = ["ONLINE_TAG", "OPENROUTER_HOST", "is_online", "openrouter_model", "speaks_openrouter", "without_online"]

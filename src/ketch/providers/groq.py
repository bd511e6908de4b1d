"""Groq connections: which ones are Groq's, which models are compound, and what ketch says about them.

A connection is Groq's with the ``groq`` preset or a base URL on ``api.groq.com``; it is built on
ketch's own Chat model in Groq's dialect (``wire.chat_groq``, no SDK), which posts to
``{host}/openai/v1/chat/completions`` as the ``groq`` SDK did (:func:`api_base_url`).

Groq's compound systems (``groq/compound``, ``groq/compound-mini``) search the web on their own
and take no user-provided function tools. Their ``executed_tools`` entries of type ``search``
become a provider-executed ``web_search`` call and its result (the ``search_results`` object as
Groq sent it), and only the answer text goes back on a later turn, which is what Groq's API
takes. ``wire.chat_groq.GroqChatModel``:

- sends no function tools and no ``tool_choice`` to a compound model, whatever the request holds;
- refuses, before anything is sent, a compound request that does not carry the hosted search
  (pydantic-ai's ``WebSearchTool``): privacy mode, a subagent without ``web_search`` and the
  auxiliary calls (titles, summaries, commit messages) never get one, so none of them can reach a
  model that searches unasked;
- keeps an ``executed_tools`` entry whose ``arguments`` are not JSON as
  ``{"unreadable_arguments": <text>}``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ketch.providers.base_url import host_of

if TYPE_CHECKING:
    from ketch.config.settings import Connection

PROVIDER = "groq"
HOSTS = frozenset({"api.groq.com"})
COMPOUND = re.compile(r"^(groq/)?compound(-beta)?(-mini)?$", re.IGNORECASE)
"""Groq's compound systems (and their older ``compound-beta`` names)."""
OTHER_MODEL = "groq:openai/gpt-oss-120b"
"""A Groq model without built-in search, named in refusals."""


def speaks_groq(preset: str, base_url: str | None) -> bool:
    """Whether a Chat Completions connection is Groq's own API (its preset, or its host)."""
    return preset == PROVIDER or host_of(base_url) in HOSTS


def is_compound(model_name: str) -> bool:
    return COMPOUND.match(model_name.strip()) is not None


def compound_connection(conn: Connection) -> bool:
    """Whether ``conn`` runs a Groq compound system (a model that searches on every request it likes)."""
    return conn.wire == "openai-chat" and speaks_groq(conn.preset.name, conn.base_url) and is_compound(conn.model_name)


AUXILIARY = ("this request may not search (privacy mode, a subagent without web_search, or a title, summary or "
             "commit message)")
"""Why a compound request without the hosted search is refused (``wire.chat_groq``)."""


def compound_refusal(model_name: str) -> str | None:
    """The refusal of a search-less request for ``model_name`` if it is a compound system, else None."""
    return refusal(model_name, AUXILIARY) if is_compound(model_name) else None


def refusal(model_name: str, why: str) -> str:
    """One line: this compound model may not be used here, why, and what to do instead."""
    return (f"{model_name} searches the web on its own (Groq compound) and {why}: use a Groq model without "
            f"built-in search for it (e.g. -m {OTHER_MODEL}), or allow web search")


def switch_refusal(ref: str) -> str:
    """One line for ``/model`` to a compound system: a running session has tools and its own search route."""
    return (f"{ref} is a Groq compound system: it takes no function tools and searches on its own, so a session "
            f"cannot switch to it; start one on it (ketch -m {ref}, with web search allowed)")


TOOLS_OFF = ("{model} takes no function tools (Groq compound): this session runs without ketch's tools "
             "(files, shell, subagents, MCP) and without generated titles; the model searches and answers")


def api_base_url(base_url: str | None) -> str:
    """Where Groq's Chat Completions live for ``base_url``: its host part (below) plus ``/openai/v1``,
    as the SDK posted them (a base URL given with or without that suffix reaches the same endpoint)."""
    return (sdk_base_url(base_url) or "https://api.groq.com") + "/openai/v1"


def sdk_base_url(base_url: str | None) -> str | None:
    """The host part of a Groq base URL: ``…/openai/v1`` taken off (the SDK appended it itself)."""
    if not base_url:
        return None
    trimmed = base_url.rstrip("/")
    for suffix in ("/openai/v1", "/openai"):
        if trimmed.endswith(suffix):
            return trimmed[: -len(suffix)]
    return trimmed

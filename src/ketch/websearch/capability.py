"""Hosted web search: which connection/model pairs support it, over which protocol, and who gets it.

Three decisions, kept apart:

1. *Capability* (``resolve_capability``): can this exact connection + model run a provider-hosted
   search inside its own model request? Explicit model metadata wins; otherwise one narrow rule
   from ``CAPABILITY_RULES`` (a single table, also rendered by ``ketch models --capabilities``).
   Speaking an OpenAI- or Anthropic-compatible wire is never enough on its own.
2. *Route* (``route_web_search``): for one agent surface, which search tool goes on the wire, if
   any. The user picks one source (the model's own search, or Tavily); there is no silent
   fallback from one to the other, and a failed hosted search is never retried over a
   different protocol. Privacy mode, auxiliary calls, headless runs without opt-in and a child
   agent's explicit tool list all remove search.
3. *Display* (``normalize_native_result``, in ``normalize``): the provider's opaque call/result parts stay in the
   history for native replay; the UI gets a normalized query and the source rows the provider
   actually returned (never synthesized).

The rows themselves (``CAPABILITY_RULES``, one per provider and protocol) live in ``matrix``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ketch.providers.base_url import host_of, path_of
from ketch.websearch.matrix import CAPABILITY_RULES, CapabilityRule, Protocol, bare_model
from ketch.protocol.search_rows import (
    SEARCH_TOOL_NAME,
    is_native_search,
    native_search_error,
    normalize_native_result,
)

if TYPE_CHECKING:
    from ketch.tools.base import ToolSpec

Surface = Literal["tui", "headless", "child", "auxiliary"]

OPT_IN_ENV = "KETCH_WEB_SEARCH_ENABLED"

_RESPONSES_WIRES = {"responses", "openai-responses"}
_ANTHROPIC_WIRES = {"anthropic", "anthropic-messages", "messages", "anthropic-compatible"}
_OPENROUTER_WIRES = {"openrouter"}
_GEMINI_WIRES = {"gemini", "google", "gemini-generate-content"}
_CHAT_WIRES = {"openai-chat", "chat", "chat-completions"}
CHAT_PROTOCOLS: frozenset[str] = frozenset({"zai-chat", "openrouter", "groq-compound"})
"""Hosted-search protocols that run on the Chat Completions wire itself (a provider's own tool there)."""
FROM_CHAT_PROTOCOLS: frozenset[str] = CHAT_PROTOCOLS | {"mistral-conversations"}
"""Hosted-search protocols a Chat Completions connection of that provider can use: its own tool on the
wire (Z.AI), or its session moved to the API that has the search (Mistral's Conversations)."""
_PROTOCOL_BY_SETTING: dict[str, Protocol] = {"responses": "openai-responses", "anthropic": "anthropic-messages"}


@dataclass(frozen=True)
class WebSearchSettings:
    """The user's web search choice (from config, env and flags)."""

    enabled: bool = True
    source: Literal["model", "tavily"] = "model"
    """``model``: the session model's own hosted search; ``tavily``: the Tavily client tool."""
    privacy: bool = False
    """Privacy mode: no search tool of any kind reaches any request."""
    protocol: Literal["auto", "responses", "anthropic"] = "auto"
    """Which hosted-search protocol a dual-wire provider (DeepSeek V4) uses when its connection
    does not already decide it."""
    max_uses: int | None = None
    """Searches per request; applied where the protocol can enforce it (Anthropic, OpenRouter)."""
    anthropic_dynamic_filtering: bool = False
    """Opt in to Anthropic's ``web_search_20260209`` (dynamic filtering) where the table marks the
    model as supporting it on the official API; ``web_search_20250305`` otherwise."""


@dataclass(frozen=True)
class Capability:
    """Whether one connection + model pair can run hosted search, and over which protocol."""

    supported: bool
    protocol: Protocol | None = None
    dynamic_filtering: bool = False
    """Anthropic only: use ``web_search_20260209`` instead of the ``20250305`` baseline."""
    reason: str = ""


def capability_table() -> list[dict[str, str]]:
    """``CAPABILITY_RULES`` as rows for ``ketch models --capabilities``."""
    return [
        {
            "provider": rule.provider,
            "models": rule.model_family or ("any" if rule.models == "." else rule.models),
            "protocols": ", ".join(rule.protocols) or "-",
            "state": _state(rule),
            "hosts": ", ".join(rule.hosts),
            "note": rule.note,
        }
        for rule in CAPABILITY_RULES
    ]


_BUILT_PROTOCOLS: frozenset[str] = frozenset({"openai-responses", "anthropic-messages", "gemini", "zai-chat",
                                              "openrouter", "mistral-conversations", "groq-compound"})
"""Protocols whose wire ketch can build a session on (``openrouter``: Chat Completions in
OpenRouter's dialect, ``wire.chat_openrouter``)."""


def _state(rule: CapabilityRule) -> str:
    if not rule.supported:
        return "no hosted search"
    if not set(rule.protocols) & _BUILT_PROTOCOLS:
        return "pending (ketch has no " + ", ".join(rule.protocols) + " wire)"
    if rule.dynamic_models:
        return "hosted search (+ dynamic filtering opt-in)"
    return "hosted search"


def _wire_protocol(wire: str | None) -> Protocol | None:
    """The hosted-search protocol a connection's wire already fixes, if any."""
    normalized = (wire or "").strip().lower()
    if normalized in _RESPONSES_WIRES:
        return "openai-responses"
    if normalized in _ANTHROPIC_WIRES:
        return "anthropic-messages"
    if normalized in _OPENROUTER_WIRES:
        return "openrouter"
    if normalized in _GEMINI_WIRES:
        return "gemini"
    return None


def _metadata_flags(metadata: Mapping[str, Any] | None) -> tuple[bool | None, bool, Protocol | None]:
    """(declared web search, dynamic filtering opt-in, declared api protocol) from model metadata."""
    meta = dict(metadata or {})
    caps = meta.get("capabilities") or {}
    declared = caps.get("web_search", caps.get("webSearch"))
    dynamic = bool(caps.get("web_search_dynamic_filtering", caps.get("webSearchDynamicFiltering", False)))
    api = meta.get("api_protocol", meta.get("apiProtocol"))
    protocol = _wire_protocol(api) if isinstance(api, str) else None
    return (declared if isinstance(declared, bool) else None), dynamic, protocol


def resolve_capability(
    connection_name: str,
    preset: str | None,
    wire: str | None,
    base_url: str | None,
    model_name: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    protocol: Literal["auto", "responses", "anthropic"] = "auto",
    dynamic_filtering: bool = False,
) -> Capability:
    """Decide hosted-search support for one connection and model.

    Order: explicit ``capabilities.web_search`` metadata; otherwise the first rule covering the
    connection (by base-URL host, or preset when there is no base URL) and the model. The
    protocol follows the connection's wire; a wire that fixes none (Chat Completions, unset) lets
    an explicit ``protocol`` choose among the rule's protocols, else the rule's first one.

    ``dynamic_filtering`` (``[web_search] anthropic_dynamic_filtering``) asks for Anthropic's
    ``web_search_20260209``; it is granted only on a row's official hosts for the models the row
    marks (``dynamic_models``), or on a metadata-declared connection that keeps the ``anthropic``
    preset. Anthropic-compatible services keep ``20250305`` unless their model metadata declares
    ``web_search_dynamic_filtering``.
    """
    declared, dynamic_opt_in, meta_protocol = _metadata_flags(metadata)
    wire_protocol = _wire_protocol(wire) or meta_protocol
    label = connection_name or preset or "this connection"
    if declared is False:
        return Capability(False, reason=f"model metadata for {model_name} turns hosted search off")
    if declared is True:
        if wire_protocol is None and (wire or "").strip().lower() in _CHAT_WIRES:
            wire_protocol = _chat_protocol_of(preset, model_name)  # a provider's own tool on Chat Completions (Z.AI, OpenRouter)
        if wire_protocol is None:
            return Capability(
                False, reason=f"{label} declares hosted search but speaks none of Responses, Anthropic Messages, "
                "Gemini or OpenRouter"
            )
        if wire_protocol == "gemini" and re.match(r"gemini-[12]\.", bare_model(model_name)):
            return Capability(False, reason=f"{model_name} cannot combine Google Search with function tools "
                              "(Gemini 3+ can)")
        dynamic = dynamic_opt_in or (dynamic_filtering and _preset_filters_dynamically(preset, model_name))
        return _capable(wire_protocol, dynamic, f"declared by model metadata ({wire_protocol})")

    host, preset_name, path = host_of(base_url), (preset or "").lower(), path_of(base_url)
    rule = next((r for r in CAPABILITY_RULES if r.covers_connection(preset_name, host, path)), None)
    if rule is None:
        return Capability(
            False,
            reason=f"no hosted search is known for {label}; set capabilities.web_search in the model "
            "metadata if the endpoint offers it",
        )
    if not rule.supported:
        return Capability(False, reason=f"{rule.provider}: {rule.note}")
    if not rule.covers_model(model_name):
        return Capability(False, reason=f"{model_name} is outside {rule.provider}'s hosted-search models "
                          f"({rule.model_family})")
    chosen, why_not = _choose_protocol(rule, wire, wire_protocol, protocol)
    if chosen is None:
        return Capability(False, reason=why_not)
    dynamic = dynamic_opt_in or (dynamic_filtering and rule.filters_dynamically(model_name))
    return _capable(chosen, dynamic, f"{rule.provider} {model_name} over {chosen}")


def _chat_protocol_of(preset: str | None, model_name: str) -> Protocol | None:
    """The Chat Completions search protocol of a preset's own row (``zai`` -> ``zai-chat``, ``mistral`` ->
    ``mistral-conversations``), if any; Groq's is the compound models' nature, never a tool metadata can
    add to another model."""
    name = (preset or "").lower()
    rule = next((r for r in CAPABILITY_RULES if name in r.presets and set(r.protocols) & FROM_CHAT_PROTOCOLS
                 and ("groq-compound" not in r.protocols or r.covers_model(model_name))), None)
    return rule.protocols[0] if rule is not None else None


def _preset_filters_dynamically(preset: str | None, model_name: str) -> bool:
    """A declared connection on a provider's own preset (say a gateway in front of the official
    Anthropic API) takes the dynamic-filtering tool for the models that provider's row marks;
    compatible services (another preset) never do without their own metadata."""
    name = (preset or "").lower()
    return any(name in r.presets and r.filters_dynamically(model_name) for r in CAPABILITY_RULES)


def _choose_protocol(
    rule: CapabilityRule, wire: str | None, wire_protocol: Protocol | None, setting: str
) -> tuple[Protocol | None, str]:
    """The rule's protocol for this connection, or None and a sentence saying why there is none."""
    wanted = _PROTOCOL_BY_SETTING.get(setting)
    if wire_protocol is not None:
        if wanted is not None and wanted != wire_protocol:
            return None, (f"web search protocol '{setting}' does not match the connection's wire "
                          f"({wire_protocol}); hosted search never switches protocol on its own")
        if wire_protocol not in rule.protocols:
            return None, f"{rule.provider} hosted search does not run over {wire_protocol}"
        return wire_protocol, ""
    if len(rule.protocols) > 1:  # a dual-wire provider on a connection that fixes neither
        if wanted is None:
            return rule.protocols[0], ""
        if wanted in rule.protocols:
            return wanted, ""
        return None, f"{rule.provider} has no {setting} hosted search"
    normalized = (wire or "").strip().lower()
    if normalized in {"", "auto"} or (rule.protocols[0] in FROM_CHAT_PROTOCOLS and normalized in _CHAT_WIRES):
        return rule.protocols[0], ""
    return None, f"{rule.provider} hosted search needs the {rule.protocols[0]} wire, not {wire}"


def _capable(protocol: Protocol, dynamic_opt_in: bool, reason: str) -> Capability:
    dynamic = dynamic_opt_in and protocol == "anthropic-messages"
    return Capability(True, protocol, dynamic, reason)


def model_profile_overrides(capability: Capability) -> dict[str, Any]:
    """Model-profile settings that pin the search tool version the capability chose.

    pydantic-ai picks Anthropic's ``web_search_20260209`` from its own model profile; ketch uses it
    only when metadata opts in, so the session's model should be built with these overrides.
    """
    if capability.protocol == "anthropic-messages":
        return {"anthropic_supports_dynamic_filtering": capability.dynamic_filtering}
    return {}


@dataclass(frozen=True)
class SearchRoute:
    """What one agent surface gets: a hosted tool, the Tavily tool, or nothing (never both)."""

    native_tool: Any = None
    """A pydantic-ai ``WebSearchTool`` for the session's own protocol, or None."""
    client_tool: ToolSpec | None = None
    """The client-executed Tavily ``web_search`` tool, or None."""
    reason: str = ""
    protocol: Protocol | None = None

    @property
    def has_search(self) -> bool:
        return self.native_tool is not None or self.client_tool is not None

    def capabilities(self) -> list[Any]:
        """The pydantic-ai capabilities that put the hosted tool on the wire (empty without one)."""
        if self.native_tool is None:
            return []
        from pydantic_ai.capabilities import NativeTool

        return [NativeTool(self.native_tool)]


def route_web_search(
    settings: WebSearchSettings,
    capability: Capability,
    *,
    surface: Surface,
    headless_opt_in: bool = False,
    child_tool_ceiling: set[str] | frozenset[str] | None = None,
    parent_surface: Literal["tui", "headless"] = "tui",
) -> SearchRoute:
    """Decide the search tool for one surface.

    ``headless_opt_in`` is ``KETCH_WEB_SEARCH_ENABLED=true`` or ``--web-search``. For a child agent
    an explicit ``child_tool_ceiling`` is a hard limit; without one the child follows its parent's
    surface (``parent_surface``).
    """
    if not settings.enabled:
        return SearchRoute(reason="web search is turned off")
    if settings.privacy:
        return SearchRoute(reason="privacy mode removes every search tool")
    if surface == "auxiliary":
        return SearchRoute(reason="auxiliary calls (titles, compaction, commit messages) never search")
    effective = parent_surface if surface == "child" else surface
    if effective == "headless" and not headless_opt_in:
        return SearchRoute(reason="headless runs search only with KETCH_WEB_SEARCH_ENABLED=true or --web-search")
    if surface == "child" and child_tool_ceiling is not None and SEARCH_TOOL_NAME not in child_tool_ceiling:
        return SearchRoute(reason=f"this agent's tool list does not include {SEARCH_TOOL_NAME}")
    if settings.source == "tavily":
        from ketch.tools.web_search import WEB_SEARCH_TOOL

        return SearchRoute(client_tool=WEB_SEARCH_TOOL, reason="Tavily search (client-executed)")
    if not capability.supported or capability.protocol is None:
        return SearchRoute(reason=f"no hosted search: {capability.reason}")
    return SearchRoute(
        native_tool=_native_tool(capability.protocol, settings),
        reason=f"hosted search over {capability.protocol}",
        protocol=capability.protocol,
    )


def _native_tool(protocol: Protocol, settings: WebSearchSettings) -> Any:
    from pydantic_ai.native_tools import WebSearchTool

    if settings.max_uses is not None and protocol in ("anthropic-messages", "openrouter"):
        return WebSearchTool(max_uses=settings.max_uses)
    return WebSearchTool()


def headless_opt_in(environ: Mapping[str, str], *, flag: bool = False) -> bool:
    """Whether a headless run may search: ``--web-search`` or ``KETCH_WEB_SEARCH_ENABLED=true``."""
    from ketch.config.env_values import env_bool

    return flag or env_bool(environ, OPT_IN_ENV) is True


def child_kinds_available(route: SearchRoute) -> bool:
    """Whether the ``web_research`` subagent kind may be offered on this route."""
    return route.has_search


def replay_size(part: Any) -> int:
    """Characters the part costs when replayed: its opaque payload, not the normalized display.

    Context budgeting should count this; a hosted search result is dropped whole with its turn,
    never trimmed down to the normalized rows while the payload stays behind.
    """
    import json

    payload = [getattr(part, name, None) for name in ("args", "content", "provider_details")]
    return len(json.dumps(payload, default=str))


__all__ = [
    "CAPABILITY_RULES", "SEARCH_TOOL_NAME", "Capability", "CapabilityRule", "SearchRoute", "WebSearchSettings", "capability_table",
    "child_kinds_available", "headless_opt_in", "is_native_search", "model_profile_overrides",
    "native_search_error", "normalize_native_result", "replay_size", "resolve_capability", "route_web_search",
]

"""Web search wiring: config + connection + surface -> the search a session (or child) gets.

``websearch.py`` holds the decisions (capability, route, normalization); this module applies
them to a running ketch: it reads the user's settings from ``Config`` and the command line,
computes the route once per session, turns provider-executed search parts in the stream into
``events.WebSearchResult``, and lets subagent code derive a child's route from the parent's.

Auxiliary calls (titles, compaction summaries, commit messages) get no search by construction:
the hosted tool is a capability of the session's ``Agent``, never of its model, so a bare
``Agent(session.model)`` sends no search tool (``auxiliary_route`` says so explicitly).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ketch.config.settings import Config, Connection
from ketch.protocol.events import WebSearchResult
from ketch.providers.openrouter import is_online, speaks_openrouter
from ketch.protocol.search_rows import annotated_search
from ketch.websearch.capability import (
    CHAT_PROTOCOLS,
    SEARCH_TOOL_NAME,
    Capability,
    SearchRoute,
    WebSearchSettings,
    child_kinds_available,
    headless_opt_in,
    is_native_search,
    model_profile_overrides,
    normalize_native_result,
    resolve_capability,
    route_web_search,
)

NATIVE_SEARCH_HINT = "search the web (run by the model provider); cite the sources you rely on"
"""The prompt's description of hosted search, listed only when the route sends it."""


@dataclass(frozen=True)
class SessionSearch:
    """The search decision for one session, kept so children can derive theirs."""

    settings: WebSearchSettings
    capability: Capability
    route: SearchRoute
    surface: Literal["tui", "headless"]
    opt_in: bool
    """Whether a headless run opted in (``--web-search`` or ``KETCH_WEB_SEARCH_ENABLED``)."""
    wire: str
    """The wire the session model must speak: the connection's, or Responses when hosted search
    runs there and the connection only fixed the preset's Chat Completions default."""
    notice: str = ""
    """One line for the session's start (an OpenRouter ``:online`` id that cannot search here)."""

    def prompt_entries(self) -> list[tuple[str, str]]:
        """Extra ``(name, description)`` tool lines for the prompt: hosted search, when routed."""
        return [(SEARCH_TOOL_NAME, NATIVE_SEARCH_HINT)] if self.route.native_tool is not None else []

    def model_profile(self) -> dict[str, Any] | None:
        """Profile overrides the session model needs so the tool version follows metadata."""
        if self.route.native_tool is None:
            return None
        return model_profile_overrides(self.capability) or None


@dataclass
class LiveSearch:
    """A session's current search decision, read per request: ``/model`` replaces it (``current``)
    with the new connection's, so the hosted tool on the wire and the prompt's line about it follow
    the model that is asked, never the one the session started with."""

    current: SessionSearch

    def native_tool(self, ctx: Any = None) -> Any:
        """The hosted search tool for this request, or None (a pydantic-ai native-tool factory)."""
        return self.current.route.native_tool

    def prompt_entries(self) -> list[tuple[str, str]]:
        return self.current.prompt_entries()

    def capabilities(self) -> list[Any]:
        """The hosted tool as a capability read per request where a later model may search (an
        interactive session, search on, from the model); otherwise the route's own, fixed for the
        session (a headless run never switches models)."""
        settings = self.current.settings
        if (self.current.route.client_tool is not None or self.current.surface != "tui"
                or not (settings.enabled and settings.source == "model")):
            return self.current.route.capabilities()
        from pydantic_ai.capabilities import NativeTool

        return [NativeTool(tool=self.native_tool)]


def search_settings(
    config: Config, *, flag: bool = False, tool_ceiling: Iterable[str] | None = None
) -> WebSearchSettings:
    """The user's choice from config (env already merged there) and ``--web-search``.

    ``[tools]`` enabled/disabled and an agent variant's explicit tool list (``tool_ceiling``)
    withhold search like any other tool."""
    ws = config.web_search
    tools = config.tools
    withheld = (
        SEARCH_TOOL_NAME in tools.disabled
        or (tools.enabled is not None and SEARCH_TOOL_NAME not in tools.enabled)
        or (tool_ceiling is not None and SEARCH_TOOL_NAME not in set(tool_ceiling))
    )
    return WebSearchSettings(
        enabled=(ws.enabled or flag) and not withheld,
        source=ws.source,
        privacy=config.privacy,
        protocol=ws.protocol,
        anthropic_dynamic_filtering=ws.anthropic_dynamic_filtering,
    )


def connection_capability(
    conn: Connection, protocol: Literal["auto", "responses", "anthropic"] = "auto", *, dynamic_filtering: bool = False
) -> Capability:
    """Hosted-search capability of the session's connection and model (metadata first).

    A wire that fixes a protocol is authoritative (a contradicting ``protocol`` setting means no
    hosted search, never a switch); ``protocol`` chooses only for Chat Completions connections.
    """
    metadata = {"capabilities": dict(conn.meta.capabilities)} if conn.meta is not None else None
    return resolve_capability(
        conn.name, conn.preset.name, conn.wire, conn.base_url, conn.model_name, metadata, protocol=protocol,
        dynamic_filtering=dynamic_filtering,
    )


def session_search(
    config: Config,
    conn: Connection,
    *,
    interactive: bool,
    flag: bool = False,
    environ: Mapping[str, str] | None = None,
    tool_ceiling: Iterable[str] | None = None,
) -> SessionSearch:
    """Route search for a root session: the TUI follows config, headless needs the opt-in.

    An OpenRouter model id with the ``:online`` variant is itself the opt-in (as ``--web-search``
    with the model as the source); privacy mode refuses it (``ConfigError``), and a tool list
    without ``web_search`` or a connection that cannot search runs it without search, with a notice."""
    online = speaks_openrouter(conn.preset.name, conn.wire, conn.base_url) and is_online(conn.model_name)
    if online and config.privacy:
        from ketch.protocol.exceptions import ConfigError

        raise ConfigError(
            f"model '{conn.ref}' asks OpenRouter to search the web (':online') but privacy mode is on; "
            f"drop ':online' from the model or leave privacy mode"
        )
    if online:
        flag = True  # the variant is the user's explicit opt-in, over [web_search] enabled
        config = config.model_copy(update={"web_search": config.web_search.model_copy(update={"source": "model"})})
    settings = search_settings(config, flag=flag, tool_ceiling=tool_ceiling)
    if settings.source == "model":
        capability = connection_capability(
            conn, settings.protocol, dynamic_filtering=settings.anthropic_dynamic_filtering
        )
    else:
        capability = Capability(False, reason="search source is tavily")
    surface: Literal["tui", "headless"] = "tui" if interactive else "headless"
    opt_in = headless_opt_in(os.environ if environ is None else environ, flag=flag)
    route = route_web_search(settings, capability, surface=surface, headless_opt_in=opt_in)
    wire, problem = _session_wire(conn.wire, route.protocol)
    if problem:
        route, capability = SearchRoute(reason=problem), Capability(False, reason=problem)
    _refuse_unasked_search(conn, route)
    notice = ""
    if online and route.native_tool is None:
        notice = f"':online' is not sent and {conn.ref} runs without web search: {route.reason}"
    return SessionSearch(settings, capability, route, surface, opt_in, wire, notice)


def _refuse_unasked_search(conn: Connection, route: SearchRoute) -> None:
    """A Groq compound model searches whenever it likes: a session that may not search cannot use it."""
    from ketch.providers.groq import compound_connection, refusal

    if compound_connection(conn) and route.protocol != "groq-compound":
        from ketch.protocol.exceptions import ConfigError

        raise ConfigError(refusal(conn.ref, f"this session may not search ({route.reason})"))


def _session_wire(conn_wire: str, protocol: str | None) -> tuple[str, str]:
    """(wire for the session model, reason hosted search cannot run on this connection or "")."""
    if protocol is None or _runs_on(protocol) == conn_wire:
        return conn_wire, ""
    if protocol in ("openai-responses", "mistral-conversations") and conn_wire == "openai-chat":
        return protocol, ""  # the primary request moves with the search; never the search alone
    return conn_wire, f"hosted search over {protocol} needs a connection on that wire, not {conn_wire}"


def _runs_on(protocol: str) -> str:
    """The connection wire a hosted-search protocol runs on: its own, or Chat Completions for a
    provider's own tool there (Z.AI's ``web_search``)."""
    return "openai-chat" if protocol in CHAT_PROTOCOLS else protocol


def child_search_route(
    parent: SessionSearch | None, child_tools: Iterable[str] | None, *, connection: Connection | None = None
) -> SearchRoute:
    """The search a subagent gets: its explicit tool list is a hard ceiling.

    ``child_tools`` None means the child inherits the parent's surface; a list without
    ``web_search`` removes search whatever the parent had. A child on its own ``connection``
    (another model) is judged on that pair, over exactly that connection's wire. Use
    ``route.capabilities()`` for the child's Agent and ``route.client_tool`` for its toolset.
    """
    if parent is None:
        return SearchRoute(reason="the parent session has no search")
    capability = parent.capability
    if connection is not None and parent.settings.source == "model":
        capability = connection_capability(
            connection, parent.settings.protocol, dynamic_filtering=parent.settings.anthropic_dynamic_filtering
        )
        if capability.protocol is not None and _runs_on(capability.protocol) != connection.wire:
            capability = Capability(False, reason=f"hosted search needs the {capability.protocol} wire")
    return route_web_search(
        parent.settings,
        capability,
        surface="child",
        headless_opt_in=parent.opt_in,
        child_tool_ceiling=set(child_tools) if child_tools is not None else None,
        parent_surface=parent.surface,
    )


def web_research_available(parent: SessionSearch | None) -> bool:
    """Whether the ``web_research`` subagent kind may be offered (search routed for a child)."""
    return child_kinds_available(child_search_route(parent, None))


def auxiliary_route(parent: SessionSearch | None = None) -> SearchRoute:
    """Titles, compaction summaries and commit messages: always the empty route."""
    settings = parent.settings if parent is not None else WebSearchSettings()
    capability = parent.capability if parent is not None else Capability(False)
    return route_web_search(settings, capability, surface="auxiliary")


def tavily_settings(config: Config) -> Any:
    """``TavilySettings`` for ``ToolDeps.extras['tavily']`` (key from ``TAVILY_API_KEY``)."""
    from ketch.tools.web_search import TavilySettings

    return TavilySettings(base_url=config.web_search.tavily_base_url)


@dataclass
class NativeSearchTracker:
    """Turns provider-executed search parts in the agent stream into ``WebSearchResult`` events.

    The call part is complete only at its ``PartEndEvent`` (its query arrives as deltas); the
    result part arrives whole in a ``PartStartEvent``. Each result is reported once. OpenRouter's
    search has no parts of its own: its sources end a text part (``normalize.annotated_search``).
    """

    _calls: dict[str, Any] = field(default_factory=dict)
    _reported: set[str] = field(default_factory=set)

    @staticmethod
    def starts_call(item: Any) -> bool:
        """A hosted search call begins: text streamed before it was thinking aloud, not the answer."""
        from pydantic_ai.messages import PartStartEvent

        part = getattr(item, "part", None)
        return isinstance(item, PartStartEvent) and is_native_search(part) and part.part_kind == "builtin-tool-call"

    def observe(self, item: Any) -> WebSearchResult | None:
        from pydantic_ai.messages import PartEndEvent, PartStartEvent

        if not isinstance(item, (PartStartEvent, PartEndEvent)):
            return None
        part = item.part
        if isinstance(item, PartEndEvent) and (annotated := annotated_search(part)) is not None:
            return WebSearchResult(**annotated)  # OpenRouter: the sources ride on the answer's text
        if not is_native_search(part):
            return None
        call_id = str(getattr(part, "tool_call_id", "") or "")
        if part.part_kind == "builtin-tool-call":
            if isinstance(item, PartEndEvent) or call_id not in self._calls:
                self._calls[call_id] = part
            return None
        if call_id in self._reported:
            return None
        self._reported.add(call_id)
        normalized = normalize_native_result(part, call=self._calls.pop(call_id, None))
        return WebSearchResult(**normalized)

"""The client-executed ``web_search`` tool, backed by the Tavily search API.

This tool is used only when the user picks ``source = tavily``: ``websearch.route_web_search``
hands out ``WEB_SEARCH_TOOL`` for the surfaces allowed to search, so it is deliberately not part
of ``frontends.builtin_tools.builtin_tool_specs``. The API key comes from ``TavilySettings.api_key`` (config) or
``TAVILY_API_KEY``; it is sent to Tavily and nowhere else, and never appears in a message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.config.keyring import TAVILY_KEY_ENV
from ketch.protocol.events import WebSearchResult
from ketch.tools.base import ToolDeps, ToolSpec

DEFAULT_BASE_URL = "https://api.tavily.com"
KEY_ENV = TAVILY_KEY_ENV
_SNIPPET_CHARS = 500
_MAX_RESULTS = 10


@dataclass(frozen=True)
class TavilySettings:
    """How to reach Tavily; put one in ``ToolDeps.extras['tavily']`` (defaults otherwise)."""

    api_key: str | None = field(default=None, repr=False)
    """The key from config; ``TAVILY_API_KEY`` is used when this is empty."""
    base_url: str = DEFAULT_BASE_URL
    """Tavily's API root (tests point it at a local server)."""
    max_results: int = 5
    timeout_s: float = 20.0

    def key(self) -> str:
        return self.api_key or os.environ.get(KEY_ENV, "")


def _settings(deps: ToolDeps) -> TavilySettings:
    configured = deps.extras.get("tavily")
    if isinstance(configured, TavilySettings):
        return configured
    if isinstance(configured, dict):
        return TavilySettings(**configured)
    return TavilySettings()


def _fail(message: str, key: str) -> ToolFailed:
    if key:
        message = message.replace(key, "***")
    return ToolFailed(message)


async def web_search(ctx: RunContext[ToolDeps], query: str, max_results: int | None = None) -> str:
    """Search the web and return the top results with their title, URL and a snippet.

    Args:
        query: What to search for, in plain words.
        max_results: How many results to return (1-10); the configured default when omitted.
    """
    settings = _settings(ctx.deps)
    key = settings.key()
    if not key:
        raise ToolFailed(f"web_search needs a Tavily API key: set {KEY_ENV} or the tavily key in the config")
    if not query.strip():
        raise ToolFailed("web_search needs a non-empty query")
    count = max(1, min(_MAX_RESULTS, max_results or settings.max_results))
    data = await _post_search(settings, key, query, count)
    sources = _sources(data)
    ctx.deps.emit(WebSearchResult(call_id=ctx.tool_call_id or "", query=query, sources=sources))
    return _render(query, sources)


async def _post_search(settings: TavilySettings, key: str, query: str, count: int) -> dict[str, Any]:
    from ketch.config.hostcheck import url_problem

    url = settings.base_url.rstrip("/") + "/search"
    problem = url_problem(url)
    if problem is not None:
        raise _fail(f"refused the search endpoint: {problem}", key)
    host = urlsplit(url).hostname or url
    body = {"api_key": key, "query": query, "max_results": count}
    try:
        async with httpx.AsyncClient(timeout=settings.timeout_s, follow_redirects=False) as client:
            response = await client.post(url, json=body, headers={"Authorization": f"Bearer {key}"})
    except httpx.TimeoutException as exc:
        raise _fail(f"Tavily did not answer within {settings.timeout_s:g} s", key) from exc
    except httpx.HTTPError as exc:
        raise _fail(f"could not reach Tavily at {host} ({type(exc).__name__})", key) from exc
    if response.status_code in (401, 403):
        raise _fail(f"Tavily rejected the API key (HTTP {response.status_code}); check {KEY_ENV}", key)
    if response.status_code == 429:
        raise _fail("Tavily rate limit reached (HTTP 429); try again later", key)
    if response.status_code >= 400:
        detail = _error_detail(response)
        raise _fail(f"Tavily search failed with HTTP {response.status_code}{detail}", key)
    try:
        data = response.json()
    except ValueError as exc:
        raise _fail("Tavily returned an answer that is not JSON", key) from exc
    if not isinstance(data, dict):
        raise _fail("Tavily returned an unexpected answer", key)
    return data


def _error_detail(response: httpx.Response) -> str:
    try:
        payload = response.json()
    except ValueError:
        return ""
    detail = payload.get("detail") or payload.get("error") if isinstance(payload, dict) else None
    if isinstance(detail, dict):
        detail = detail.get("error") or detail.get("message")
    return f": {str(detail)[:200]}" if detail else ""


def _sources(data: dict[str, Any]) -> list[dict[str, str]]:
    sources: list[dict[str, str]] = []
    for row in data.get("results") or []:
        if isinstance(row, dict) and isinstance(row.get("url"), str) and row["url"]:
            sources.append({
                "title": str(row.get("title") or ""),
                "url": row["url"],
                "snippet": str(row.get("content") or "")[:_SNIPPET_CHARS],
            })
    return sources


def _render(query: str, sources: list[dict[str, str]]) -> str:
    if not sources:
        return f"No web results for {query!r}."
    lines = [f"Web results for {query!r}:"]
    for n, source in enumerate(sources, 1):
        lines.append(f"{n}. {source['title'] or source['url']}")
        lines.append(f"   {source['url']}")
        if source["snippet"]:
            lines.append(f"   {' '.join(source['snippet'].split())}")
    return "\n".join(lines)


WEB_SEARCH_TOOL = ToolSpec(name="web_search", function=web_search, kind="network", key_arg="query")
TOOLS: list[ToolSpec] = [WEB_SEARCH_TOOL]
"""Exposed like every tool module, but registered only through ``websearch.route_web_search``."""

"""Hosted search parts in the history, as the UI and exports see them and as budgeting counts them.

The provider's opaque call/result parts stay in the history for native replay; the UI gets a
normalized query and the source rows the provider actually returned (never synthesized).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

SEARCH_TOOL_NAME = "web_search"
"""The one name search has on every surface, hosted or client-executed."""


def normalize_native_result(part: Any, *, call: Any = None) -> dict[str, Any]:
    """A hosted search call or result as ``{call_id, query, sources: [{title, url, snippet}]}``.

    ``part`` is a pydantic-ai ``NativeToolReturnPart`` (or ``NativeToolCallPart``); pass the
    matching call as ``call`` to recover the query for a result. Sources are exactly the rows the
    provider returned with a URL (Anthropic result blocks, Responses ``action.sources``), deduped
    in order; nothing is invented when the provider returned none. The dict's keys are the fields
    of ``events.WebSearchResult``.
    """
    call_part = call if call is not None else (part if _is_call(part) else None)
    query = _query_from_args(_args(call_part)) if call_part is not None else ""
    sources = [] if _is_call(part) else _sources(getattr(part, "content", None))
    return {"call_id": str(getattr(part, "tool_call_id", "") or ""), "query": query, "sources": sources}


def annotated_search(part: Any) -> dict[str, Any] | None:
    """A search OpenRouter ran for an answer, from the ``url_citation`` annotations on its text part.

    OpenRouter's web search (its ``openrouter:web_search`` server tool, or the ``:online``
    variant) returns no call or result parts: the sources arrive as annotations of the answer
    (``{"type": "url_citation", "url_citation": {url, title, content, ...}}``), which the model
    keeps in the text part's ``provider_details["annotations"]``. The query is not reported, so
    it stays empty; the call id is derived from the answer and its sources, so it is the same
    wherever the stored answer is read again.
    None when the part carries no such annotation."""
    if getattr(part, "part_kind", "") != "text":
        return None
    details = getattr(part, "provider_details", None) or {}
    annotations = details.get("annotations") if isinstance(details, dict) else None
    if not isinstance(annotations, list):
        return None
    rows = []
    for annotation in annotations:
        if isinstance(annotation, dict) and annotation.get("type") == "url_citation":
            cited = annotation.get("url_citation")
            if isinstance(cited, dict):
                rows.append({**cited, "snippet": cited.get("content") or ""})
    sources = _sources(rows)
    if not sources:
        return None
    basis = "\n".join([str(getattr(part, "content", "")), *(s["url"] for s in sources)])
    digest = hashlib.sha256(basis.encode()).hexdigest()[:16]
    return {"call_id": f"openrouter-{digest}", "query": "", "sources": sources}


def is_native_search(part: Any) -> bool:
    """Whether ``part`` is a provider-executed web search call or result."""
    return getattr(part, "part_kind", "") in ("builtin-tool-call", "builtin-tool-return") and (
        getattr(part, "tool_name", "") == SEARCH_TOOL_NAME
    )


def native_search_error(part: Any) -> str:
    """The provider's error code for a failed hosted search result, or ``""``."""
    content = getattr(part, "content", None)
    if isinstance(content, dict):
        if content.get("type") == "web_search_tool_result_error":
            return str(content.get("error_code") or "error")
        if content.get("status") in ("failed", "incomplete"):
            return str(content["status"])
    return ""


def _is_call(part: Any) -> bool:
    """A ``NativeToolCallPart`` (its ``part_kind`` kept the older 'builtin' spelling)."""
    return getattr(part, "part_kind", "") == "builtin-tool-call"


def _args(call_part: Any) -> dict[str, Any]:
    as_dict = getattr(call_part, "args_as_dict", None)
    if callable(as_dict):
        try:
            return dict(as_dict())
        except ValueError:
            return {}
    args = getattr(call_part, "args", None)
    return dict(args) if isinstance(args, dict) else {}


def _query_from_args(args: Mapping[str, Any]) -> str:
    if isinstance(args.get("query"), str) and args["query"]:
        return args["query"]
    queries = args.get("queries")
    if isinstance(queries, list) and queries:
        return "; ".join(str(q) for q in queries)
    if args.get("type") == "open_page" and args.get("url"):
        return f"open {args['url']}"
    if args.get("type") == "find" and args.get("pattern"):
        return f"find '{args['pattern']}' in {args.get('url', '')}".strip()
    return ""


def _sources(content: Any) -> list[dict[str, str]]:
    """Source rows from Anthropic (a list of result blocks), Responses (``{'sources': [...]}``),
    Gemini grounding (the SDK's list of ``groundingChunks[].web``: ``uri`` and ``title``), Z.AI's
    ``web_search`` rows (``link``, ``title``, ``content``) or Mistral's ``tool_reference`` chunks (``url``,
    ``title``, ``description``)."""
    if isinstance(content, dict):
        rows = content.get("sources") or content.get("results") or []
    elif isinstance(content, list):
        rows = content
    else:
        rows = []
    seen: set[str] = set()
    sources: list[dict[str, str]] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        url = next((row[k] for k in ("url", "uri", "link") if isinstance(row.get(k), str) and row[k]), None)
        if not isinstance(url, str) or not url or url in seen:
            continue
        seen.add(url)
        snippet = row.get("snippet") or row.get("content") or row.get("text") or row.get("description") or ""
        sources.append({
            "title": str(row.get("title") or ""),
            "url": url,
            "snippet": snippet if isinstance(snippet, str) else "",
        })
    return sources

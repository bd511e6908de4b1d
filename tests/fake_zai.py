"""Z.AI's Chat Completions dialect, as far as its chat ``web_search`` tool goes.

A request whose ``tools`` hold ``{"type": "web_search", "web_search": {"enable": true, ...}}``
searches on a turn with ``native_search``; with ``search_result: true`` the answer reports the rows
in a top-level ``web_search`` array (``title``, ``link``, ``content``, ``media``, ``icon``,
``refer``, ``publish_date``): in the completion, and in the first chunk of a stream. Without the
tool, or with ``enable`` false, nothing is searched and no such field is sent.
"""

from __future__ import annotations

from typing import Any


def search_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The request's Z.AI ``web_search`` tool object (its ``web_search`` settings), or None."""
    for tool in body.get('tools') or []:
        if isinstance(tool, dict) and tool.get('type') == 'web_search':
            return tool.get('web_search') if isinstance(tool.get('web_search'), dict) else {}
    return None


def web_search_rows(turn: Any, body: dict[str, Any]) -> list[dict[str, str]] | None:
    """The ``web_search`` array this turn reports, or None when nothing is searched or asked back."""
    tool = search_tool(body)
    if turn.native_search is None or tool is None or not tool.get('enable') or not tool.get('search_result'):
        return None
    return [
        {'title': s['title'], 'link': s['url'], 'content': s.get('snippet', ''), 'media': 'example',
         'icon': '', 'refer': f'ref_{n}', 'publish_date': '2026-11-30'}
        for n, s in enumerate(turn.native_search.sources, 1)
    ]

"""Fast paths for the Anthropic adapter's per-step scans for native tool use.

pydantic-ai's Anthropic adapter (2.68) makes walks per request that only native
(provider-run) tools can give a result other than "nothing": on a 1,000-step turn each is a few
per cent of a step's CPU, growing with the history.

- ``open_turn_has_code_execution(messages, provider_name)`` (twice a step: before the request
  and after the response) walks back through the open turn, which in one long turn is the whole
  history, for a code-execution call or a response naming a container. When the history holds no
  native tool part and no response with a ``container_id`` (``history_scans.holds_none`` with
  ``NATIVE``, remembered across steps) the answer is ``False`` without the walk.
- ``discovered_tool_names_in_order(messages)`` (once a step), which the adapter imported by name,
  is pointed at ``history_scans``' fast path for it.
- ``fetched_pages_from_history(messages)`` (once a step) walks every response for the pages a
  native web fetch returned, which a citation in the new answer may quote; with no native tool part
  in the history (``NATIVE`` again) there are none.
- ``drop_unpaired_native_tool_calls(anthropic_messages)`` drops ``server_tool_use`` /
  ``mcp_tool_use`` blocks without a result; with no such block it changes nothing. The fast path
  looks, in one loop, for such a block (or for anything the SDK's own pass would not take: a
  message whose content is not a list, a block that is not a dict) and runs the SDK's pass only
  when it finds one.

:func:`install` wraps these names where ``pydantic_ai.models.anthropic`` calls them, through
``history_scans.replace`` (so ``history_scans.uninstall`` puts them back), only while the history
scans are installed and the functions have their 2.68 signatures; ``KETCH_SDK_FASTPATHS=0`` turns
it off with the rest. ``tests/test_history_scans.py`` compares the answers with the SDK's on
histories with and without native parts; ``tests/test_step_cost_equivalence.py`` the request bodies.
"""

from __future__ import annotations

import inspect
from typing import Any

from ketch.providers import history_scans

_EXPECTED = {
    "open_turn_has_code_execution": ["messages", "provider_name"],
    "drop_unpaired_native_tool_calls": ["anthropic_messages"],
    "fetched_pages_from_history": ["messages"],
}

_NATIVE_USE = frozenset({"server_tool_use", "mcp_tool_use"})
"""The block types ``drop_unpaired_native_tool_calls`` may drop."""


def has_native_use(anthropic_messages: Any) -> bool:
    """Whether the SDK's pass could find anything to drop (or to refuse): a native tool-use block,
    a message whose content is not a list, or a block that is not a dict."""
    for message in anthropic_messages:
        content = message["content"] if type(message) is dict else None
        if type(content) is not list:
            return True
        for block in content:
            if type(block) is not dict or block.get("type") in _NATIVE_USE:
                return True
    return False


def install() -> bool:
    """Wrap the two scans in ``pydantic_ai.models.anthropic`` (once); False when not done."""
    if not history_scans.installed():
        return False
    import pydantic_ai.models.anthropic as adapter

    originals = {name: getattr(adapter, name, None) for name in _EXPECTED}
    for name, function in originals.items():
        if getattr(function, "__ketch_fast_path__", False):
            return True
        if function is None or list(inspect.signature(function).parameters) != _EXPECTED[name]:
            return False
    open_turn = originals["open_turn_has_code_execution"]
    drop_unpaired = originals["drop_unpaired_native_tool_calls"]
    fetched_pages = originals["fetched_pages_from_history"]

    def fast_open_turn(messages: Any, provider_name: str) -> bool:
        if history_scans.holds_none(messages, history_scans.NATIVE):
            return False
        return open_turn(messages, provider_name)

    def fast_drop_unpaired(anthropic_messages: Any) -> None:
        if has_native_use(anthropic_messages):
            drop_unpaired(anthropic_messages)

    def fast_fetched_pages(messages: Any) -> list[tuple[str, str]]:
        if history_scans.holds_none(messages, history_scans.NATIVE):
            return []
        return fetched_pages(messages)

    for replacement in (fast_open_turn, fast_drop_unpaired, fast_fetched_pages):
        replacement.__ketch_fast_path__ = True  # type: ignore[attr-defined]
    history_scans.replace(adapter, "open_turn_has_code_execution", fast_open_turn)
    history_scans.replace(adapter, "drop_unpaired_native_tool_calls", fast_drop_unpaired)
    history_scans.replace(adapter, "fetched_pages_from_history", fast_fetched_pages)
    # The adapter imported the tool-search window scan by name: it gets the history scans' fast path too.
    import pydantic_ai.toolsets._tool_search as tool_search

    scan = "discovered_tool_names_in_order"
    fast_scan, sdk_scan = getattr(tool_search, scan, None), history_scans.original(tool_search, scan)
    # Imported after the history scans were installed, the adapter bound the fast path itself.
    if sdk_scan is not None and getattr(adapter, scan, None) in (sdk_scan, fast_scan):
        history_scans.replace(adapter, scan, fast_scan, sdk=sdk_scan)
    return True


__all__ = ["has_native_use", "install"]

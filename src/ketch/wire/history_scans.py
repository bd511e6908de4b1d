"""Fast paths for pydantic-ai's scans of the whole history for state ketch's histories never hold.

Before every model request pydantic-ai (2.68) derives run state from the whole history, part
by part, with ``isinstance`` checks: where the latest compaction part is
(``messages._post_compaction_window_start``, about eleven times a step), which capabilities a
``load_capability`` exchange loaded and their instructions (``LoadedInstructionValues.of``,
four times; ``_parse_loaded_capabilities``), and which tools a tool search discovered
(``_discovered_tool_names_in_order``, six times, most of them through
``discovered_tool_names_in_order``, which first copies the window after the latest compaction
part), and where a compaction part cuts the history
before a request or a tool call (``_trim_messages_before_compaction``,
``_post_compaction_window_for_response``). On a 1,000-step turn (2,000 messages) that
is about 25 ms of CPU a step, growing with the history, for answers that are always empty:
ketch sends no compaction parts, loads no deferred capabilities and has no tool search. One pass
of ``Model.prepare_messages`` is of the same kind: ``_replace_unsupported_tool_return_files``
replaces files a tool returned that the model cannot read, and a plain text result holds none
(:data:`_FILES`); it then returns the history it was given.

Each of these scans reads parts of a few types only (:data:`_COMPACTION`, :data:`_LOADS`,
:data:`_DISCOVERY`, :data:`_FILES`). :func:`install` wraps them so that a history holding none of the types a
scan reads gets that scan's empty answer at once, and any other history the SDK's own function:
the answer is the same either way (``tests/test_history_scans.py`` compares them on histories
with and without such parts). What a history holds is remembered for the last few histories
(:class:`_Kinds`): their messages, each message's ``parts`` list and its length, held by strong
reference (so no ``id()`` is reused while remembered) and at most four histories. A history that
starts with a remembered one is classified only past it; a message whose ``parts`` list was
replaced or appended to, and a pruned or compacted history (new message objects), are classified
again. Not seen: a part swapped in place inside the same list at the same length. pydantic-ai
does that only in its realtime sessions, and ketch never does (pruning, compaction and repairs
build new messages and lists; ``strict_args`` replaces the list).

The same memo also notes native (provider-run) tool parts and responses naming a code-execution
container (:data:`NATIVE`); its reader, the SDK Anthropic adapter's scans, went with that adapter
(ketch's own Messages model needs none), so the bit is only classified. A response's
``provider_details`` is read when the message is first classified, and pydantic-ai sets it once.

Nothing is wrapped unless every function is still bound where 2.68 binds it and has the
signature it has there (:func:`install` returns False and the SDK runs as it is): an upgrade
that renames or reshapes one of them falls back to the unwrapped SDK. ``KETCH_SDK_FASTPATHS=0``
turns this off. The upstream fix would be the same kind of memo inside pydantic-ai (or the
derived state kept incrementally on the run), so a step does not re-walk unchanged history.
"""

from __future__ import annotations

import inspect
import operator
import os
from collections.abc import Callable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

_COMPACTION = 1
_LOADS = 2
_DISCOVERY = 4
NATIVE = 8
"""A native (provider-run) tool call or result, or a response that names a code-execution container
(no reader since the SDK's Anthropic adapter was replaced)."""
_FILES = 16
"""A tool result that may hold files: any but a plain ``ToolReturnPart`` of text content."""
_ALL = _COMPACTION | _LOADS | _DISCOVERY | NATIVE | _FILES

_installed: dict[tuple[Any, str], Any] = {}
"""(owner, attribute) → the SDK's original, for :func:`uninstall`."""

_memo: _Kinds | None = None
"""The installed scans' memo (:func:`holds_none`)."""


S = TypeVar("S")

_REMEMBERED = 4
"""Histories a :class:`PrefixMemo` remembers: the run's, the request's and the prepared one, and one more."""


class HistorySnapshot(NamedTuple):
    """A history as a memo remembers it: its messages, each one's ``parts`` list and that list's length."""

    messages: tuple[Any, ...]
    parts: tuple[Any, ...]
    lengths: tuple[int, ...]

    @classmethod
    def of(cls, messages: Sequence[Any]) -> HistorySnapshot | None:
        """The snapshot of ``messages``; None when a message has no ``parts`` list."""
        history = tuple(messages)
        try:
            parts = tuple(map(_parts_of, history))
            return cls(history, parts, tuple(map(len, parts)))
        except (AttributeError, TypeError):
            return None

    def starts(self, longer: HistorySnapshot) -> bool:
        """Whether ``longer`` begins with this history: the same message objects, ``parts`` lists
        and lengths (compared in C, by identity first)."""
        known = len(self.messages)
        return (known <= len(longer.messages) and longer.messages[:known] == self.messages
                and longer.parts[:known] == self.parts and longer.lengths[:known] == self.lengths)


class PrefixMemo(Generic[S]):
    """State derived from a history message by message, remembered for the last few histories.

    A history is remembered as its messages, each message's ``parts`` list and that list's
    length. A later history that starts with a remembered one (the same message objects,
    ``parts`` lists and lengths, compared in C, by identity first) has its state extended only by
    what follows that start: on a step, the newest request and response. Anything else (a pruned
    or compacted history, whose messages are new objects; a message whose parts were replaced or
    appended to) is derived again from the start. At most :data:`_REMEMBERED` histories are held,
    so the memo is bounded by a few histories' worth of references.

    ``extend(state, messages)`` is the state of a history that continues with ``messages``;
    ``empty`` the state of no history; ``unknown`` the answer for anything whose messages have no
    ``parts`` list (the fast paths then leave it to the SDK)."""

    def __init__(self, empty: S, extend: Callable[[S, Sequence[Any]], S], unknown: S) -> None:
        self._empty = empty
        self._extend = extend
        self._unknown = unknown
        self._seen: list[tuple[HistorySnapshot, S]] = []

    def of(self, messages: Sequence[Any]) -> S:
        snapshot = HistorySnapshot.of(messages)
        if snapshot is None:
            return self._unknown
        history = snapshot.messages
        for index, (seen, seen_state) in enumerate(self._seen):
            if seen.starts(snapshot):
                known = len(seen.messages)
                state = self._extend(seen_state, history[known:]) if known < len(history) else seen_state
                del self._seen[index]
                break
        else:
            state = self._extend(self._empty, history)
        self._seen.insert(0, (snapshot, state))
        del self._seen[_REMEMBERED:]
        return state

    def __len__(self) -> int:
        return len(self._seen)


class _Kinds(PrefixMemo[int]):
    """Which of the scanned part kinds a history holds (bits of :data:`_ALL`), remembered as
    :class:`PrefixMemo` remembers."""

    def __init__(self, classify: Callable[[Any], int]) -> None:
        def extend(kinds: int, messages: Sequence[Any]) -> int:
            for message in messages:
                kinds |= classify(message)
            return kinds

        super().__init__(0, extend, _ALL)

    def none_of(self, messages: Sequence[Any], kinds: int) -> bool:
        """Whether no message of ``messages`` holds a part of ``kinds``."""
        return not self.of(messages) & kinds


_parts_of = operator.attrgetter("parts")
"""Each message's ``parts`` (a C getter: called for every message of every scanned history)."""


def _classifier() -> Callable[[Any], int]:
    from pydantic_ai._deferred_capabilities import LoadCapabilityCallPart, LoadCapabilityReturnPart
    from pydantic_ai.messages import (
        CapabilityLoadDeltaPart,
        CompactionPart,
        InstructionBaselinePart,
        InstructionDeltaPart,
        ModelRequest,
        ModelResponse,
        NativeToolCallPart,
        NativeToolReturnPart,
        NativeToolSearchReturnPart,
        ToolAvailabilityDeltaPart,
        ToolReturnPart,
    )
    from pydantic_ai._tool_search import ToolSearchReturnPart
    from pydantic_ai.toolsets._tool_search import _SEARCH_TOOLS_NAME

    loads = (CapabilityLoadDeltaPart, LoadCapabilityCallPart, LoadCapabilityReturnPart, InstructionDeltaPart,
             InstructionBaselinePart)
    discovery = (ToolAvailabilityDeltaPart, ToolSearchReturnPart, NativeToolSearchReturnPart)

    def classify(message: Any) -> int:
        if not isinstance(message, (ModelRequest, ModelResponse)) or not isinstance(message.parts, list):
            return _ALL  # not a shape the fast paths know: the SDK's own scans decide
        kinds = 0
        details = getattr(message, "provider_details", None)
        if details is not None and (not isinstance(details, dict) or details.get("container_id")):
            kinds |= NATIVE
        for part in message.parts:
            if isinstance(part, (NativeToolCallPart, NativeToolReturnPart)):
                kinds |= NATIVE
            if isinstance(part, CompactionPart):
                kinds |= _COMPACTION
            elif isinstance(part, loads):
                kinds |= _LOADS
            elif isinstance(part, discovery) or (isinstance(part, ToolReturnPart) and part.tool_name == _SEARCH_TOOLS_NAME):
                kinds |= _DISCOVERY
            if isinstance(part, ToolReturnPart) and (type(part) is not ToolReturnPart or type(part.content) is not str):
                kinds |= _FILES
        return kinds

    return classify


def _targets() -> dict[str, Any]:
    import pydantic_ai._agent_graph as agent_graph
    import pydantic_ai._deferred_capabilities as deferred
    import pydantic_ai._instructions as instructions
    import pydantic_ai.messages as messages
    import pydantic_ai.models as models
    import pydantic_ai.toolsets._tool_search as tool_search

    return {
        "agent_graph": agent_graph,
        "deferred": deferred,
        "instructions": instructions,
        "messages": messages,
        "models": models,
        "tool_search": tool_search,
    }


_EXPECTED_PARAMETERS = {
    "_post_compaction_window_start": ["messages"],
    "_post_compaction_window_for_response": ["messages", "serving_response", "accepts"],
    "_trim_messages_before_compaction": ["messages", "accepts", "requires_encrypted_content", "standing_prompt_retained"],
    "_discovered_tool_names_in_order": ["messages"],
    "discovered_tool_names_in_order": ["messages"],
    "_parse_loaded_capabilities": ["messages"],
    "of": ["messages"],
    "_replace_unsupported_tool_return_files": ["messages", "profile"],
}
"""The parameters of each wrapped function in the SDK version the fast paths were written against."""


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def enabled() -> bool:
    """Whether ketch's fast paths around the SDK are on (``KETCH_SDK_FASTPATHS``, default on): these
    scans and ``lookalike_memo``."""
    return os.environ.get("KETCH_SDK_FASTPATHS", "1").strip() != "0"


def install(kinds: _Kinds | None = None) -> bool:
    """Wrap the SDK's history scans (once per process); False when the SDK does not have the
    shape they were written against, or ``KETCH_SDK_FASTPATHS=0``, and nothing was changed."""
    if _installed:
        return True
    if not enabled():
        return False
    try:
        mods = _targets()
        classify = _classifier()
    except (ImportError, AttributeError):
        return False
    window_start = getattr(mods["messages"], "_post_compaction_window_start", None)
    discovered = getattr(mods["tool_search"], "_discovered_tool_names_in_order", None)
    discovered_in_window = getattr(mods["tool_search"], "discovered_tool_names_in_order", None)
    parse_loads = getattr(mods["deferred"], "_parse_loaded_capabilities", None)
    values = getattr(mods["instructions"], "LoadedInstructionValues", None)
    of = getattr(values, "of", None)
    window_for_response = getattr(mods["messages"], "_post_compaction_window_for_response", None)
    trim = getattr(mods["models"], "_trim_messages_before_compaction", None)
    replace_files = getattr(mods["models"], "_replace_unsupported_tool_return_files", None)
    sites = {
        "_post_compaction_window_start": (window_start, [mods["messages"], mods["instructions"], mods["models"]]),
        "_post_compaction_window_for_response": (window_for_response, [mods["messages"]]),
        "_trim_messages_before_compaction": (trim, [mods["models"]]),
        "_replace_unsupported_tool_return_files": (replace_files, [mods["models"]]),
        "_discovered_tool_names_in_order": (discovered, [mods["tool_search"], mods["agent_graph"]]),
        "discovered_tool_names_in_order": (discovered_in_window, [mods["tool_search"]]),
        "_parse_loaded_capabilities": (parse_loads, [mods["deferred"], mods["agent_graph"]]),
    }
    for name, (sdk_function, owners) in sites.items():
        if sdk_function is None or any(getattr(owner, name, None) is not sdk_function for owner in owners):
            return False
        if _parameters(sdk_function) != _EXPECTED_PARAMETERS[name]:
            return False
    if of is None or _parameters(of) != _EXPECTED_PARAMETERS["of"] or not isinstance(values.__dict__.get("of"), classmethod):
        return False
    global _memo
    memo = _memo = kinds or _Kinds(classify)
    none_of = memo.none_of

    def fast_window_start(messages: Sequence[Any]) -> tuple[int, int]:
        return (0, 0) if none_of(messages, _COMPACTION) else window_start(messages)

    def fast_window_for_response(messages: Sequence[Any], serving_response: Any, accepts: Any = None) -> list[Any]:
        if none_of(messages, _COMPACTION) and any(message is serving_response for message in reversed(messages)):
            return list(messages)
        return window_for_response(messages, serving_response, accepts)

    def fast_trim(messages: list[Any], accepts: Any, **flags: Any) -> list[Any]:
        return messages if none_of(messages, _COMPACTION) else trim(messages, accepts, **flags)

    def fast_replace_files(messages: list[Any], profile: Any) -> list[Any]:
        return messages if none_of(messages, _FILES) else replace_files(messages, profile)

    def fast_discovered(messages: Sequence[Any]) -> tuple[str, ...]:
        return () if none_of(messages, _DISCOVERY) else discovered(messages)

    def fast_discovered_in_window(messages: Sequence[Any]) -> tuple[str, ...]:
        # The window after the latest compaction part, then the scan above: with no part of the
        # kinds the scan reads anywhere in the history, there are none in the window either, and
        # one look at the memo answers without copying the window.
        return () if none_of(messages, _DISCOVERY) else discovered_in_window(messages)

    def fast_parse_loads(messages: Sequence[Any]) -> set[str]:
        return set() if none_of(messages, _LOADS) else parse_loads(messages)

    original_of = values.__dict__["of"].__func__

    def fast_of(cls: Any, messages: Sequence[Any]) -> Any:
        return cls() if none_of(messages, _LOADS) else original_of(cls, messages)

    replacements = {
        "_post_compaction_window_start": fast_window_start,
        "_post_compaction_window_for_response": fast_window_for_response,
        "_trim_messages_before_compaction": fast_trim,
        "_replace_unsupported_tool_return_files": fast_replace_files,
        "_discovered_tool_names_in_order": fast_discovered,
        "discovered_tool_names_in_order": fast_discovered_in_window,
        "_parse_loaded_capabilities": fast_parse_loads,
    }
    for name, (sdk_function, owners) in sites.items():
        replacements[name].__ketch_fast_path__ = True  # type: ignore[attr-defined]
        for owner in owners:
            _installed[(owner, name)] = sdk_function
            setattr(owner, name, replacements[name])
    _installed[(values, "of")] = values.__dict__["of"]
    values.of = classmethod(fast_of)
    return True


def holds_none(messages: Sequence[Any], kinds: int) -> bool:
    """Whether no message of ``messages`` holds a part of ``kinds`` (False, so the SDK's own scan
    decides, while the fast paths are not installed)."""
    return _memo is not None and _memo.none_of(messages, kinds)


def replace(owner: Any, name: str, replacement: Any, *, sdk: Any = None) -> None:
    """Put ``replacement`` in place of ``owner.name`` until :func:`uninstall` (for the fast paths of
    one wire's adapter, installed when a model of that wire is built). ``sdk``: the SDK's function to
    put back, where ``owner`` bound a fast path already (a module imported after :func:`install`
    that imported a wrapped name)."""
    if (owner, name) not in _installed:
        _installed[(owner, name)] = sdk if sdk is not None else getattr(owner, name)
    setattr(owner, name, replacement)


def uninstall() -> None:
    """Put the SDK's own functions back (tests)."""
    global _memo
    for (owner, name), original in _installed.items():
        setattr(owner, name, original)
    _installed.clear()
    _memo = None


def original(owner: Any, name: str) -> Any:
    """The SDK's own ``owner.name`` where a fast path replaced it (None where none did)."""
    return _installed.get((owner, name))


def installed() -> bool:
    return bool(_installed)


__all__ = ["NATIVE", "HistorySnapshot", "PrefixMemo", "enabled", "holds_none", "install", "installed", "original", "replace", "uninstall"]

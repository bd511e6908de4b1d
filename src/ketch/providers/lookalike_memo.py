"""A mixin for pydantic-ai models: each request's lookalike-frame check is made once, not every step.

Before every request pydantic-ai's ``Model.prepare_messages`` looks through the text of every
request in the history for anything resembling one of its own frames (``<system``,
``<pyai:…``) and notes it (``_note_lookalike_frames``, one ``_request_with_lookalike_notes``
per request): on a 1,000-step turn about a tenth of a step's CPU, growing with the history,
for requests that did not change since the step before.

``_request_with_lookalike_notes(authored, request, first_request=…)`` reads only those two
requests, the flag, and the model's profile and class settings. :class:`LookalikeNotesMemo`
keeps what it returned and returns it again (a new list of the same parts) while both are the
same objects with the same parts (``tuple(parts)``, compared by identity first) and the flag is
the same. What is kept is what the last two ``_note_lookalike_frames`` calls used, so at most
two histories' worth. Inside ``second_model_prompt()`` the SDK does not call it at all.

:func:`usable` checks that the two private methods still have their pydantic-ai-slim 2.68
signatures. It is mixed into ``responses_memo.MemoizedResponsesModel`` and
``anthropic_memo.MemoizedAnthropicModel``, whose ``usable`` checks include this one, so
``build_model`` uses the SDK's own model class when it fails. ``KETCH_SDK_FASTPATHS=0`` turns it
off.
"""

from __future__ import annotations

import inspect
from contextvars import ContextVar
from typing import Any

from ketch.providers.history_scans import enabled

_EXPECTED = {
    "_note_lookalike_frames": ["self", "authored", "messages", "announce"],
    "_request_with_lookalike_notes": ["self", "authored", "request", "first_request"],
}

_USED: ContextVar[dict[tuple[int, int, bool], Any] | None] = ContextVar("ketch_lookalike_memo_used", default=None)


def has_methods(cls: type, expected: dict[str, list[str]]) -> bool:
    """Whether ``cls`` has each method named in ``expected`` with exactly those parameters (the
    guard every SDK fast path checks before it wraps a private method)."""
    for name, parameters in expected.items():
        method = getattr(cls, name, None)
        if method is None or list(inspect.signature(method).parameters) != parameters:
            return False
    return True


def usable(cls: type) -> bool:
    """Whether ``cls`` still has the private methods the memo wraps, with their 2.68 signatures."""
    return has_methods(cls, _EXPECTED)


class LookalikeNotesMemo:
    """Mixin for a pydantic-ai ``Model``: remembers ``_request_with_lookalike_notes`` per request."""

    _notes_now: dict[tuple[int, int, bool], Any]
    _notes_before: dict[tuple[int, int, bool], Any]

    def _note_lookalike_frames(self, authored: Any, messages: Any, *, announce: bool) -> Any:
        if not enabled():
            return super()._note_lookalike_frames(authored, messages, announce=announce)  # type: ignore[misc]
        used: dict[tuple[int, int, bool], Any] = {}
        token = _USED.set(used)
        try:
            result = super()._note_lookalike_frames(authored, messages, announce=announce)  # type: ignore[misc]
        finally:
            _USED.reset(token)
        self._notes_before = getattr(self, "_notes_now", {})
        self._notes_now = used
        return result

    def _request_with_lookalike_notes(self, authored: Any, request: Any, *, first_request: bool) -> Any:
        used = _USED.get()
        if used is None:
            return super()._request_with_lookalike_notes(authored, request, first_request=first_request)  # type: ignore[misc]
        key = (id(authored), id(request), first_request)
        entry = getattr(self, "_notes_now", {}).get(key) or getattr(self, "_notes_before", {}).get(key)
        if (
            entry is not None
            and entry[0] is authored
            and entry[1] is request
            and entry[2] == tuple(authored.parts)
            and entry[3] == tuple(request.parts)
        ):
            used[key] = entry
            return list(entry[4]), entry[5]
        parts, frame_at = super()._request_with_lookalike_notes(authored, request, first_request=first_request)  # type: ignore[misc]
        used[key] = (authored, request, tuple(authored.parts), tuple(request.parts), tuple(parts), frame_at)
        return list(parts), frame_at


__all__ = ["LookalikeNotesMemo", "usable"]

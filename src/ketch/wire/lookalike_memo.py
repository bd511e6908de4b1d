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

The loop around it still visited every request (about 5 µs each: the reply after it, the replies
before it, carried reasoning), so the memo also remembers the last history in which the pass noted
nothing: it returned the history itself and found no frame, as in a turn of tool calls whose
results hold no frame-like text. A later history that continues it (the same messages, ``parts``
lists and lengths, in both the stored and the translated list) gets the SDK's pass over its first
request and its end only (``_note_past_unnoted`` says why that is the same answer), and everything
before the end as it was. Once a request is noted, every step runs the whole pass again, with the
per-request memo. ``tests/test_lookalike_memo.py`` compares both with the SDK on generated histories.

:func:`usable` checks that the two private methods still have their pydantic-ai-slim 2.68
signatures. It is mixed into ``wire.responses.NotedResponsesModel``; when the check fails
``build_model`` uses the plain ``ResponsesModel``. ``KETCH_SDK_FASTPATHS=0`` turns it
off.
"""

from __future__ import annotations

import inspect
from contextvars import ContextVar
from typing import Any, NamedTuple

from ketch.wire.history_scans import HistorySnapshot, enabled

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


def _second_model_prompt() -> bool:
    from pydantic_ai._framing import in_second_model_prompt

    return in_second_model_prompt()


def _first_request(messages: tuple[Any, ...]) -> int | None:
    from pydantic_ai.messages import ModelRequest

    return next((i for i, message in enumerate(messages) if isinstance(message, ModelRequest)), None)


def usable(cls: type) -> bool:
    """Whether ``cls`` still has the private methods the memo wraps, with their 2.68 signatures
    (and the SDK still says where a second-model prompt is being made, which the memo asks)."""
    try:
        from pydantic_ai._framing import in_second_model_prompt  # noqa: F401
    except ImportError:
        return False
    return has_methods(cls, _EXPECTED)


class _Unnoted(NamedTuple):
    """A call of ``_note_lookalike_frames`` that noted nothing: it returned ``messages`` itself and
    found no frame."""

    authored: HistorySnapshot
    messages: HistorySnapshot
    announce: bool
    first_request: int
    """The index of the history's first request."""


class LookalikeNotesMemo:
    """Mixin for a pydantic-ai ``Model``: remembers ``_request_with_lookalike_notes`` per request,
    and looks only at the new end of a history that continues one in which nothing was noted."""

    _notes_now: dict[tuple[int, int, bool], Any]
    _notes_before: dict[tuple[int, int, bool], Any]
    _unnoted: _Unnoted | None = None

    def _note_lookalike_frames(self, authored: Any, messages: Any, *, announce: bool) -> Any:
        if not enabled() or _second_model_prompt():
            return super()._note_lookalike_frames(authored, messages, announce=announce)  # type: ignore[misc]
        authored_now = HistorySnapshot.of(authored)
        messages_now = authored_now if messages is authored else HistorySnapshot.of(messages)
        result = None
        if authored_now is not None and messages_now is not None:
            result = self._note_past_unnoted(authored_now, messages_now, messages, announce)
        if result is None:
            result = self._note_every_request(authored, messages, announce)
        noted, has_frame = result
        self._unnoted = None
        if noted is messages and not has_frame and authored_now is not None and messages_now is not None \
                and len(authored_now.messages) == len(messages_now.messages):
            first = _first_request(messages_now.messages)
            if first is not None:
                self._unnoted = _Unnoted(authored_now, messages_now, announce, first)
        return result

    def _note_past_unnoted(self, authored: HistorySnapshot, messages: HistorySnapshot, given: Any, announce: bool) -> Any:
        """What the SDK's pass returns for a history continuing the last one in which it noted
        nothing, from a pass over its first request and its end only; None where that cannot be had.

        A request's notes depend on the request, the message after it, the replies since the request
        before it, whether it is the first request and whether a frame came before it. In the
        remembered history no request had a frame or a note, so every request whose next message is
        in it (all but possibly its last message) comes out as it was. The pass therefore runs over
        the first request followed by everything after the last of those requests (``keep``): each
        request there sees the same next message and the same replies since the request before it
        as in the whole history, the first request is still the first, and no frame comes before
        the end. The first request's own result there is as it was (its reply then is ``keep``'s,
        which carried no reasoning the first request would be noted for, or ``keep`` would have had
        a frame)."""
        seen = self._unnoted
        if seen is None or seen.announce != announce or len(authored.messages) != len(messages.messages):
            return None
        if not (seen.messages.starts(messages) and seen.authored.starts(authored)):
            return None
        from pydantic_ai.messages import ModelRequest

        history = messages.messages
        first = seen.first_request
        keep = next((i for i in range(len(seen.messages.messages) - 2, first - 1, -1) if isinstance(history[i], ModelRequest)), None)
        if keep is None:
            return None
        sub_messages = [history[first], *history[keep + 1:]]
        sub_authored = [authored.messages[first], *authored.messages[keep + 1:]]
        noted, has_frame = self._note_every_request(sub_authored, sub_messages, announce)
        if noted is sub_messages:
            return given, has_frame
        if noted[0] is not sub_messages[0] or len(noted) != len(sub_messages):
            return None  # not what the reasoning above expects: the whole pass decides
        return [*history[: keep + 1], *noted[1:]], has_frame

    def _note_every_request(self, authored: Any, messages: Any, announce: bool) -> Any:
        """The SDK's pass, each request's notes remembered for the next step."""
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

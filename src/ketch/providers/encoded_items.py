"""A request body's JSON, with the history's items encoded once instead of every step.

Every request of a turn sends the whole history again: on a 1,000-step turn about 1.6 MB of
JSON (the Responses ``input`` items, the Anthropic ``messages``), almost all of it the same as
the request before. Serializing it was about 9 ms of a step, growing with the history; most of
that is escaping the text of tool results that did not change.

:class:`ItemEncodings` keeps, for each position of the list the last request sent, the item's
JSON text and a structural copy of the item (new dicts and lists, the same leaves). The next
request reuses the text of an item at the same position when the item is a ``dict`` that equals
that copy (compared in C, leaf by leaf, by identity first) and each of its numbers and booleans
is still of the type it had (``1``, ``1.0`` and ``True`` are equal but are written differently).
Any other item is encoded afresh. An item holding anything but dicts (with string keys), lists,
strings, numbers, booleans and ``None`` is always encoded afresh (and the encoder given, which
takes plain JSON only, refuses what is not JSON).

:func:`encode_body` writes the body with the list replaced by a marker string, then puts the
list's text in the marker's place: the bytes are those of encoding the body whole with the same
encoder (same key order, separators and escaping). A body where the marker's text occurs other
than once is encoded whole.

Used by ``anthropic_body.OnceEncodedAnthropic`` (``messages``) and
``passthrough.PassthroughOpenAI`` (Responses ``input``); ``tests/test_encoded_items.py``
compares the bytes with a whole encoding over generated request sequences whose items change in
place between requests; ``tests/test_step_cost_equivalence.py`` the bodies of whole sessions.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, NamedTuple

_LEAVES = (str, type(None))
_NUMBERS = (bool, int, float)

_MARKER = f"\x00ketch-items-{uuid.uuid4().hex}"
"""Stands in for the list while the rest of the body is encoded (a string no request holds)."""


class _Entry(NamedTuple):
    copy: Any
    """The item as it was encoded: new dicts and lists, the same leaves."""
    numbers: tuple[tuple[tuple[Any, ...], type], ...]
    """Where the item held a number or boolean (the keys and indexes down to it), and its type."""
    text: str


def _copy(value: Any, path: tuple[Any, ...], numbers: list[tuple[tuple[Any, ...], type]]) -> Any:
    """A structural copy of plain JSON data, noting numbers' paths; raises TypeError otherwise."""
    kind = type(value)
    if kind is dict:
        if any(type(key) is not str for key in value):
            raise TypeError("a key that is not a string")  # 1 and True are the same key, written differently
        return {key: _copy(item, (*path, key), numbers) for key, item in value.items()}
    if kind is list:
        return [_copy(item, (*path, index), numbers) for index, item in enumerate(value)]
    if kind in _NUMBERS:
        numbers.append((path, kind))
        return value
    if kind in _LEAVES:
        return value
    raise TypeError(f"not plain JSON: {kind.__name__}")


def _numbers_hold(item: Any, numbers: tuple[tuple[tuple[Any, ...], type], ...]) -> bool:
    for path, kind in numbers:
        value = item
        for step in path:
            value = value[step]
        if type(value) is not kind:
            return False
    return True


class ItemEncodings:
    """The JSON text of each item of the last list encoded, by position."""

    def __init__(self, encoder: json.JSONEncoder) -> None:
        self._encoder = encoder
        self._entries: list[_Entry | None] = []

    def encode(self, items: list[Any]) -> str:
        """``items`` as JSON text, as the encoder writes the list (raises what it raises)."""
        encode = self._encoder.encode
        before = self._entries
        entries: list[_Entry | None] = []
        texts: list[str] = []
        try:
            for index, item in enumerate(items):
                entry = before[index] if index < len(before) else None
                if entry is not None and type(item) is dict and item == entry.copy and _numbers_hold(item, entry.numbers):
                    text = entry.text
                else:
                    text = encode(item)
                    entry = _remembered(item, text)
                entries.append(entry)
                texts.append(text)
        except BaseException:
            self._entries = []
            raise
        self._entries = entries
        return "[" + ",".join(texts) + "]"


def _remembered(item: Any, text: str) -> _Entry | None:
    if type(item) is not dict:
        return None
    numbers: list[tuple[tuple[Any, ...], type]] = []
    try:
        copy = _copy(item, (), numbers)
    except (TypeError, RecursionError):
        return None
    return _Entry(copy, tuple(numbers), text)


def merged_body(json_data: Any, extra_json: Any, omitted: tuple[type, ...]) -> dict[str, Any] | None:
    """The JSON body a provider SDK builds of a request's ``json_data`` and ``extra_json`` (merged,
    ``extra_json`` winning, values of the ``omitted`` types dropped), when both are plain dicts; None
    otherwise (the SDK then builds it as it does)."""
    if type(json_data) is not dict or (extra_json is not None and type(extra_json) is not dict):
        return None
    merged = {**json_data, **extra_json} if extra_json else json_data
    return {key: value for key, value in merged.items() if not isinstance(value, omitted)}


def encoded_body(encoder: json.JSONEncoder, body: dict[str, Any], key: str, items: ItemEncodings) -> bytes | None:
    """:func:`encode_body` as UTF-8 bytes, or None where the encoder refuses the body (data that is
    not plain JSON, a NaN, a cycle): the SDK's own path then decides."""
    try:
        return encode_body(encoder, body, key, items).encode()
    except (TypeError, ValueError, RecursionError):
        return None


def encode_body(encoder: json.JSONEncoder, body: dict[str, Any], key: str, items: ItemEncodings) -> str:
    """``body`` as ``encoder`` writes it, with the list at ``key`` from ``items`` (raises what the
    encoder raises for data it refuses)."""
    value = body.get(key)
    if type(value) is not list:
        return encoder.encode(body)
    rest = encoder.encode({**body, key: _MARKER})
    marker = encoder.encode(_MARKER)
    if rest.count(marker) != 1:
        return encoder.encode(body)
    return rest.replace(marker, items.encode(value), 1)


__all__ = ["ItemEncodings", "encode_body", "encoded_body", "merged_body"]

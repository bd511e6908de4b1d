"""``providers/encoded_items.py`` writes a body exactly as encoding it whole does.

A sequence of requests is generated as a turn makes them: each sends the items of the one before
(the same objects) and some new ones. Between requests, items already sent are changed in place
in the ways that keep them equal but change their JSON (``1`` to ``True`` or ``1.0``, ``0`` to
``False``), and in the ways that do not keep them equal (a key added or dropped, a string or a
nested list changed); some are replaced by equal copies, the list is cut short (pruning) or gets
a value the encoder refuses. Every request's text must be the whole encoding's, or both must
refuse it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ketch.providers import encoded_items
from ketch.providers.encoded_items import ItemEncodings, encode_body

ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)

_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False),
                  st.text(max_size=12))
_json = st.recursive(_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                    st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                     max_leaves=8)
_item = st.dictionaries(st.sampled_from(["type", "call_id", "output", "content", "is_error", "n"]), _json, min_size=1, max_size=4)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if type(value) is dict:
        for key, inner in value.items():
            found += _paths(inner, (*path, key))
    elif type(value) is list:
        for index, inner in enumerate(value):
            found += _paths(inner, (*path, index))
    return found


def _change(item: dict[str, Any], how: int, where: int) -> None:
    """Change ``item`` in place."""
    paths = [p for p in _paths(item) if p]
    if not paths:
        return
    path = paths[where % len(paths)]
    parent = item
    for step in path[:-1]:
        parent = parent[step]
    old = parent[path[-1]]
    if how == 0:  # equal, written differently
        swaps = {int: lambda v: float(v), float: lambda v: int(v) if v == int(v) else v, bool: lambda v: int(v)}
        if type(old) in swaps:
            parent[path[-1]] = swaps[type(old)](old)
        elif type(old) is int and old in (0, 1):
            parent[path[-1]] = bool(old)
    elif how == 1:
        parent[path[-1]] = "changed"
    elif how == 2 and type(parent) is dict:
        parent["added"] = 1
    elif how == 3 and type(parent) is dict:
        del parent[path[-1]]
    elif how == 4 and type(old) is list:
        old.append("more")
    elif how == 5:
        parent[path[-1]] = copy.deepcopy(old)  # equal copy


def _same(body: dict[str, Any], memo: ItemEncodings) -> None:
    try:
        whole: Any = ENCODER.encode(body)
    except (TypeError, ValueError) as error:
        whole = type(error)
    try:
        pieced: Any = encode_body(ENCODER, body, "input", memo)
    except (TypeError, ValueError) as error:
        pieced = type(error)
    assert pieced == whole


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.lists(_item, max_size=6),
       steps=st.lists(st.tuples(st.lists(_item, max_size=3), st.lists(st.tuples(st.integers(0, 5), st.integers(0, 30), st.integers(0, 30)), max_size=3),
                                st.integers(0, 9)), max_size=6))
def test_every_request_is_written_as_a_whole_encoding_writes_it(first: list[dict[str, Any]], steps: list[Any]) -> None:
    memo = ItemEncodings(ENCODER)
    items = list(first)
    _same({"model": "m", "input": items, "stream": True}, memo)
    for new, changes, event in steps:
        for how, which, where in changes:
            if items:
                _change(items[which % len(items)], how, where)
        if event == 0 and items:
            items = items[: len(items) // 2]  # pruned
        elif event == 1 and items:
            items[0] = copy.deepcopy(items[0])  # a new, equal object
        elif event == 2:
            items.append({"type": "odd", "value": (1, 2)})  # a tuple: written as a list, never remembered
        elif event == 3:
            items.append({"type": "bad", "value": object()})  # refused by the encoder
        elif event == 4:
            items.append({"type": "nan", "value": float("nan")})  # refused by the encoder
        elif event == 5:
            items.append({1: "int key"})  # written as "1", never remembered
        items = [*items, *new]
        _same({"model": "m", "input": items, "tools": [{"type": "function"}], "stream": True}, memo)
        if event in (3, 4):
            items = items[:-1 - len(new)] + new  # the refused item goes; the next request is fine again


def test_unchanged_items_are_not_encoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    memo = ItemEncodings(ENCODER)
    items = [{"type": "function_call_output", "call_id": f"c{i}", "output": "x" * 100, "ok": True} for i in range(50)]
    encode_body(ENCODER, {"input": items}, "input", memo)
    encoded: list[Any] = []
    real = ENCODER.encode
    monkeypatch.setattr(ENCODER, "encode", lambda value: encoded.append(value) or real(value))
    items.append({"type": "message", "content": "new"})
    items[3]["ok"] = 1  # equal, but written "1", not "true"
    items[7]["output"] = "y"
    text = encode_body(ENCODER, {"input": items}, "input", memo)
    assert text == real({"input": items})
    assert [e for e in encoded if isinstance(e, dict) and "input" not in e] == [items[3], items[7], items[50]]


def test_a_body_holding_the_marker_text_is_encoded_whole() -> None:
    memo = ItemEncodings(ENCODER)
    body = {"input": [{"a": "b"}], "instructions": encoded_items._MARKER}
    assert encode_body(ENCODER, body, "input", memo) == ENCODER.encode(body)
    assert encode_body(ENCODER, {"input": "not a list"}, "input", memo) == ENCODER.encode({"input": "not a list"})


def test_keys_that_are_equal_but_written_differently_are_not_mixed_up() -> None:
    memo = ItemEncodings(ENCODER)
    item: dict[Any, Any] = {1: "x", "inner": {0: "y"}}
    items = [item]
    assert encode_body(ENCODER, {"input": items}, "input", memo) == ENCODER.encode({"input": items})
    del item[1]
    item[True] = "x"  # the same key to a dict, written "true" instead of "1"
    item["inner"] = {False: "y"}
    assert encode_body(ENCODER, {"input": items}, "input", memo) == ENCODER.encode({"input": items})

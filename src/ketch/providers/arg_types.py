"""Tool-call arguments checked against the JSON schema the model was shown, by type, strictly.

pydantic validates a tool's arguments in lax mode: ``"background": "true"`` becomes ``True`` and
``"timeout": "30"`` becomes ``30.0``. A model's arguments are untrusted input, and a value of the
wrong type is an error, so before pydantic sees them every value is checked against the schema
the model was given (the one oracle both sides read): ``type`` (``integer`` takes a number with no
fraction, never a boolean; ``number`` never a boolean or a string), ``enum``, ``const``,
``anyOf``/``oneOf``, local ``$ref``, ``properties``, ``items``, ``required`` and
``additionalProperties: false``. Keywords it does not know never widen or narrow anything: the
tool's own validation still runs after this one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_MAX_DEPTH = 64


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


_ARTICLE = {"integer": "an integer", "array": "an array", "object": "an object", "null": "null",
            "boolean": "a boolean (true or false)", "number": "a number", "string": "a string"}


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False) if _kind(value) in _ARTICLE else repr(value)
    except ValueError:
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _type_matches(expected: str, value: Any) -> bool:
    kind = _kind(value)
    if expected == "number":
        return kind in ("integer", "number")
    if expected == "integer":
        return kind == "integer" or (kind == "number" and float(value).is_integer())
    return kind == expected


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    if not ref.startswith("#/"):
        return None  # a remote reference: not ours to follow; the tool's own validation decides
    node: Any = root
    for key in ref[2:].split("/"):
        key = key.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node if isinstance(node, Mapping) else None


def mismatch(value: Any, schema: Any, root: Any = None, where: str = "", depth: int = 0) -> str | None:
    """Why ``value`` does not fit ``schema`` (one sentence naming the argument), or None."""
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return None
    root = schema if root is None else root
    resolved = _resolve(schema, root)
    if resolved is None:
        return None
    schema = resolved
    name = f"`{where}`" if where else "the arguments"
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            reasons = [mismatch(value, branch, root, where, depth + 1) for branch in branches]
            if all(reasons):
                kinds = [_resolve(b, root) for b in branches if isinstance(b, Mapping)]
                types = [k.get("type") for k in kinds if k is not None]
                if len(types) == len(branches) and all(isinstance(t, str) for t in types):
                    wanted = " or ".join(_ARTICLE.get(t, t) for t in types)
                    return f"{name} must be {wanted}, not {_ARTICLE.get(_kind(value), _kind(value))} {_shown(value)}"
                return next(r for r in reasons if r)
    expected = schema.get("type")
    if isinstance(expected, str):
        expected = [expected]
    if isinstance(expected, list) and all(isinstance(t, str) for t in expected) and expected:
        if not any(_type_matches(t, value) for t in expected):
            wanted = " or ".join(_ARTICLE.get(t, t) for t in expected)
            return f"{name} must be {wanted}, not {_ARTICLE.get(_kind(value), _kind(value))} {_shown(value)}"
    if "const" in schema and not _same(value, schema["const"]):
        return f"{name} must be {_shown(schema['const'])}, not {_shown(value)}"
    choices = schema.get("enum")
    if isinstance(choices, list) and not any(_same(value, c) for c in choices):
        return f"{name} must be one of {', '.join(_shown(c) for c in choices)}, not {_shown(value)}"
    if isinstance(value, dict):
        return _object_mismatch(value, schema, root, where, depth)
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                reason = mismatch(item, items, root, f"{where}[{index}]", depth + 1)
                if reason:
                    return reason
    return None


def _object_mismatch(value: dict[str, Any], schema: Mapping[str, Any], root: Any, where: str, depth: int) -> str | None:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    for key in required if isinstance(required, list) else ():
        if isinstance(key, str) and key not in value:
            return f"`{_join(where, key)}` is required but missing"
    for key, item in value.items():
        if key in properties:
            reason = mismatch(item, properties[key], root, _join(where, key), depth + 1)
            if reason:
                return reason
        elif schema.get("additionalProperties") is False:
            known = ", ".join(f"`{k}`" for k in properties) or "none"
            return f"`{_join(where, key)}` is not an argument of this tool (known: {known})"
    return None


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``1`` equals ``1.0`` but ``true`` never equals ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    return bool(a == b)


def retry_message(reason: str) -> str:
    return (f"The call was not made: {reason}. Arguments must have exactly the types the tool's "
            "schema gives (no strings for booleans or numbers); call again with corrected arguments.")


__all__ = ["mismatch", "retry_message"]

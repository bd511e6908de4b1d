"""The JSON Schemas of headless output, built from the event classes and shipped as files.

``ketch/schemas/stream-json.schema.json`` describes one line of ``--output-format stream-json``
(any event of ``protocol.events``); ``ketch/schemas/json-output.schema.json`` the one object of
``--output-format json``. Every field an event has is always present (``to_dict`` writes them
all), so every property is required and no other is allowed. The files are what users read;
``python -m ketch.protocol.event_schema`` rewrites them from the classes, and a test holds the
shipped files equal to what this module builds.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from ketch.protocol import events as ev

DIALECT = "https://json-schema.org/draft/2020-12/schema"
STREAM_FILE = "stream-json.schema.json"
RESULT_FILE = "json-output.schema.json"


def _strip(node: Any) -> Any:
    """The SDK's schema without titles and defaults (every field is always written)."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in ("title", "default")}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _event_schema(cls: type) -> dict[str, Any]:
    from pydantic import TypeAdapter

    schema = _strip(TypeAdapter(cls).json_schema())
    props = schema["properties"]
    doc = (cls.__doc__ or "").strip()
    own = doc and not doc.startswith(cls.__name__ + "(")  # not the signature dataclasses writes
    return {
        "type": "object",
        **({"description": " ".join(doc.split("\n\n")[0].split())} if own else {}),
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


def stream_event_schema() -> dict[str, Any]:
    """One ``stream-json`` line: exactly one of the events, told apart by ``type``."""
    defs = {name: _event_schema(cls) for name, cls in ev.EVENT_TYPES.items()}
    return {
        "$schema": DIALECT,
        "$id": "https://ketch.invalid/schemas/" + STREAM_FILE,
        "title": "ketch stream-json event",
        "description": "One line of `ketch -p --output-format stream-json`: one event of the session, as it happens.",
        "type": "object",
        "required": ["type"],
        "oneOf": [{"$ref": f"#/$defs/{name}"} for name in defs],
        "$defs": defs,
    }


_COUNT = {"type": "integer", "minimum": 0}
_COST = {"type": ["number", "null"], "minimum": 0}


def json_result_schema() -> dict[str, Any]:
    """The one object ``--output-format json`` prints when the run ends."""
    reasons = _reasons()
    call = {
        "type": "object",
        "properties": {
            "id": {"type": "string"}, "name": {"type": "string"}, "args": {"type": "object"},
            "subagent": {"type": "string"}, "summary": {"type": "string"}, "is_error": {"type": "boolean"},
            "decision": {"enum": ["allow", "allow_session", "deny", "allow_rule", "allow_rule_saved"]},
            "decided_by": {"enum": ["user", "rule", "guard", "yolo", "default", "hook", "sandbox"]},
        },
        "required": ["id", "name", "args"],
        "additionalProperties": False,
    }
    usage_keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    return {
        "$schema": DIALECT,
        "$id": "https://ketch.invalid/schemas/" + RESULT_FILE,
        "title": "ketch json result",
        "description": "The one object `ketch -p --output-format json` prints when the run ends.",
        "type": "object",
        "properties": {
            "type": {"const": "result"},
            "result": {"type": "string"},
            "session_id": {"type": "string"},
            "reason": {"enum": ["", *reasons]},
            "is_error": {"type": "boolean"},
            "usage": {"type": "object", "properties": {k: _COUNT for k in usage_keys}, "required": list(usage_keys),
                      "additionalProperties": False},
            "cost_usd": _COST,
            "tool_calls": {"type": "array", "items": call},
            "error": {"oneOf": [{"type": "null"}, {
                "type": "object", "properties": {"kind": {"enum": _error_kinds()}, "message": {"type": "string"}},
                "required": ["kind", "message"], "additionalProperties": False}]},
        },
        "required": ["type", "result", "session_id", "reason", "is_error", "usage", "cost_usd", "tool_calls", "error"],
        "additionalProperties": False,
    }


def _reasons() -> list[str]:
    return list(_event_schema(ev.TurnFinished)["properties"]["reason"]["enum"])


def _error_kinds() -> list[str]:
    return list(_event_schema(ev.Error)["properties"]["kind"]["enum"])


def built() -> dict[str, dict[str, Any]]:
    """Each shipped file's name and the schema it must hold."""
    return {STREAM_FILE: stream_event_schema(), RESULT_FILE: json_result_schema()}


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def shipped(name: str) -> dict[str, Any]:
    """A schema as installed with the package (``STREAM_FILE`` or ``RESULT_FILE``)."""
    return json.loads(resources.files("ketch").joinpath("schemas", name).read_text(encoding="utf-8"))


def main() -> None:
    folder = Path(__file__).resolve().parent.parent / "schemas"
    folder.mkdir(exist_ok=True)
    for name, schema in built().items():
        (folder / name).write_text(render(schema), encoding="utf-8")


if __name__ == "__main__":
    main()

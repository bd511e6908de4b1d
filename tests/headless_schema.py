"""Every headless run the tests make is held to the shipped JSON Schemas.

``kettle.run_ketch`` passes each run's stdout through :func:`check_output`: with
``--output-format stream-json`` every line must be one event the stream schema accepts, with
``json`` the whole output must be one object the result schema accepts. The schemas are read
as the installed package ships them, so a field added to an event without its schema fails
the end-to-end test that first prints it.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from ketch.protocol import event_schema


@functools.cache
def validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    schema = event_schema.shipped(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@functools.cache
def by_event_type(name: str) -> dict[str, Any]:
    """For a schema whose top level is ``oneOf`` a list of ``$defs`` each requiring ``type`` to
    be the constant naming it, one validator per type: the whole schema with ``oneOf`` narrowed
    to that type's own branch. For an object whose ``type`` is T every other branch fails on
    the constant, so "exactly one branch fits" is "T's branch fits": the same verdict, without
    evaluating (and building the errors of) the other branches for every event. A schema not
    of that shape gets no narrowed validators (everything goes through the whole schema)."""
    from jsonschema import Draft202012Validator

    schema = event_schema.shipped(name)
    defs, branches = schema.get("$defs", {}), schema.get("oneOf")
    if not isinstance(branches, list) or "type" not in schema.get("required", []):
        return {}
    narrowed: dict[str, Any] = {}
    for branch in branches:
        ref = branch.get("$ref", "") if isinstance(branch, dict) else ""
        key = ref.removeprefix("#/$defs/")
        sub = defs.get(key) if set(branch) == {"$ref"} and ref.startswith("#/$defs/") else None
        if not (isinstance(sub, dict) and "type" in sub.get("required", [])
                and sub.get("properties", {}).get("type", {}).get("const") == key and key not in narrowed):
            return {}
        narrowed[key] = Draft202012Validator({**schema, "oneOf": [branch]})
    return narrowed


def problems(value: Any, name: str) -> list[str]:
    """Why ``value`` breaks schema ``name`` (none when it fits)."""
    kind = value.get("type") if isinstance(value, dict) else None
    narrowed = by_event_type(name).get(kind) if isinstance(kind, str) else None
    if narrowed is not None and narrowed.is_valid(value):
        return []
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in validator(name).iter_errors(value)]


def output_format(args: list[str]) -> str:
    """The ``--output-format`` of a headless ``ketch`` command line ('' for anything else)."""
    if "-p" not in args and "--print" not in args:
        return ""
    for i, arg in enumerate(args):
        if arg == "--output-format" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--output-format="):
            return arg.partition("=")[2]
    return "text"


checked = {"events": 0, "results": 0}
"""How many values the schemas accepted in this process (a test can see the hook ran)."""


def check_output(args: list[str], stdout: str) -> None:
    """Fail unless ``stdout`` of ``ketch ARGS`` fits the schema of its output format."""
    fmt = output_format(args)
    if fmt == "stream-json":
        for n, line in enumerate(stdout.splitlines(), 1):
            if not line.strip():
                continue
            event = json.loads(line)
            found = problems(event, event_schema.STREAM_FILE)
            assert not found, f"stream-json line {n} breaks the schema: {found[:5]}\n{line[:500]}"
            checked["events"] += 1
    elif fmt == "json" and stdout.strip():
        result = json.loads(stdout)
        found = problems(result, event_schema.RESULT_FILE)
        assert not found, f"the json result breaks the schema: {found[:5]}\n{stdout[:500]}"
        checked["results"] += 1

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

from ketch.core import event_schema


@functools.cache
def validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    schema = event_schema.shipped(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def problems(value: Any, name: str) -> list[str]:
    """Why ``value`` breaks schema ``name`` (none when it fits)."""
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

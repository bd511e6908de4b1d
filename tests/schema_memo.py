"""Each tool function's pydantic-ai schema built once per test worker, not once per session.

pydantic-ai builds a tool's validator and JSON schema (``_function_schema.function_schema``)
every time a ``Tool`` is made, and ketch makes one per tool per session: for ketch's 22 tools
about 25-40 ms of CPU a session, most of it pydantic reading the source of each TypedDict
argument type (``inspect.getsource`` and ``ast.parse``) for its field docstrings. In the
suite's thousands of in-process sessions that was a third of a headless run's CPU.

The result depends only on the arguments (the function, the schema generator, the name and
the docstring settings), so it is kept per arguments, for module-level functions only (a
closure made per session is built as before and not kept alive). Each caller gets its own
copy of the JSON schemas, as a fresh build gives it, so a caller that changes its schema in
place cannot reach another session (``tests/test_schema_memo.py`` checks both). Processes the
suite starts (``python -m ketch``, the preloaded interpreter's forks) build theirs as users do.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from typing import Any

_kept: dict[tuple[Any, ...], Any] = {}


def _keepable(function: Any) -> bool:
    return inspect.isfunction(function) and function.__closure__ is None and "<locals>" not in function.__qualname__


def install() -> None:
    """Route ``pydantic_ai._function_schema.function_schema`` (what ``Tool`` and the output
    functions call) through the memo, once."""
    from pydantic_ai import _function_schema

    build = _function_schema.function_schema
    if getattr(build, "memo_of", None) is not None:
        return

    def function_schema(function: Any, schema_generator: Any, **options: Any) -> Any:
        if not _keepable(function):
            return build(function, schema_generator, **options)
        key = (function, schema_generator, *sorted(options.items()))
        kept = _kept.get(key)
        if kept is None:
            kept = _kept[key] = build(function, schema_generator, **options)
        return dataclasses.replace(kept, json_schema=copy.deepcopy(kept.json_schema),
                                   return_schema=copy.deepcopy(kept.return_schema),
                                   positional_fields=list(kept.positional_fields))

    function_schema.memo_of = build  # type: ignore[attr-defined]
    _function_schema.function_schema = function_schema

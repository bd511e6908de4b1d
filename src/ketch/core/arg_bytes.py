"""Bytes a tool argument may not hold: refused as a tool error the model sees, before the gate,
the preview or the tool look at the call.

A NUL, a lone surrogate (no UTF-8 encoding) or, in a name (a path, a glob, a URL, a ref), any
control character cannot be what the model meant, and further in they turn into internal
errors that end the turn (``embedded null byte`` from ``exec``) or into terminal escapes in
an approval prompt. Commands and patterns keep tab, newline and carriage return (a script
has lines); free text (file content, an edit's strings, a note) keeps every character but
NUL and lone surrogates. Applies to every tool, MCP ones included.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic_ai.exceptions import ToolFailed

NAME_KEYS = frozenset({"path", "paths", "glob", "url", "ref", "name", "cwd", "file", "dir", "directory", "kind", "action", "status", "id"})
"""Arguments that name something (a file, a URL, a ref, a choice): no control character at all."""
LINE_KEYS = frozenset({"command", "pattern", "query"})
"""Arguments that are a line of code or a search: tab, newline and carriage return only."""

_IN_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f]|[\ud800-\udfff]")
_IN_LINE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|[\ud800-\udfff]")
_IN_TEXT = re.compile(r"[\x00]|[\ud800-\udfff]")


def _describe(char: str) -> str:
    code = ord(char)
    if code == 0:
        return "a NUL byte (U+0000)"
    if 0xD800 <= code <= 0xDFFF:
        return f"a lone surrogate (U+{code:04X}), which no UTF-8 text can hold"
    return f"the control character U+{code:04X}"


def _check(tool: str, where: str, key: str, value: Any) -> None:
    if isinstance(value, str):
        pattern = _IN_NAME if key in NAME_KEYS else _IN_LINE if key in LINE_KEYS else _IN_TEXT
        found = pattern.search(value)
        if found is not None:
            raise ToolFailed(
                f"The argument {where} of {tool} holds {_describe(found.group())} at position {found.start()}; "
                "no file name, command or URL can hold it, so nothing was run. Send the call again without it."
            )
    elif isinstance(value, dict):
        for inner_key, inner in value.items():
            _check(tool, f"{where}.{inner_key}" if where else str(inner_key), str(inner_key), inner)
    elif isinstance(value, (list, tuple)):
        for index, inner in enumerate(value):
            _check(tool, f"{where}[{index}]", key, inner)


def refuse_bad_bytes(tool: str, args: dict[str, Any]) -> None:
    """Raise ``ToolFailed`` naming the first argument that holds a byte it may not."""
    for key, value in args.items():
        _check(tool, repr(key), str(key), value)

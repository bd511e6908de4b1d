"""Colour policy for text written straight to the terminal (the scrollback).

The live region goes through prompt_toolkit, which honours ``NO_COLOR`` and the colour
depth itself. Committed lines are ANSI strings built by Rich, pygments and ``paint``; they
only use the terminal's 16 colours and attributes, and with ``NO_COLOR`` set their colour
parameters are removed here (bold, dim, italic, underline and reverse stay).
"""

from __future__ import annotations

import os
import re

_SGR = re.compile(r"\x1b\[([0-9;:]*)m")
_KEEP = {0, 1, 2, 3, 4, 7, 9, 21, 22, 23, 24, 27, 29}


def colour_disabled() -> bool:
    """True when the user asked for no colour (https://no-color.org: any non-empty value)."""
    return bool(os.environ.get("NO_COLOR"))


def _keep_attributes(match: re.Match[str]) -> str:
    params = [p for p in match.group(1).replace(":", ";").split(";")]
    kept: list[str] = []
    i = 0
    while i < len(params):
        p = int(params[i]) if params[i].isdigit() else 0
        if p in (38, 48, 58):  # extended colour: skip its arguments too
            i += 3 if params[i + 1:i + 2] == ["5"] else 5
            continue
        if p in _KEEP or params[i] == "":
            kept.append(params[i] or "0")
        i += 1
    return f"\x1b[{';'.join(kept)}m" if kept else ""


def strip_colours(line: str) -> str:
    """``line`` with every colour parameter of its SGR sequences removed."""
    return _SGR.sub(_keep_attributes, line) if "\x1b[" in line else line

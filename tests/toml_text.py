"""A small TOML writer for tests that generate configs (the standard library only reads TOML).

Values: str, bool, int, float, date, lists and tables (written inline); keys are dotted paths
with every part quoted, so any name survives."""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any


def value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{_string(str(k))} = {value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, Sequence):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise TypeError(type(v))


def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's; DEL is the one control byte JSON leaves raw,
    and characters outside the BMP stay raw (JSON would write them as a surrogate pair)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def assignment(path: Sequence[str], v: Any) -> str:
    """``"a"."b" = v``: one line setting the dotted key ``path``."""
    return ".".join(_string(p) for p in path) + " = " + value(v) + "\n"


def document(table: Mapping[str, Any]) -> str:
    """A whole document: every top-level key as one assignment."""
    return "".join(assignment([k], v) for k, v in table.items())

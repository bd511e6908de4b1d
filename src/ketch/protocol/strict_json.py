"""JSON text as strict parsers read it: never ``NaN``, ``Infinity`` or ``-Infinity``.

Python's ``json.dumps`` writes non-finite floats as those bare words, which are not JSON:
a strict reader of ketch's output (``stream-json``, ``--output-format json``, exports, the
session store, a hook's stdin) rejects the whole line. :func:`dumps` writes with
``allow_nan=False`` and, where a non-finite float got into the value anyway, writes it as
``null``, the way pydantic serializes one.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (also inside lists, tuples and dicts) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, **kwargs)`` that never writes NaN or Infinity."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError as exc:
        if "float" not in str(exc):
            raise
    return json.dumps(finite(value), allow_nan=False, **kwargs)


__all__ = ["dumps", "finite"]

"""When a provider rejects the request, say whether the history may be why, and what to do.

A server that cannot read something in the history (a tool call it produced itself, a part
it refuses on replay) fails every later request of the session the same way; no retry can
help. A rejection (HTTP 400, 413, 422 or 5xx, not auth, rate or missing-endpoint errors) of a
session that already holds an answer gets a hint: the part the provider names, when its error
names one (``messages[3]``, ``input[5]``, a validation error's ``'messages', 2``), and ``/repair`` / ``ketch repair ID``, which replace
the last exchange with a note to the model and keep everything else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_NAMED_PART = re.compile(r"\b(messages|input|contents)['\"]?\s*(?:\[\s*(\d+)\s*\]|\.(\d+)|,\s*(\d+)\b)")
"""``messages[3]``, ``input.5``, or a validation error's location ``('body', 'messages', 2, …)``
(llama-cpp-python, FastAPI servers)."""
_NOT_HISTORY = frozenset({401, 403, 404, 405, 408, 409, 429})


def _detail(body: Any) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        return str(inner.get("message", "") if isinstance(inner, dict) else inner)
    return str(body or "")


def named_part(text: str) -> str | None:
    """``messages[3]`` when the error text names a part of the request, else None."""
    found = _NAMED_PART.search(text)
    if found is None:
        return None
    return f"{found[1]}[{found[2] or found[3] or found[4]}]"


def history_hint(exc: BaseException, session_id: str, messages: Sequence[Any]) -> str:
    """The hint for ``exc``, or "" when the history cannot be what the provider rejects."""
    from pydantic_ai.exceptions import ModelHTTPError
    from pydantic_ai.messages import ModelResponse

    if not isinstance(exc, ModelHTTPError) or exc.in_stream or exc.status_code < 400 or exc.status_code in _NOT_HISTORY:
        return ""
    if not any(isinstance(m, ModelResponse) for m in messages):
        return ""
    part = named_part(_detail(exc.body))
    where = f"it names {part} of the request" if part else "it does not say which part"
    return (
        f"If this repeats, the provider is rejecting the session's history ({where}): /repair, or "
        f"ketch repair {session_id}, replaces the last exchange with a note to the model and keeps the rest"
    )


def annotate(exc: BaseException, session_id: str, messages: Sequence[Any]) -> None:
    """Attach the hint to ``exc`` for ``errors.describe_run_error``."""
    hint = history_hint(exc, session_id, messages)
    if hint:
        try:
            exc.ketch_history_hint = hint  # type: ignore[attr-defined]
        except AttributeError:
            pass


__all__ = ["annotate", "history_hint", "named_part"]

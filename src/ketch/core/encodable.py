"""Messages and events made encodable as JSON before they cross a boundary (provider, store).

Python decodes bytes that are not UTF-8 (a file name, a prompt from argv or stdin) to lone
surrogates, which no JSON encoder writes; these helpers replace them, returning the value
itself when nothing needs to change.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic_ai.messages import ModelMessage


def encodable(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings replaced, or ``value`` itself when it has none.

    Python decodes bytes that are not UTF-8 (a file name, a prompt from argv or stdin) to lone
    surrogates, which no JSON encoder writes: neither the provider request nor the session store
    could take the message. Such bytes are decoded again, the invalid ones becoming U+FFFD."""
    if isinstance(value, str):
        if value.isascii():
            return value
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            pass
        try:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        except UnicodeEncodeError:  # a surrogate that no undecodable byte made
            return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if type(value) in (list, tuple):
        items = [encodable(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    if type(value) is dict:
        pairs = {k: encodable(v) for k, v in value.items()}
        return value if all(pairs[k] is v for k, v in value.items()) else pairs
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if f.init:
                old = getattr(value, f.name)
                new = encodable(old)
                if new is not old:
                    changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value
    return value


def encodable_newest_request(history: list[ModelMessage], sent: list[ModelMessage]) -> None:
    """Make the request about to be sent (the prompt, tool results) encodable, in the run's
    history too; earlier messages went through here already, or came from the provider."""
    if not sent:
        return
    newest = sent[-1]
    clean = encodable(newest)
    if clean is newest:
        return
    sent[-1] = clean
    if history and history[-1] is newest:
        history[-1] = clean

"""Message history to and from the store's rows, without the SDK's validation pass on the way back.

The store keeps each message as the SDK's own JSON (``ModelMessagesTypeAdapter``), less the
fields that hold their plain default (``encode_messages``; both readers fill them in). Validating a
long session through that adapter costs most of a second per 10,000 messages: its schema calls
back into Python for every part (discriminators, file records, usage extras) and builds each
dataclass field by field. ``decode_messages`` instead validates each row against a plain schema
of the shapes a coding session is made of (requests with system and user text, tool results and
retry feedback; responses with text, thinking, tool calls, native tool parts and usage), made of
the same leaf validators the SDK's fields use, so pydantic still parses and checks every string,
number, literal and timestamp, and pydantic-core still makes the SDK's dataclasses the way it
does for the adapter (``__new__``, the validated fields as ``__dict__``, then ``__post_init__``),
only without the SDK's Python hooks around them. A ``__post_init__`` that, probed at import,
only adds constants is replaced by setting those constants (see ``_Shape``).

The result is the adapter's, object for object: the same classes, the same ``__dict__`` (field
order and values, datetimes carrying pydantic's ``TzInfo``), and what ``__post_init__`` does
where pydantic runs it. A row the plain schema refuses (a part kind it doesn't cover, an unexpected
or legacy key, multimodal user content, a typed ``tool_kind``, a citation list) and a tool
result whose content holds a mapping that claims a file ``kind`` go through the adapter
instead, so correctness never depends on this fast path.

Each shape (``codec_shapes``, built from ``codec_schema``) checks, when it is imported, that the SDK's dataclass still has exactly the
fields, annotations and defaults it was written against; a shape that no longer matches turns
itself off, and its messages take the adapter path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_ai import messages as _sdk
from pydantic_core import ValidationError

from ketch.context.collector import collector_paused

from ketch.context.codec_schema import _REQUIRED, _Shape, _post_init_constants  # noqa: F401 - tests reach the shapes here
from ketch.context.codec_shapes import _SHAPES, _VALIDATOR  # noqa: F401

__all__ = ["build_messages", "decode_messages", "encode_messages", "validate_messages"]

# ---------------------------------------------------------------- encoding

_DEFAULTS = {shape.cls: shape.defaults for shape in _SHAPES if shape.enabled and shape.cls is not _sdk.RetryInfo}
"""The fields each class's row may leave out, with the default that stands for them."""


def _left_out(obj: Any) -> dict[str, bool]:
    """The fields of ``obj`` that hold their plain default, as a pydantic ``exclude`` set."""
    return {
        name: True
        for name, default in _DEFAULTS.get(type(obj), ())
        if (value := getattr(obj, name, _REQUIRED)) is default or (type(value) is type(default) and value == default)
    }


def _exclusions(message: _sdk.ModelMessage) -> dict[str, Any]:
    left_out: dict[str, Any] = _left_out(message)
    parts = {index: fields for index, part in enumerate(message.parts) if (fields := _left_out(part))}
    if parts:
        left_out["parts"] = parts
    usage = getattr(message, "usage", None)
    if usage is not None and (fields := _left_out(usage)):
        left_out["usage"] = fields
    return left_out


def encode_messages(messages: Sequence[_sdk.ModelMessage]) -> list[str]:
    """Each message as its own SDK JSON object, without the fields that hold their plain default.

    The SDK's adapter and ``decode_messages`` both fill a missing field with its default, so a
    row decodes to the same message either way; left out, a message's nulls and zeros are not
    stored, parsed and checked for every resume (about a tenth of the decoding work of a coding
    session). Only fields of the shapes above are left out, only while their shape matches the
    installed SDK, and never a discriminator; everything else is the SDK's serialization as is.
    """
    dump = _sdk.ModelMessagesTypeAdapter.dump_json
    rows = []
    for message in messages:
        left_out = _exclusions(message)
        rows.append(dump([message], exclude={0: left_out} if left_out else None)[1:-1].decode())
    return rows


# ---------------------------------------------------------------- entry points


def validate_messages(rows: Sequence[str]) -> list[_sdk.ModelMessage]:
    """Rows through the SDK's adapter in one validation pass: the reference decoder."""
    return _sdk.ModelMessagesTypeAdapter.validate_json("[" + ",".join(rows) + "]")


def decode_messages(rows: Sequence[str]) -> list[_sdk.ModelMessage]:
    """The messages these rows (each one message's SDK JSON) hold, in order.

    ``build_messages`` builds what it recognises; the adapter decodes the rest in one pass, and
    raises what it always raised (a pydantic ``ValidationError``) for a row that is not a message.
    """
    if not rows:
        return []
    with collector_paused():
        messages = build_messages(rows)
        left = [i for i, message in enumerate(messages) if message is None]
        if left:
            for i, message in zip(left, validate_messages([rows[i] for i in left]), strict=True):
                messages[i] = message
    return messages  # type: ignore[return-value]


def build_messages(rows: Sequence[str]) -> list[_sdk.ModelMessage | None]:
    """Each row's message where this module can build it, ``None`` where the adapter must decode it."""
    if _VALIDATOR is None:
        return [None] * len(rows)
    validate = _VALIDATOR.validate_json
    messages: list[Any] = []
    for row in rows:
        try:
            messages.append(validate(row))
        except ValidationError:
            messages.append(None)
    return messages

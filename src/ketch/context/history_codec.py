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

Each shape checks, when this module is imported, that the SDK's dataclass still has exactly the
fields, annotations and defaults it was written against; a shape that no longer matches turns
itself off, and its messages take the adapter path.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from collections.abc import Callable, Sequence
from typing import Any, get_args

from pydantic_ai import messages as _sdk
from pydantic_ai.usage import RequestUsage
from pydantic_core import SchemaValidator, ValidationError
from pydantic_core import core_schema as cs

from ketch.context.collector import collector_paused

__all__ = ["build_messages", "decode_messages", "encode_messages", "validate_messages"]

# ---------------------------------------------------------------- leaf validators
# The core schemas pydantic builds for these annotations on the SDK's fields.

_STR = cs.str_schema()
_OPT_STR = cs.nullable_schema(_STR)
_INT = cs.int_schema()
_OPT_INT = cs.nullable_schema(_INT)
_FLOAT = cs.float_schema()
_ANY = cs.any_schema()
_JSON_OBJECT = cs.dict_schema(_STR, _ANY)
_OPT_JSON_OBJECT = cs.nullable_schema(_JSON_OBJECT)
_NONE = cs.none_schema()
_DATETIME = cs.datetime_schema(microseconds_precision="truncate")
_OPT_DATETIME = cs.nullable_schema(_DATETIME)


def _literal(alias: Any) -> cs.CoreSchema:
    """The literal schema of a ``Literal`` alias the SDK defines, with its values read from the SDK."""
    return cs.literal_schema(list(get_args(alias)))


_REQUIRED: Any = object()
"""Marks a field the JSON must carry: one without a default, or whose default is a factory (now,
a fresh id) that the adapter would call; a row without it goes to the adapter."""

_Field = tuple[str, str, Any, cs.CoreSchema]
"""A dataclass field as the SDK declares it: name, annotation, default, and the schema its JSON
value is validated with."""


class _Shape:
    """One SDK dataclass and the schema that validates its JSON form straight into an instance.

    ``probes`` gives sets of field values standing for what the schema lets through. When the
    class has a ``__post_init__`` and, run on instances made of each set, it changes no field and
    only adds the same attributes holding the same constants (a tool call's ``otel_metadata = None``, say), the
    schema sets those constants itself instead of calling the hook for every instance. Without
    a probe, or when the probe shows the hook doing anything else, the hook runs as under pydantic.
    """

    def __init__(self, cls: type, fields: Sequence[_Field], probes: _Probes | None = None) -> None:
        self.cls = cls
        self.names = [name for name, *_ in fields]
        self.enabled = _matches_sdk(cls, fields)
        self.defaults = tuple(
            (name, default)
            for name, _, default, _ in fields
            if default is not _REQUIRED and name not in ("kind", "part_kind")  # discriminators stay
        )
        constants = _post_init_constants(cls, probes) if hasattr(cls, "__post_init__") else {}
        post_init = constants is None
        self.post_init_skipped = hasattr(cls, "__post_init__") and not post_init
        kw_only = {f.name: f.kw_only for f in dataclasses.fields(cls)}
        # What pydantic builds for the class, less the SDK's hooks: the instance is made with
        # `__new__`, its `__dict__` set from the validated fields, then `__post_init__` is called
        # (or the constants it would add are set after the fields, in its order).
        self.schema = cs.dataclass_schema(
            cls,
            cs.dataclass_args_schema(
                cls.__name__,
                [
                    cs.dataclass_field(
                        name,
                        schema if default is _REQUIRED else cs.with_default_schema(schema, default=default),
                        kw_only=bool(kw_only.get(name)),
                        init=True,
                    )
                    for name, _, default, schema in fields
                ]
                + [
                    cs.dataclass_field(name, cs.with_default_schema(_ANY, default=value), init=False)
                    for name, value in (constants or {}).items()
                ],
                collect_init_only=post_init,
                extra_behavior="forbid",  # a key that is not a field (a legacy alias, say): adapter
            ),
            [*self.names, *(constants or {})],
            post_init=post_init,
            frozen=cls.__dataclass_params__.frozen,  # type: ignore[attr-defined]
            slots=False,
        )


def _probe_time() -> datetime:
    return datetime.now(timezone.utc)


_Probes = Callable[[], list[dict[str, Any]]]
"""Sets of field values for a class's instances, made when the shape is built."""

_CONSTANT_TYPES = (type(None), bool, int, float, str)


def _post_init_constants(cls: type, probes: _Probes | None) -> dict[str, Any] | None:
    """The attributes ``cls.__post_init__`` adds to instances built from each of ``probes``,
    when adding the same constants is all it does; ``None`` when it must run (no probes, or on
    one of them it raised, replaced or reordered a field, replaced an item of a list field, or
    added something else).
    """
    if probes is None:
        return None
    try:
        found = [_added_by_post_init(cls, values) for values in probes()]
    except Exception:
        return None
    if not found or any(added is None or list(added.items()) != list(found[0].items()) for added in found):
        return None
    return found[0]


def _added_by_post_init(cls: type, values: dict[str, Any]) -> dict[str, Any] | None:
    """What ``__post_init__`` adds to an instance of these values, if adding constants is all it does.

    The instance is made as pydantic-core makes it: ``__new__``, then the fields as ``__dict__``.
    """
    fields = {
        f.name: values[f.name]
        if f.name in values
        else f.default
        if f.default is not dataclasses.MISSING
        else f.default_factory()  # type: ignore[misc]
        for f in dataclasses.fields(cls)
    }
    instance = cls.__new__(cls)
    instance.__dict__.update(fields)
    items = {name: list(value) for name, value in fields.items() if type(value) is list}
    instance.__post_init__()  # type: ignore[attr-defined]
    after = instance.__dict__
    if list(after)[: len(fields)] != list(fields) or any(after[name] is not value for name, value in fields.items()):
        return None
    if any(len(after[name]) != len(old) or any(a is not b for a, b in zip(after[name], old)) for name, old in items.items()):
        return None
    added = {name: value for name, value in after.items() if name not in fields}
    if not all(type(value) in _CONSTANT_TYPES for value in added.values()):
        return None
    return added


def _matches_sdk(cls: type, fields: Sequence[_Field]) -> bool:
    """Whether ``cls`` still declares exactly these fields, annotations and defaults."""
    declared = dataclasses.fields(cls)
    if [(f.name, str(f.type)) for f in declared] != [(name, annotation) for name, annotation, _, _ in fields]:
        return False
    for f, (_, _, default, _) in zip(declared, fields):
        if default is _REQUIRED:
            if f.default is not dataclasses.MISSING:
                return False
        elif f.default_factory is not dataclasses.MISSING or type(f.default) is not type(default) or f.default != default:
            return False
    return True


# ---------------------------------------------------------------- tool results

_FILE_DIGESTS_KEY = "content_file_digests"


def _without_file_record(data: Any) -> Any:
    """A tool result's fields without the record of file items the SDK writes beside non-scalar content.

    The record only decides which file-shaped mappings in the content are rebuilt as files, and
    content holding one isn't built here, so the record is dropped as the adapter drops it, after
    the same check: a list must hold strings.
    """
    if not isinstance(data, dict) or _FILE_DIGESTS_KEY not in data:
        return data
    record = data[_FILE_DIGESTS_KEY]
    if isinstance(record, list) and not all(isinstance(digest, str) for digest in record):
        raise ValueError("`content_file_digests` must be a list of strings")
    return {key: value for key, value in data.items() if key != _FILE_DIGESTS_KEY}


def _refuse_file_shaped_content(part: Any) -> Any:
    """Refuse a tool result whose content the adapter might not hand back as parsed.

    Validation rebuilds a mapping in the content that claims a file ``kind`` (``'binary'``,
    ``'image-url'``, ...) as that file item, under rules only the adapter knows; content holding
    any mapping with a ``kind`` key is left to it. Anything else (strings, numbers, lists and
    mappings of those) comes back as parsed.
    """
    content = part.content
    if type(content) is str:
        return part
    stack = [content]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            if "kind" in node:
                raise ValueError("a mapping with a `kind` in tool result content: the adapter decides")
            stack.extend(node.values())
        elif type(node) is list:
            stack.extend(node)
    return part


# ---------------------------------------------------------------- shapes

_OUTCOME_ANNOTATION = "Literal['success', 'failed', 'denied', 'interrupted', 'retried']"
_OUTCOME = cs.literal_schema(["success", "failed", "denied", "interrupted", "retried"])

_SYSTEM_PROMPT = _Shape(
    _sdk.SystemPromptPart,
    [
        ("content", "str", _REQUIRED, _STR),
        ("timestamp", "datetime", _REQUIRED, _DATETIME),
        ("dynamic_ref", "str | None", None, _OPT_STR),
        ("context_id", "str | None", None, _OPT_STR),
        ("scope", "Literal['conversation', 'request']", "conversation", cs.literal_schema(["conversation", "request"])),
        ("metadata", "dict[str, Any] | None", None, _OPT_JSON_OBJECT),
        ("part_kind", "Literal['system-prompt']", "system-prompt", cs.literal_schema(["system-prompt"])),
    ],
)
_USER_PROMPT = _Shape(
    _sdk.UserPromptPart,
    [
        ("content", "str | Sequence[UserContent]", _REQUIRED, _STR),  # text only: multimodal goes to the adapter
        ("timestamp", "datetime", _REQUIRED, _DATETIME),
        ("part_kind", "Literal['user-prompt']", "user-prompt", cs.literal_schema(["user-prompt"])),
    ],
    lambda: [{"content": text, "timestamp": _probe_time()} for text in ("", "text")],
)


def _retry_info(causes: Any) -> _Shape:
    return _Shape(
        _sdk.RetryInfo,
        [
            ("cause", "RetryCauseT_co", _REQUIRED, _literal(causes)),
            ("attempt", "int | None", None, _OPT_INT),
            ("max_retries", "int | None", None, _OPT_INT),
        ],
    )


_TOOL_RETRY = _retry_info(_sdk.ToolRetryCause)
_FEEDBACK_RETRY = _retry_info(_sdk.RetryFeedbackCause)
_TOOL_RETURN = _Shape(
    _sdk.ToolReturnPart,
    [
        ("tool_name", "str", _REQUIRED, _STR),
        ("content", "ToolReturnContent", _REQUIRED, _ANY),  # checked for file-shaped mappings after
        ("tool_call_id", "str", _REQUIRED, _STR),
        ("tool_kind", "ToolPartKind | None", None, _NONE),  # a kind may promote the part: adapter
        ("metadata", "Any", None, _ANY),
        ("timestamp", "datetime", _REQUIRED, _DATETIME),
        ("outcome", _OUTCOME_ANNOTATION, "success", _OUTCOME),
        ("retry", "RetryInfo[ToolRetryCause] | None", None, cs.nullable_schema(_TOOL_RETRY.schema)),
        ("part_kind", "Literal['tool-return']", "tool-return", cs.literal_schema(["tool-return"])),
    ],
)
_RETRY_FEEDBACK = _Shape(
    _sdk.RetryFeedbackPart,
    [
        ("content", "list[pydantic_core.ErrorDetails] | str", _REQUIRED, _STR),  # error lists: adapter
        ("retry", "RetryInfo[RetryFeedbackCause]", _REQUIRED, _FEEDBACK_RETRY.schema),
        ("timestamp", "datetime", _REQUIRED, _DATETIME),
        ("part_kind", "Literal['retry-feedback']", "retry-feedback", cs.literal_schema(["retry-feedback"])),
    ],
)
_TEXT = _Shape(
    _sdk.TextPart,
    [
        ("content", "str", _REQUIRED, _STR),
        ("id", "str | None", None, _OPT_STR),
        ("provider_name", "str | None", None, _OPT_STR),
        ("provider_details", "dict[str, Any] | None", None, _OPT_JSON_OBJECT),
        ("citations", "list[Citation] | None", None, _NONE),  # citations: adapter
        ("part_kind", "Literal['text']", "text", cs.literal_schema(["text"])),
    ],
)
_THINKING = _Shape(
    _sdk.ThinkingPart,
    [
        ("content", "str", _REQUIRED, _STR),
        ("id", "str | None", None, _OPT_STR),
        ("signature", "str | None", None, _OPT_STR),
        ("provider_name", "str | None", None, _OPT_STR),
        ("provider_details", "dict[str, Any] | None", None, _OPT_JSON_OBJECT),
        ("part_kind", "Literal['thinking']", "thinking", cs.literal_schema(["thinking"])),
    ],
)


def _tool_call(cls: type, part_kind: str) -> _Shape:
    return _Shape(
        cls,
        [
            ("tool_name", "str", _REQUIRED, _STR),
            ("args", "str | dict[str, Any] | None", None, cs.nullable_schema(cs.union_schema([_STR, _JSON_OBJECT]))),
            ("tool_call_id", "str", _REQUIRED, _STR),
            ("tool_kind", "ToolPartKind | None", None, _NONE),
            ("id", "str | None", None, _OPT_STR),
            ("provider_name", "str | None", None, _OPT_STR),
            ("provider_details", "dict[str, Any] | None", None, _OPT_JSON_OBJECT),
            ("part_kind", f"Literal['{part_kind}']", part_kind, cs.literal_schema([part_kind])),
        ],
        lambda: [{"tool_name": "t", "args": args, "tool_call_id": "c"} for args in (None, "{}", {"k": ["v"]})],
    )


_TOOL_CALL = _tool_call(_sdk.ToolCallPart, "tool-call")
_NATIVE_TOOL_CALL = _tool_call(_sdk.NativeToolCallPart, "builtin-tool-call")
_NATIVE_TOOL_RETURN = _Shape(
    _sdk.NativeToolReturnPart,
    [
        ("tool_name", "str", _REQUIRED, _STR),
        ("content", "ToolReturnContent", _REQUIRED, _ANY),
        ("tool_call_id", "str", _REQUIRED, _STR),
        ("tool_kind", "ToolPartKind | None", None, _NONE),
        ("metadata", "Any", None, _ANY),
        ("timestamp", "datetime", _REQUIRED, _DATETIME),
        ("outcome", _OUTCOME_ANNOTATION, "success", _OUTCOME),
        ("provider_name", "str | None", None, _OPT_STR),
        ("provider_details", "dict[str, Any] | None", None, _OPT_JSON_OBJECT),
        ("part_kind", "Literal['builtin-tool-return']", "builtin-tool-return", cs.literal_schema(["builtin-tool-return"])),
    ],
)
_USAGE = _Shape(
    RequestUsage,
    [
        (
            "input_tokens",
            "Annotated[int, Field(validation_alias=AliasChoices('input_tokens', 'request_tokens'))]",
            0,
            _INT,
        ),
        ("cache_write_tokens", "int", 0, _INT),
        ("cache_write_1h_tokens", "int", 0, _INT),
        ("cache_read_tokens", "int", 0, _INT),
        (
            "output_tokens",
            "Annotated[int, Field(validation_alias=AliasChoices('output_tokens', 'response_tokens'))]",
            0,
            _INT,
        ),
        ("unmeasured_requests", "Annotated[int, Field(exclude_if=lambda value: value == 0)]", 0, _INT),
        ("output_reasoning_tokens", "int", 0, _INT),
        ("input_audio_tokens", "int", 0, _INT),
        ("cache_audio_read_tokens", "int", 0, _INT),
        ("output_audio_tokens", "int", 0, _INT),
        ("audio_seconds", "float", 0, _FLOAT),
        # the SDK turns a null or missing `details` into {}: such a row goes to the adapter
        ("details", "Annotated[dict[str, int], BeforeValidator(lambda d: d or {})]", _REQUIRED, cs.dict_schema(_STR, _INT)),
        ("cost", "Decimal | None", None, cs.nullable_schema(cs.decimal_schema())),
    ],
)
_REQUEST_PARTS = {
    "system-prompt": _SYSTEM_PROMPT,
    "user-prompt": _USER_PROMPT,
    "tool-return": _TOOL_RETURN,
    "retry-feedback": _RETRY_FEEDBACK,
}
_RESPONSE_PARTS = {
    "text": _TEXT,
    "thinking": _THINKING,
    "tool-call": _TOOL_CALL,
    "builtin-tool-call": _NATIVE_TOOL_CALL,
    "builtin-tool-return": _NATIVE_TOOL_RETURN,
}


def _tool_result(shape: _Shape) -> cs.CoreSchema:
    """A tool result's schema: its fields, with or without the file record, and content kept as parsed."""
    with_file_record = cs.no_info_before_validator_function(_without_file_record, shape.schema)
    return cs.no_info_after_validator_function(
        _refuse_file_shaped_content, cs.union_schema([shape.schema, with_file_record], mode="left_to_right")
    )


def _parts(shapes: dict[str, _Shape]) -> cs.CoreSchema:
    return cs.list_schema(
        cs.tagged_union_schema(
            {
                kind: _tool_result(shape) if shape in (_TOOL_RETURN, _NATIVE_TOOL_RETURN) else shape.schema
                for kind, shape in shapes.items()
                if shape.enabled
            },
            discriminator="part_kind",
        )
    )


_REQUEST = _Shape(
    _sdk.ModelRequest,
    [
        ("parts", "Sequence[ModelRequestPart]", _REQUIRED, _parts(_REQUEST_PARTS)),
        ("timestamp", "datetime | None", None, _OPT_DATETIME),
        ("instructions", "str | None", None, _OPT_STR),
        ("kind", "Literal['request']", "request", cs.literal_schema(["request"])),
        ("run_id", "str | None", None, _OPT_STR),
        ("conversation_id", "str | None", None, _OPT_STR),
        ("metadata", "dict[str, Any] | None", None, _OPT_JSON_OBJECT),
        ("state", "ModelRequestState", "complete", _literal(_sdk.ModelRequestState)),
    ],
    lambda: [
        {"parts": []},
        {
            "parts": [
                _sdk.SystemPromptPart("s"),
                _sdk.UserPromptPart("u"),
                _sdk.ToolReturnPart("t", "r", "c"),
                _sdk.ToolReturnPart("t", ["r", {"k": 1}], "c", outcome="failed", retry=_sdk.RetryInfo("unknown_tool")),
                _sdk.RetryFeedbackPart("r", retry=_sdk.RetryInfo("no_output")),
            ]
        },
    ],
)
_RESPONSE = _Shape(
    _sdk.ModelResponse,
    [
        ("parts", "Sequence[ModelResponsePart]", _REQUIRED, _parts(_RESPONSE_PARTS)),
        ("usage", "RequestUsage", _REQUIRED, _USAGE.schema),
        ("model_name", "str | None", None, _OPT_STR),
        ("model_id", "str | None", None, _OPT_STR),
        ("timestamp", "datetime", _REQUIRED, _DATETIME),
        ("kind", "Literal['response']", "response", cs.literal_schema(["response"])),
        ("provider_name", "str | None", None, _OPT_STR),
        ("provider_url", "str | None", None, _OPT_STR),
        ("canonical_system", "str | None", None, _OPT_STR),
        (
            "provider_details",
            "Annotated[dict[str, Any] | None, pydantic.Field(validation_alias="
            "pydantic.AliasChoices('provider_details', 'vendor_details'))]",
            None,
            _OPT_JSON_OBJECT,
        ),
        (
            "provider_response_id",
            "Annotated[str | None, pydantic.Field(validation_alias="
            "pydantic.AliasChoices('provider_response_id', 'vendor_id'))]",
            None,
            _OPT_STR,
        ),
        ("finish_reason", "FinishReason | None", None, cs.nullable_schema(_literal(_sdk.FinishReason))),
        ("run_id", "str | None", None, _OPT_STR),
        ("conversation_id", "str | None", None, _OPT_STR),
        ("metadata", "dict[str, Any] | None", None, _OPT_JSON_OBJECT),
        ("workspace_ref", "WorkspaceRef | None", None, _NONE),
        ("history_digest", "str | None", None, _OPT_STR),
        ("failed_attempts", "list[ModelRequestAttempt] | None", None, _NONE),
        ("state", "ModelResponseState", "complete", _literal(_sdk.ModelResponseState)),
    ],
    lambda: [
        {"parts": parts, "usage": RequestUsage(), "timestamp": _probe_time()}
        for parts in (
            [],
            [
                _sdk.TextPart("t"),
                _sdk.ThinkingPart("t", signature="s"),
                _sdk.ToolCallPart("t", {"k": "v"}, "c"),
                _sdk.NativeToolCallPart("t", "{}", "c"),
                _sdk.NativeToolReturnPart("t", {"k": "v"}, "c"),
            ],
        )
    ],
)

_SHAPES = [
    _SYSTEM_PROMPT,
    _USER_PROMPT,
    _TOOL_RETRY,
    _FEEDBACK_RETRY,
    _TOOL_RETURN,
    _RETRY_FEEDBACK,
    _TEXT,
    _THINKING,
    _TOOL_CALL,
    _NATIVE_TOOL_CALL,
    _NATIVE_TOOL_RETURN,
    _USAGE,
    _REQUEST,
    _RESPONSE,
]


def _message_validator() -> SchemaValidator | None:
    """Validates one row into a message, or ``None`` when the installed SDK no longer matches."""
    # A part kind whose shape is off is left out of its union above, so its rows go to the
    # adapter; a nested shape that is off leaves its parent nothing to build with.
    if not all(shape.enabled for shape in (_REQUEST, _RESPONSE, _USAGE, _TOOL_RETRY, _FEEDBACK_RETRY)):
        return None
    return SchemaValidator(
        cs.tagged_union_schema({"request": _REQUEST.schema, "response": _RESPONSE.schema}, discriminator="kind")
    )


_VALIDATOR = _message_validator()


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

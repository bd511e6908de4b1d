"""The shapes a coding session's messages are made of (requests with system and user text,
tool results and retry feedback; responses with text, thinking, tool calls, native tool parts
and usage), and the one validator that builds a stored row into a message.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import messages as _sdk
from pydantic_ai.usage import RequestUsage
from pydantic_core import SchemaValidator
from pydantic_core import core_schema as cs


from ketch.context.codec_schema import (
    _ANY,
    _DATETIME,
    _FLOAT,
    _INT,
    _JSON_OBJECT,
    _NONE,
    _OPT_DATETIME,
    _OPT_INT,
    _OPT_JSON_OBJECT,
    _OPT_STR,
    _REQUIRED,
    _STR,
    _Shape,
    _literal,
    _probe_time,
)

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

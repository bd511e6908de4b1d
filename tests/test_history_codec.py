"""The fast history decoder against the SDK's own adapter, object for object.

Every case serializes messages the way the store does, then decodes the rows twice: with
``decode_messages`` and with ``ModelMessagesTypeAdapter.validate_json``. The two results must
be identical down to each object's class, ``__dict__`` (key order included), datetime zone
class and offset, and Decimal spelling. ``build_messages`` says which rows the fast path built
itself, so the tests also pin that the shapes ketch's sessions are made of do take it.
"""

from __future__ import annotations

import dataclasses
import gc
import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_ai.messages import (
    BinaryContent,
    CachePoint,
    Citation,
    CompactionPart,
    DocumentUrl,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    ToolSearchCallPart,
    ToolSearchReturnPart,
    UploadedFile,
    UserPromptPart,
    WebCitationSource,
)
from pydantic_ai.usage import RequestUsage

from ketch.context import history_codec
from ketch.context.history_codec import build_messages, decode_messages
from ketch.state.store import serialize_messages

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)
IST = timezone(timedelta(hours=5, minutes=30))


def snapshot(value: Any) -> Any:
    """Everything observable about a decoded value, as nested tuples that compare exactly."""
    if isinstance(value, datetime):
        return ("datetime", value.isoformat(), type(value.tzinfo).__qualname__, value.utcoffset())
    if isinstance(value, Decimal):
        return ("Decimal", repr(value))
    if isinstance(value, (str, bytes, int, float, bool, type(None))):
        return (type(value).__name__, value)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [snapshot(v) for v in value])
    if isinstance(value, dict):
        return ("dict", [(k, snapshot(v)) for k, v in value.items()])
    if hasattr(value, "__dict__"):
        return (type(value).__module__, type(value).__qualname__, snapshot(vars(value)))
    return (type(value).__qualname__, repr(value))


def reference(rows: list[str]) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_json("[" + ",".join(rows) + "]")


def assert_decodes_like_the_adapter(rows: list[str]) -> list[ModelMessage]:
    decoded = decode_messages(rows)
    assert snapshot(decoded) == snapshot(reference(rows))
    return decoded


def built(messages: list[ModelMessage]) -> list[bool]:
    """For each message, whether the fast path built it (rather than leaving it to the adapter)."""
    return [m is not None for m in build_messages(serialize_messages(messages))]


# ---------------------------------------------------------------- the shapes a session is made of

FAST_MESSAGES: list[ModelMessage] = [
    ModelRequest(
        parts=[
            SystemPromptPart("be brief", timestamp=T0),
            SystemPromptPart(
                "budget: 3",
                timestamp=T0,
                dynamic_ref="budget",
                context_id="system_prompt:budget",
                scope="request",
                metadata={"added_by": "cap", "n": [1, 2.5, None, True]},
            ),
            UserPromptPart("hello ☃ \u2028 \\ \"quoted\"", timestamp=T0),
        ],
        timestamp=T0,
        instructions="You are ketch.\n\nBe brief.",
        run_id="run-1",
        conversation_id="conv-1",
        metadata={"k": {"nested": ["x"]}},
    ),
    ModelResponse(
        parts=[
            ThinkingPart("thinking…", id="rs_1", signature="c2ln" * 50, provider_name="openai"),
            ThinkingPart("", provider_details={"redacted": True}, provider_name="anthropic"),
            TextPart("answer", id="msg_1", provider_name="openai", provider_details={"phase": "final", "a": [None]}),
            ToolCallPart("read_file", {"path": "a.py", "opts": {"n": 3, "f": 1.5}}, "call_1", id="fc_1", provider_name="openai"),
            ToolCallPart("shell", '{"command": "ls"}', "call_2"),
            ToolCallPart("noop", None, "call_3"),
            NativeToolCallPart("web_search", {"query": "q"}, "ws_1", provider_name="openai", provider_details={"x": 1}),
            NativeToolReturnPart(
                "web_search",
                {"status": "completed", "sources": [{"url": "https://example.com", "title": None}]},
                "ws_1",
                provider_name="openai",
                provider_details={"opaque": "blob"},
                timestamp=T0,
            ),
        ],
        usage=RequestUsage(
            input_tokens=100,
            output_tokens=20,
            cache_read_tokens=80,
            cache_write_tokens=3,
            output_reasoning_tokens=7,
            details={"reasoning_tokens": 7, "accepted_prediction_tokens": 0},
            cost=Decimal("0.00123"),
        ),
        model_name="gpt-x",
        model_id="openai:gpt-x",
        timestamp=T0,
        provider_name="openai",
        provider_url="https://api.openai.com/v1",
        canonical_system="openai",
        provider_details={"finish_reason": "tool_calls"},
        provider_response_id="resp_1",
        finish_reason="tool_call",
        run_id="run-1",
        conversation_id="conv-1",
        metadata={"m": 1},
        history_digest="abc123",
        state="complete",
    ),
    ModelRequest(
        parts=[
            ToolReturnPart("read_file", "print('hi')\n" * 3, "call_1", timestamp=T0),
            ToolReturnPart("shell", "no such command", "call_2", outcome="failed", timestamp=T0, metadata={"exit": 127}),
            ToolReturnPart("noop", None, "call_3", timestamp=T0),
            ToolReturnPart("count", 42, "call_4", timestamp=T0),
            ToolReturnPart("ratio", 0.5, "call_5", timestamp=T0, outcome="denied"),
            ToolReturnPart("json", {"rows": [{"a": 1}, {"b": [True, None]}], "total": 2}, "call_6", timestamp=T0),
            ToolReturnPart("list", ["one", 2, [3.0, {"four": 4}]], "call_7", timestamp=T0, outcome="interrupted"),
            ToolReturnPart(
                "read_file",
                [{"type": "missing", "loc": ["path"], "msg": "Field required", "input": {"nope": 1}}],
                "call_8",
                timestamp=T0,
                outcome="retried",
                retry=RetryInfo("validation_error", attempt=1, max_retries=3),
            ),
            ToolReturnPart(
                "nope",
                "Unknown tool name: 'nope'",
                "call_9",
                timestamp=T0,
                outcome="retried",
                retry=RetryInfo("unknown_tool", attempt=1, max_retries=1),
            ),
            RetryFeedbackPart("say it with the tool", retry=RetryInfo("no_output"), timestamp=T0),
        ],
        timestamp=T0.astimezone(IST),
        state="interrupted",
    ),
    ModelResponse(parts=[TextPart("")], timestamp=datetime(2026, 5, 6, 7, 8, 9), state="interrupted"),
    ModelResponse(parts=[], usage=RequestUsage(), timestamp=T0, finish_reason="length", state="incomplete"),
    ModelRequest(parts=[UserPromptPart("no request timestamp", timestamp=T0)]),
]


def test_the_shapes_of_a_session_take_the_fast_path_and_match_the_adapter() -> None:
    rows = serialize_messages(FAST_MESSAGES)
    assert built(FAST_MESSAGES) == [True] * len(FAST_MESSAGES)
    decoded = assert_decodes_like_the_adapter(rows)
    assert decoded == FAST_MESSAGES
    # a tool call's post-init ran, as under pydantic: it keeps an instance attribute outside the fields
    assert "otel_metadata" in vars(decoded[1].parts[3])
    assert type(decoded[0].timestamp.tzinfo).__name__ == "TzInfo"


def sdk_rows(messages: list[ModelMessage]) -> list[str]:
    """Rows as ketch wrote them before it left default fields out: the SDK's whole JSON."""
    return [ModelMessagesTypeAdapter.dump_json([m])[1:-1].decode() for m in messages]


def assert_left_out_fields_come_back(messages: list[ModelMessage]) -> None:
    """A stored row leaves out fields at their default; the SDK's adapter and the fast path both
    read it as the whole row, and as the messages that were stored."""
    rows, whole = serialize_messages(messages), sdk_rows(messages)
    assert reference(rows) == reference(whole)
    assert decode_messages(rows) == decode_messages(whole)
    assert [m is not None for m in build_messages(rows)] == [m is not None for m in build_messages(whole)]


def test_rows_leave_out_default_fields_and_older_whole_rows_still_take_the_fast_path() -> None:
    rows, whole = serialize_messages(FAST_MESSAGES), sdk_rows(FAST_MESSAGES)
    assert sum(row.count(":null") for row in rows) < sum(row.count(":null") for row in whole) / 4
    assert '"state":"complete"' in whole[-1] and '"state"' not in rows[-1]
    assert all('"kind":' in row and row.count('"part_kind":') == whole_row.count('"part_kind":') for row, whole_row in zip(rows, whole))
    assert_left_out_fields_come_back(FAST_MESSAGES)
    assert decode_messages(rows) == FAST_MESSAGES
    assert_left_out_fields_come_back(ADAPTER_MESSAGES)
    assert built(FAST_MESSAGES) == [m is not None for m in build_messages(whole)] == [True] * len(FAST_MESSAGES)
    assert_decodes_like_the_adapter(whole)


def test_decoded_messages_serialize_back_to_the_same_bytes() -> None:
    rows = serialize_messages(FAST_MESSAGES)
    assert serialize_messages(decode_messages(rows)) == rows


def test_every_shape_matches_the_installed_sdk() -> None:
    """A shape turns itself off when the SDK's dataclass changed; then this fails, to say so."""
    assert len(history_codec._SHAPES) == 14
    assert [shape.cls.__name__ for shape in history_codec._SHAPES if not shape.enabled] == []
    assert history_codec._VALIDATOR is not None


# ---------------------------------------------------------------- what goes to the adapter

ADAPTER_MESSAGES: list[ModelMessage] = [
    ModelRequest(parts=[UserPromptPart(["look at this", ImageUrl("https://example.com/a.png")], timestamp=T0)]),
    ModelRequest(
        parts=[
            UserPromptPart(
                [TextContent("t", metadata={"m": 1}), BinaryContent(b"\x89PNG", media_type="image/png"), CachePoint()],
                timestamp=T0,
            )
        ]
    ),
    ModelRequest(parts=[UserPromptPart([DocumentUrl("https://example.com/d.pdf")], timestamp=T0)]),
    ModelRequest(
        parts=[ToolReturnPart("img", BinaryContent(b"\x00\x01", media_type="image/png"), "c1", timestamp=T0)]
    ),
    ModelRequest(
        parts=[
            ToolReturnPart(
                "files",
                {"shot": ImageUrl("https://example.com/s.png"), "up": UploadedFile("file-1", "openai")},
                "c2",
                timestamp=T0,
            )
        ]
    ),
    ModelRequest(parts=[ToolReturnPart("kinded", {"kind": "binary", "label": "mine"}, "c3", timestamp=T0)]),
    ModelRequest(
        parts=[
            RetryFeedbackPart(
                [{"type": "missing", "loc": ("x",), "msg": "Field required", "input": {}}],
                retry=RetryInfo("validation_error", attempt=2, max_retries=3),
                timestamp=T0,
            )
        ]
    ),
    ModelRequest(parts=[ToolSearchReturnPart(content={"discovered_tools": [{"name": "grep"}]}, tool_call_id="ts1", timestamp=T0)]),
    ModelResponse(parts=[ToolSearchCallPart(args={"queries": ["grep"]}, tool_call_id="ts1")], timestamp=T0),
    ModelResponse(parts=[ToolCallPart("x", {}, "c4", tool_kind="inventory.lookup")], timestamp=T0),
    ModelResponse(
        parts=[TextPart("cited", citations=[Citation([WebCitationSource("https://example.com", title="E")])])],
        timestamp=T0,
    ),
    ModelResponse(parts=[FilePart(BinaryContent(b"img", media_type="image/png"))], timestamp=T0),
    ModelResponse(parts=[CompactionPart("summary", provider_name="anthropic")], timestamp=T0),
    ModelResponse(parts=[TextPart("x")], usage=RequestUsage(audio_seconds=1.5, unmeasured_requests=1), timestamp=T0),
]


def test_other_shapes_go_to_the_adapter_and_still_decode_identically() -> None:
    rows = serialize_messages(ADAPTER_MESSAGES)
    flags = built(ADAPTER_MESSAGES)
    assert flags[:-1] == [False] * (len(ADAPTER_MESSAGES) - 1)
    assert flags[-1] is True  # usage with audio seconds and unmeasured requests is plain data
    mixed = serialize_messages(FAST_MESSAGES) + rows + serialize_messages(FAST_MESSAGES)
    decoded = assert_decodes_like_the_adapter(mixed)
    assert decoded[: len(FAST_MESSAGES)] == decoded[-len(FAST_MESSAGES) :] == FAST_MESSAGES


LEGACY_ROWS = [
    # a retry prompt written before the SDK split it into a tool return and retry feedback
    '{"parts":[{"content":"fix the args","tool_name":"shell","tool_call_id":"c1",'
    '"timestamp":"2025-01-02T03:04:05Z","part_kind":"retry-prompt"}],"kind":"request"}',
    '{"parts":[{"content":[{"type":"missing","loc":["a"],"msg":"Field required","input":{}}],'
    '"tool_name":null,"tool_call_id":"c2","timestamp":"2025-01-02T03:04:05Z","part_kind":"retry-prompt"}],'
    '"kind":"request"}',
    # old field names and shapes the adapter still reads
    '{"parts":[{"content":"hi","part_kind":"text"}],"usage":{"request_tokens":5,"response_tokens":null,'
    '"details":null},"model_name":"m","timestamp":"2025-01-02T03:04:05+00:00","kind":"response",'
    '"vendor_details":{"a":1},"vendor_id":"r1"}',
    # fields left out that have plain defaults (a factory default, such as a part's timestamp, needs the adapter)
    '{"parts":[{"content":"x","part_kind":"text"}],"usage":{"input_tokens":1,"audio_seconds":0.0,"details":{}},'
    '"timestamp":"2025-01-02T03:04:05Z","kind":"response"}',
    '{"parts":[{"tool_name":"t","content":"c","tool_call_id":"i","timestamp":"2025-01-02T03:04:05Z",'
    '"part_kind":"tool-return"}],"kind":"request"}',
    # timestamps in forms the SDK does not write but pydantic parses
    '{"parts":[{"content":"x","timestamp":"2025-01-02 03:04:05.5+0530","part_kind":"user-prompt"}],'
    '"timestamp":1700000000,"kind":"request"}',
    '{"parts":[{"content":"y","timestamp":"2025-01-02","part_kind":"user-prompt"}],'
    '"timestamp":"2025-01-02T03:04:05.123456789z","kind":"request"}',
    # keys in another order
    '{"kind":"request","parts":[{"part_kind":"user-prompt","timestamp":"2025-01-02T03:04:05Z","content":"z"}]}',
]


def test_legacy_and_hand_written_rows_decode_like_the_adapter() -> None:
    flags = [m is not None for m in build_messages(LEGACY_ROWS)]
    assert flags == [False, False, False, True, True, True, True, True]
    assert_decodes_like_the_adapter(LEGACY_ROWS)


@pytest.mark.parametrize(
    "row",
    [
        '{"parts":[],"kind":"request"',  # truncated JSON
        "[1]",
        "42",
        '{"parts":[],"kind":"letter"}',
        '{"parts":"nope","kind":"request"}',
        '{"parts":[{"content":"x","timestamp":"yesterday","part_kind":"user-prompt"}],"kind":"request"}',
        '{"parts":[{"content":"x","timestamp":"2025-02-30T00:00:00Z","part_kind":"user-prompt"}],"kind":"request"}',
        '{"parts":[{"content":1,"timestamp":"2025-01-02T03:04:05Z","part_kind":"user-prompt"}],"kind":"request"}',
        '{"parts":[],"kind":"request","state":"weird"}',
        '{"parts":[{"content":"x","part_kind":"text"}],"usage":{"input_tokens":"many","details":{}},'
        '"timestamp":"2025-01-02T03:04:05Z","kind":"response"}',
        '{"parts":[{"content":"x","part_kind":"text"}],"usage":{"cost":"lots","details":{}},'
        '"timestamp":"2025-01-02T03:04:05Z","kind":"response"}',
        '{"parts":[{"tool_name":"t","content":"c","tool_call_id":"i","timestamp":"2025-01-02T03:04:05Z",'
        '"outcome":"exploded","part_kind":"tool-return"}],"kind":"request"}',
        '{"parts":[{"tool_name":"t","content":[1],"tool_call_id":"i","timestamp":"2025-01-02T03:04:05Z",'
        '"part_kind":"tool-return","content_file_digests":[1]}],"kind":"request"}',
    ],
)
def test_a_bad_row_fails_exactly_as_the_adapter_fails(row: str) -> None:
    good = serialize_messages(FAST_MESSAGES[:2])
    rows = [*good, row]
    with pytest.raises(ValidationError) as expected:
        reference(rows)
    with pytest.raises(ValidationError) as got:
        decode_messages(rows)
    # the same complaints about the same fields (the row's index differs: only it went to the adapter)
    assert [(e["type"], e["loc"][1:]) for e in got.value.errors()] == [
        (e["type"], e["loc"][1:]) for e in expected.value.errors()
    ]


def test_the_collector_is_left_as_it_was() -> None:
    rows = serialize_messages(FAST_MESSAGES)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    decoded = decode_messages(rows * 50)
    young = gc.get_count()[0]
    assert gc.isenabled() and gc.get_freeze_count() == 0  # nothing left frozen
    # the thousands of objects built are not waiting for a young-generation pass
    assert young < 100 and gc.is_tracked(decoded[0]) and len(decoded) == 50 * len(rows)
    gc.freeze()  # objects the process froze itself stay frozen
    try:
        frozen = gc.get_freeze_count()
        decode_messages(rows)
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        decode_messages(rows)
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(ValidationError):
        decode_messages(["{}"])
    assert gc.isenabled()


# ---------------------------------------------------------------- generated histories

_text = st.text(max_size=40)
_opt_text = st.none() | _text
_keys = st.text(min_size=1, max_size=8)
_json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text
_json = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys | st.just("kind"), inner, max_size=3),
    max_leaves=8,
)
_json_dicts = st.dictionaries(_keys, _json, max_size=3)
_opt_dict = st.none() | _json_dicts
_zones = st.none() | st.just(timezone.utc) | st.integers(-23 * 60 - 59, 23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
_times = st.builds(
    lambda dt, tz: dt.replace(tzinfo=tz),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    _zones,
)
_ids = st.text(min_size=1, max_size=12)
_retry_info = st.builds(
    RetryInfo,
    st.sampled_from(["validation_error", "model_retry", "unknown_tool", "unavailable_tool"]),
    attempt=st.none() | st.integers(0, 5),
    max_retries=st.none() | st.integers(0, 5),
)
_request_parts = st.one_of(
    st.builds(
        SystemPromptPart,
        _text,
        timestamp=_times,
        dynamic_ref=_opt_text,
        context_id=_opt_text,
        scope=st.sampled_from(["conversation", "request"]),
        metadata=_opt_dict,
    ),
    st.builds(UserPromptPart, _text, timestamp=_times),
    st.builds(
        UserPromptPart,
        st.lists(_text | st.builds(ImageUrl, st.just("https://example.com/i.png")), min_size=1, max_size=2),
        timestamp=_times,
    ),
    st.builds(
        ToolReturnPart,
        _text,
        _json,
        _ids,
        metadata=_json,
        timestamp=_times,
        outcome=st.sampled_from(["success", "failed", "denied", "interrupted", "retried"]),
        retry=st.none() | _retry_info,
    ),
    st.builds(
        RetryFeedbackPart,
        _text,
        retry=st.builds(RetryInfo, st.sampled_from(["validation_error", "no_output", "model_retry"])),
        timestamp=_times,
    ),
)
_response_parts = st.one_of(
    st.builds(TextPart, _text, id=_opt_text, provider_name=_opt_text, provider_details=_opt_dict),
    st.builds(
        ThinkingPart,
        _text,
        id=_opt_text,
        signature=_opt_text,
        provider_name=_opt_text,
        provider_details=_opt_dict,
    ),
    st.builds(
        ToolCallPart,
        _text,
        st.none() | _text | _json_dicts,
        _ids,
        id=_opt_text,
        provider_name=_opt_text,
        provider_details=_opt_dict,
        tool_kind=st.none() | st.just("inventory.lookup"),
    ),
    st.builds(
        NativeToolCallPart, _text, st.none() | _json_dicts, _ids, provider_name=_opt_text, provider_details=_opt_dict
    ),
    st.builds(
        NativeToolReturnPart,
        _text,
        _json,
        _ids,
        timestamp=_times,
        outcome=st.sampled_from(["success", "failed"]),
        provider_name=_opt_text,
        provider_details=_opt_dict,
    ),
)
_counts = st.integers(0, 2**40)
_usage = st.builds(
    RequestUsage,
    input_tokens=_counts,
    output_tokens=_counts,
    cache_read_tokens=_counts,
    cache_write_tokens=_counts,
    details=st.dictionaries(_keys, _counts, max_size=2),
    cost=st.none() | st.decimals(allow_nan=False, allow_infinity=False, places=6, min_value=-10, max_value=10**6),
    audio_seconds=st.floats(0, 100),
)
_messages = st.one_of(
    st.builds(
        ModelRequest,
        st.lists(_request_parts, max_size=4),
        timestamp=st.none() | _times,
        instructions=_opt_text,
        run_id=_opt_text,
        conversation_id=_opt_text,
        metadata=_opt_dict,
        state=st.sampled_from(["complete", "interrupted"]),
    ),
    st.builds(
        ModelResponse,
        st.lists(_response_parts, max_size=4),
        usage=_usage,
        model_name=_opt_text,
        timestamp=_times,
        provider_name=_opt_text,
        provider_details=_opt_dict,
        provider_response_id=_opt_text,
        finish_reason=st.none() | st.sampled_from(["stop", "length", "content_filter", "tool_call", "error"]),
        metadata=_opt_dict,
        state=st.sampled_from(["complete", "incomplete", "suspended", "interrupted"]),
    ),
)


@pytest.mark.parametrize("part", range(3))  # 3 x 100 = the 300 examples, as three tests parallel workers can share
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(_messages, min_size=1, max_size=6))
def test_generated_histories_decode_exactly_like_the_adapter(part: int, history: list[ModelMessage]) -> None:
    rows = serialize_messages(history)
    decoded = assert_decodes_like_the_adapter(rows)
    assert serialize_messages(decoded) == rows
    assert_left_out_fields_come_back(history)
    assert_decodes_like_the_adapter(sdk_rows(history))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789-:.TZz+ ", max_size=32) | _times.map(lambda t: t.isoformat()))
def test_timestamps_parse_as_the_adapter_parses_them(text: str) -> None:
    row = json.dumps({"parts": [{"content": "x", "timestamp": text, "part_kind": "user-prompt"}], "kind": "request"})
    try:
        expected = snapshot(reference([row]))
    except ValidationError:
        with pytest.raises(ValidationError):
            decode_messages([row])
        return
    assert snapshot(decode_messages([row])) == expected


def test_field_lists_cover_every_dataclass_field() -> None:
    """The decoder builds ``__dict__`` itself: a field it did not know of would be missing."""
    for shape in history_codec._SHAPES:
        assert shape.names == [f.name for f in dataclasses.fields(shape.cls)]


# ---------------------------------------------------------------- post-init hooks

from pydantic_core import SchemaValidator  # noqa: E402
from pydantic_core import core_schema as cs  # noqa: E402


def test_the_sdk_hooks_that_only_add_constants_are_replaced_by_the_constants() -> None:
    """On the installed SDK these hooks change nothing in a decoded message but a tool call's
    ``otel_metadata = None``; the shapes set that themselves, the rest of the hooks run."""
    skipped = {shape.cls.__name__ for shape in history_codec._SHAPES if shape.post_init_skipped}
    assert skipped == {"UserPromptPart", "ToolCallPart", "NativeToolCallPart", "ModelRequest", "ModelResponse"}
    decoded = decode_messages(serialize_messages(FAST_MESSAGES))
    calls = [part for message in decoded for part in message.parts if isinstance(part, ToolCallPart | NativeToolCallPart)]
    assert calls and all(list(vars(part))[-1] == "otel_metadata" and part.otel_metadata is None for part in calls)


@dataclasses.dataclass
class _Bag:
    items: list[str]
    label: str = "bag"


@dataclasses.dataclass
class _AddsConstant(_Bag):
    def __post_init__(self) -> None:
        self.cache_key = None
        self.version = 2


@dataclasses.dataclass
class _ReplacesField(_Bag):
    def __post_init__(self) -> None:
        self.items = [item.strip() for item in self.items]


@dataclasses.dataclass
class _RewritesItems(_Bag):
    def __post_init__(self) -> None:
        for index, item in enumerate(self.items):
            self.items[index] = item.upper()


@dataclasses.dataclass
class _Refuses(_Bag):
    def __post_init__(self) -> None:
        if not self.items:
            raise ValueError("empty bag")


@dataclasses.dataclass
class _AddsMutable(_Bag):
    def __post_init__(self) -> None:
        self.seen: set[str] = set()


@dataclasses.dataclass
class _AddsDerived(_Bag):
    def __post_init__(self) -> None:
        self.count = len(self.items)


_BAG_PROBES = lambda: [{"items": []}, {"items": ["a", "b"], "label": "x"}]  # noqa: E731


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        (_AddsConstant, {"cache_key": None, "version": 2}),
        (_ReplacesField, None),
        (_RewritesItems, None),
        (_Refuses, None),
        (_AddsMutable, None),
        (_AddsDerived, None),  # a different value per probe: not a constant
    ],
)
def test_a_hook_is_replaced_only_when_every_probe_shows_it_adding_the_same_constants(cls: type, expected: Any) -> None:
    assert history_codec._post_init_constants(cls, _BAG_PROBES) == expected
    assert history_codec._post_init_constants(cls, None) is None  # no probes: the hook runs


def _bag_validator(cls: type) -> tuple[history_codec._Shape, SchemaValidator]:
    fields = [("items", "list[str]", history_codec._REQUIRED, cs.list_schema(cs.str_schema())), ("label", "str", "bag", cs.str_schema())]
    shape = history_codec._Shape(cls, fields, _BAG_PROBES)
    return shape, SchemaValidator(shape.schema)


def test_a_replaced_hook_still_leaves_what_it_would_have_added_and_a_working_hook_still_runs() -> None:
    shape, validator = _bag_validator(_AddsConstant)
    assert shape.post_init_skipped
    bag = validator.validate_json('{"items": ["a"]}')
    assert vars(bag) == {"items": ["a"], "label": "bag", "cache_key": None, "version": 2}
    assert list(vars(bag)) == list(vars(_AddsConstant(["a"])))

    shape, validator = _bag_validator(_ReplacesField)
    assert not shape.post_init_skipped
    assert validator.validate_json('{"items": [" a "]}').items == ["a"]

    shape, validator = _bag_validator(_Refuses)
    assert not shape.post_init_skipped
    with pytest.raises(ValidationError, match="empty bag"):
        validator.validate_json('{"items": []}')

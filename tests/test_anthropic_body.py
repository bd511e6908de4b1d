"""``providers/anthropic_body.py``: a plain JSON body is serialized once, and the request is the same.

Each case sends one ``beta.messages.create`` through the SDK's own ``AsyncAnthropic`` and through
``OnceEncodedAnthropic`` to a mock transport, and compares what would have crossed the wire: the
body bytes and the headers (the idempotency key, random per request, aside). Bodies the SDK's copy
changes (a nested ``Omit``, a tuple, a date, a pydantic model, a generator, a NaN, a cycle) must
take the SDK's own path, with the same outcome, and a retry must send the same bytes again.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

import anthropic._base_client as base_client
import httpx2
import pydantic
import pytest
from anthropic import AsyncAnthropic, omit
from anthropic.lib._stainless_helpers import carry_helper_tag, tag_helper
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ketch.providers import anthropic_body
from ketch.providers.anthropic_body import OnceEncodedAnthropic

_REPLY = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
_VOLATILE = {"idempotency-key", "x-stainless-retry-count", "x-stainless-read-timeout", "x-stainless-timeout"}


class _Wire:
    """A mock transport: records each request's body bytes and headers; answers 529 ``fail`` times first."""

    def __init__(self, fail: int = 0) -> None:
        self.sent: list[tuple[bytes, dict[str, str]]] = []
        self.fail = fail

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append((request.read(), {k: v for k, v in request.headers.items() if k not in _VOLATILE}))
        if self.fail:
            self.fail -= 1
            return httpx2.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
        return httpx2.Response(200, json=_REPLY)


def _client(cls: type[AsyncAnthropic], wire: _Wire) -> AsyncAnthropic:
    return cls(api_key="sk-test", base_url="http://127.0.0.1:9", max_retries=2,
               http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(wire)))


async def _send(cls: type[AsyncAnthropic], params: dict[str, Any], fail: int = 0) -> tuple[_Wire, BaseException | None]:
    wire = _Wire(fail)
    client = _client(cls, wire)
    try:
        await client.beta.messages.create(**params)
    except Exception as error:  # noqa: BLE001 - the outcome is compared between the two clients
        return wire, error
    finally:
        await client.close()
    return wire, None


def _messages(*blocks: Any) -> list[Any]:
    return [
        {"role": "user", "content": "Read the file."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "x\n" * 50}]}, *blocks]},
    ]


def _tagged() -> Any:
    """An object an SDK helper made (its tag rides on what is built from it)."""
    class Made:
        pass

    made = Made()
    tag_helper(made, "BetaToolRunner")
    return made


class _Source(pydantic.BaseModel):
    type: str = "text"
    text: str = "from a model"


def _counting_prepares(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The bodies the SDK's own copy was asked to prepare (``async_prepare_request_data``)."""
    seen: list[Any] = []
    original = base_client.async_prepare_request_data

    async def counting(data: Any, *, location: Any, keep_top_level_omit: bool = False) -> Any:
        if location == "body" and data is not None:
            seen.append(data)
        return await original(data, location=location, keep_top_level_omit=keep_top_level_omit)

    monkeypatch.setattr(base_client, "async_prepare_request_data", counting)
    return seen


_PLAIN = {
    "max_tokens": 4096, "model": "claude-sonnet-4-5", "messages": _messages(),
    "system": [{"type": "text", "text": "You are ketch. ✓ ünïcode \u2028 «quotes» \"q\" \\ \t"}],
    "tools": [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "stream": False,
}

_CASES: dict[str, dict[str, Any]] = {
    "plain": _PLAIN,
    "top-level omit and an extra body": {**_PLAIN, "tool_choice": omit, "extra_body": {"temperature": 0.5, "system": omit, "top_k": 3}},
    "extra body replaces a key": {**_PLAIN, "extra_body": {"max_tokens": 10, "messages": _messages({"type": "text", "text": "extra"})}},
    "nested omit": {**_PLAIN, "messages": _messages({"type": "text", "text": "t", "cache_control": omit})},
    "a tuple": {**_PLAIN, "messages": _messages({"type": "text", "text": "t", "citations": ()}), "stop_sequences": ("END",)},
    "a date": {**_PLAIN, "metadata": {"user_id": dt.date(2026, 12, 1)}},
    "a pydantic model": {**_PLAIN, "messages": _messages(_Source())},
    "a generator": {**_PLAIN, "messages": (m for m in _messages())},
    "a set": {**_PLAIN, "stop_sequences": {"END"}},
    "a dict subclass": {**_PLAIN, "messages": [type("Tagged", (dict,), {})(m) for m in _messages()]},
    "a tagged message": {**_PLAIN, "messages": [*_messages()[:2], carry_helper_tag(_tagged(), _messages()[2])]},
    "a tagged block": {**_PLAIN, "messages": _messages(carry_helper_tag(_tagged(), {"type": "text", "text": "t"}))},
    "a message that is not a dict": {**_PLAIN, "messages": [*_messages()[:2], _Source(type="user", text="x")]},
    "int keys": {**_PLAIN, "metadata": {1: "one", 2.5: "x", None: "n", False: "f"}},
    "a big int": {**_PLAIN, "metadata": {"user_id": 10**30}},
    "a nan": {**_PLAIN, "extra_body": {"temperature": math.nan}},
    "an infinity": {**_PLAIN, "messages": _messages({"type": "text", "text": "t", "x": -math.inf})},
    "a lone surrogate": {**_PLAIN, "system": "bad \ud800 text"},
    "bytes": {**_PLAIN, "system": b"bytes"},
}


_REJECTED = {"a set", "a nan", "an infinity", "a lone surrogate", "bytes"}
"""Bodies the SDK refuses before sending (its encoder raises); the rest are sent."""


@pytest.mark.parametrize("name", list(_CASES))
async def test_the_request_is_the_same_as_the_sdks(name: str) -> None:
    sdk, sdk_error = await _send(AsyncAnthropic, dict(_CASES[name]))
    once, once_error = await _send(OnceEncodedAnthropic, dict(_CASES[name]))
    assert type(once_error) is type(sdk_error), (once_error, sdk_error)
    assert once.sent == sdk.sent
    if name not in _REJECTED:
        assert sdk_error is None and len(once.sent) == 1, sdk_error


def _cyclic() -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": "t"}
    block["self"] = block
    return {**_PLAIN, "messages": _messages(block)}


async def test_a_cycle_is_the_sdks_error() -> None:
    _, sdk_error = await _send(AsyncAnthropic, _cyclic())
    _, once_error = await _send(OnceEncodedAnthropic, _cyclic())
    assert isinstance(sdk_error, ValueError) and type(once_error) is type(sdk_error)
    assert str(once_error) == str(sdk_error)


async def test_a_plain_body_skips_the_sdks_copy_and_others_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    copied = _counting_prepares(monkeypatch)
    await _send(OnceEncodedAnthropic, dict(_PLAIN))
    assert copied == [], "a plain body was still copied"
    await _send(OnceEncodedAnthropic, dict(_CASES["nested omit"]))
    assert len(copied) == 1, "a body with a nested Omit must take the SDK's copy"
    await _send(AsyncAnthropic, dict(_PLAIN))
    assert len(copied) == 2


async def test_the_helper_tag_scan_sees_only_messages_that_can_carry_a_tag(monkeypatch: pytest.MonkeyPatch) -> None:
    import anthropic.resources.beta.messages.messages as beta_messages

    scanned: list[int] = []
    original = beta_messages._stainless_helper_header

    def counting(tools: Any = None, messages: Any = None) -> dict[str, str]:
        scanned.append(len(list(messages or [])))
        return original(tools, messages)

    monkeypatch.setattr(beta_messages, "_stainless_helper_header", counting)
    await _send(OnceEncodedAnthropic, dict(_PLAIN))
    assert scanned == [0], "plain messages were scanned for helper tags"
    tagged, _ = await _send(OnceEncodedAnthropic, dict(_CASES["a tagged block"]))
    assert scanned == [0, 3]
    assert tagged.sent[0][1].get("x-stainless-helper") == "BetaToolRunner"


async def test_a_retry_sends_the_same_bytes_again() -> None:
    once, error = await _send(OnceEncodedAnthropic, dict(_PLAIN), fail=2)
    sdk, _ = await _send(AsyncAnthropic, dict(_PLAIN), fail=2)
    assert error is None
    assert len(once.sent) == 3 and once.sent[0] == once.sent[1] == once.sent[2]
    assert once.sent == sdk.sent


async def test_a_body_changed_after_the_call_does_not_change_a_retry() -> None:
    """The bytes are fixed when the request is prepared, as the SDK's copy is."""
    params = dict(_PLAIN, messages=_messages())
    wire = _Wire(fail=1)
    client = _client(OnceEncodedAnthropic, wire)
    real = wire.__call__

    def mutate_then_answer(request: httpx2.Request) -> httpx2.Response:
        response = real(request)
        params["messages"][0]["content"] = "changed while waiting"
        return response

    client._client._transport = httpx2.MockTransport(mutate_then_answer)  # noqa: SLF001 - the same client, a mutating wire
    await client.beta.messages.create(**params)
    await client.close()
    assert len(wire.sent) == 2 and wire.sent[0] == wire.sent[1]
    assert b"changed while waiting" not in wire.sent[1][0]


async def test_a_span_that_could_pass_on_its_context_takes_the_sdks_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a current span (ketch's own tracing on), the SDK's call span passes its context on
    (``traceparent``) and reads the body: the SDK's own path, and the same headers."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("ketch-test")  # a provider of its own, as ketch's telemetry has
    copied = _counting_prepares(monkeypatch)
    with tracer.start_as_current_span("ketch.turn"):
        assert trace.get_current_span().get_span_context().is_valid
        once, _ = await _send(OnceEncodedAnthropic, dict(_PLAIN))
        assert len(copied) == 1, "the body was not prepared by the SDK inside a span"
        sdk, _ = await _send(AsyncAnthropic, dict(_PLAIN))
    assert "traceparent" in once.sent[0][1]
    strip = [(body, {k: v for k, v in headers.items() if k != "traceparent"}) for body, headers in once.sent + sdk.sent]
    assert strip[0] == strip[1]
    copied.clear()
    await _send(OnceEncodedAnthropic, dict(_PLAIN))
    assert copied == [], "outside the span the plain body takes the fast path again"


async def test_middleware_takes_the_sdks_path(monkeypatch: pytest.MonkeyPatch) -> None:
    copied = _counting_prepares(monkeypatch)
    wire = _Wire()
    client = _client(OnceEncodedAnthropic, wire)
    monkeypatch.setattr(client, "_middleware", (object(),))
    prepared = await client._copy_and_prepare(base_client.FinalRequestOptions.model_construct(  # noqa: SLF001
        method="post", url="/v1/messages", json_data={"model": "m", "messages": []}))
    assert copied and prepared.content is None and prepared.json_data == {"model": "m", "messages": []}
    await client.close()


async def test_the_off_switch_takes_the_sdks_path(monkeypatch: pytest.MonkeyPatch) -> None:
    copied = _counting_prepares(monkeypatch)
    monkeypatch.setenv("KETCH_SDK_FASTPATHS", "0")
    await _send(OnceEncodedAnthropic, dict(_PLAIN))
    assert len(copied) == 1


def test_usable_checks_what_it_relies_on() -> None:
    assert anthropic_body.usable()

    class Renamed(AsyncAnthropic):
        _copy_and_prepare = None  # type: ignore[assignment]

    class Reshaped(AsyncAnthropic):
        async def _copy_and_prepare(self, options: Any, extra: Any = None) -> Any:  # type: ignore[override]
            return options

    class NoBeta(AsyncAnthropic):
        beta = None  # type: ignore[assignment]

    assert not anthropic_body.usable(Renamed)
    assert not anthropic_body.usable(Reshaped)
    assert not anthropic_body.usable(NoBeta)
    assert anthropic_body.untaggable([{"role": "user", "content": "x"}, {"role": "user", "content": [{"type": "text"}]}])
    assert not anthropic_body.untaggable(({"role": "user", "content": "x"},))
    assert not anthropic_body.untaggable([{"role": "user", "content": [carry_helper_tag(_tagged(), {"type": "text"})]}])


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from([omit, dt.date(2026, 1, 2)]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=5), inner, max_size=4),
    ),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extra=st.dictionaries(st.sampled_from(["metadata", "x", "messages", "system", "y"]), _values, max_size=3))
def test_any_body_is_sent_as_the_sdk_would(extra: dict[str, Any]) -> None:
    """Generated bodies (plain or not, with Omit, tuples, dates, NaN anywhere): the same bytes, or the same error."""
    import asyncio

    async def both() -> None:
        params = {**_PLAIN, "extra_body": extra}
        sdk, sdk_error = await _send(AsyncAnthropic, dict(params))
        once, once_error = await _send(OnceEncodedAnthropic, dict(params))
        assert type(once_error) is type(sdk_error)
        assert once.sent == sdk.sent
        if once.sent:
            json.loads(once.sent[0][0])

    asyncio.run(both())

"""An Anthropic client that serializes a plain JSON request body once, instead of copying it first.

Before every request the anthropic SDK (2.15) copies the whole body (``_copy_and_prepare`` →
``async_prepare_request_data`` → ``copy_tree``, an explicit-stack walk in Python) so that a retry
can send it again: it drops ``Omit``/``NotGiven`` entries, turns tuples, sets and iterators into
lists, dumps pydantic models, formats dates and reads file inputs. Then ``_build_request``
serializes the copy (``openapi_dumps``). On a long history the copy is the largest single cost
of building an Anthropic request (about 12 ms of a step at 1,000 steps, growing with the
history), and for the body pydantic-ai builds it changes nothing: that body is plain JSON data
(dicts, lists, strings, numbers, booleans, ``None``) below its top level.

:class:`OnceEncodedAnthropic` merges ``extra_body`` into the body and drops its top-level
``Omit``/``NotGiven`` entries as the SDK does, then serializes it with the SDK's own encoder
settings but no ``default`` hook, so that any value the copy would have changed (a nested
``Omit``, a pydantic model, a date, a set, an iterator, a file input, a cycle, a NaN) makes the
encoding fail; then the SDK's own ``_copy_and_prepare`` runs as it is. Otherwise the bytes are
handed to the SDK as the request's ``content``, which ``_build_request`` sends as they are: the
same bytes ``openapi_dumps`` makes of the copy, sent again unchanged by a retry. The query
parameters are still prepared by the SDK. The messages a body shares with the one before it are
not encoded again (``encoded_items``): their text is reused, position by position, while each is
unchanged.

Before that, ``beta.messages.create`` looks at every message and content block of the history
for an SDK helper's telemetry tag (``x-stainless-helper``, ``collect_helpers``: about 3 ms a step
at 1,000 steps). A tag is an attribute set on the object, which a plain ``dict`` cannot take, so
when every message and block is exactly a ``dict`` (checked by type, in C) the messages are handed
to ``create`` as ``extra_body`` (public SDK API: merged into the body at the same key) and
``create`` scans an empty list: the header and the body come out the same.

Not used when the request's OpenTelemetry call span could record or pass on a trace context
(a tracer provider is set, or a span is current), nor with middleware: both read the body as
data. Nor for a GET, a multipart request or one that already has ``content``.
:func:`usable` checks what this relies on in the SDK; ``build_model`` uses ``AsyncAnthropic``
otherwise, or with ``KETCH_SDK_FASTPATHS=0``. ``tests/test_step_cost_equivalence.py`` compares
the bodies of a whole session with and without it, and ``tests/test_anthropic_body.py`` the
bytes of single requests. The upstream fix would be the same in the SDK: skip the copy for a
body that serializes without the encoder's ``default``.
"""

from __future__ import annotations

import inspect
import json
from functools import cached_property
from typing import Any

from anthropic import AsyncAnthropic
from anthropic._types import NotGiven, Omit
from anthropic._utils import _json as sdk_json
from anthropic.resources.beta import AsyncBeta
from anthropic.resources.beta.messages import AsyncMessages as AsyncBetaMessages

from ketch.providers.encoded_items import ItemEncodings, encoded_body, merged_body
from ketch.providers.history_scans import enabled

_OPTION_FIELDS = ("method", "json_data", "extra_json", "content", "files")


class _PlainJSON(json.JSONEncoder):
    """The SDK's encoder settings without its ``default``: anything but plain JSON data fails."""

    def default(self, o: Any) -> Any:
        raise TypeError(f"not plain JSON: {type(o).__name__}")


def _plain_encoder() -> _PlainJSON | None:
    sdk = getattr(sdk_json, "encoder", None)
    if not isinstance(sdk, json.JSONEncoder) or sdk.indent is not None or sdk.sort_keys:
        return None
    return _PlainJSON(
        ensure_ascii=sdk.ensure_ascii,
        allow_nan=sdk.allow_nan,
        separators=(sdk.item_separator, sdk.key_separator),
    )


_ENCODER = _plain_encoder()


def usable(cls: type = AsyncAnthropic) -> bool:
    """Whether the SDK still prepares a request the way this relies on (anthropic 2.15): a
    ``_copy_and_prepare(options)`` coroutine, a ``_tracer`` and ``_middleware``, options with
    ``json_data``/``extra_json``/``content``/``files``, and a JSON encoder to take settings from."""
    method = getattr(cls, "_copy_and_prepare", None)
    if _ENCODER is None or method is None or not inspect.iscoroutinefunction(method):
        return False
    if list(inspect.signature(method).parameters) != ["self", "options"]:
        return False
    if not isinstance(getattr(cls, "_tracer", None), property):
        return False
    try:
        from anthropic._models import FinalRequestOptions
    except ImportError:
        return False
    fields = getattr(FinalRequestOptions, "model_fields", {})
    if not all(name in fields for name in _OPTION_FIELDS):
        return False
    if not isinstance(inspect.getattr_static(cls, "beta", None), cached_property):
        return False
    if not isinstance(inspect.getattr_static(AsyncBeta, "messages", None), cached_property):
        return False
    create = inspect.signature(AsyncBetaMessages.create).parameters
    return all(name in create and create[name].kind is inspect.Parameter.KEYWORD_ONLY for name in ("messages", "extra_body"))


def untaggable(messages: Any) -> bool:
    """Whether no message and no content block of ``messages`` can carry an SDK helper tag: a list
    of exactly ``dict``s whose ``content`` is a string or a list of exactly ``dict``s."""
    if type(messages) is not list or {type(message) for message in messages} - {dict}:
        return False
    blocks = {type(block) for message in messages if type(content := message.get("content")) is list for block in content}
    return not blocks - {dict}


class _BetaMessages(AsyncBetaMessages):
    async def create(self, *, messages: Any, extra_body: Any = None, **params: Any) -> Any:  # type: ignore[override]
        if enabled() and untaggable(messages) and (extra_body is None or (type(extra_body) is dict and "messages" not in extra_body)):
            return await super().create(messages=[], extra_body={**(extra_body or {}), "messages": messages}, **params)
        return await super().create(messages=messages, extra_body=extra_body, **params)


class _Beta(AsyncBeta):
    @cached_property
    def messages(self) -> AsyncBetaMessages:  # type: ignore[override]
        return _BetaMessages(self._client)


def encoded_plain_body(json_data: Any, extra_json: Any, messages: ItemEncodings | None = None) -> bytes | None:
    """The bytes the SDK would send for this body, when it is plain JSON data below its top
    level (what its copy would leave unchanged); None when it is not. ``messages``: the text of
    the messages the last body sent, reused where a message is unchanged (``encoded_items``)."""
    body = merged_body(json_data, extra_json, (NotGiven, Omit))
    if body is None:
        return None
    if messages is not None:
        return encoded_body(_ENCODER, body, "messages", messages)  # type: ignore[arg-type]
    try:
        return _ENCODER.encode(body).encode()  # type: ignore[union-attr]
    except (TypeError, ValueError, RecursionError):  # a value the SDK's copy would change, or reject
        return None


class OnceEncodedAnthropic(AsyncAnthropic):
    """``AsyncAnthropic`` that serializes a plain JSON body once instead of copying it first."""

    @cached_property
    def beta(self) -> AsyncBeta:  # type: ignore[override]
        return _Beta(self)

    @property
    def user_agent(self) -> str:
        """The SDK's own (it names the client class: this one must not show on the wire)."""
        return f"{AsyncAnthropic.__name__}/Python {self._version}"

    @cached_property
    def _message_encodings(self) -> ItemEncodings:
        return ItemEncodings(_ENCODER)  # type: ignore[arg-type]

    async def _copy_and_prepare(self, options: Any) -> Any:
        if (
            not enabled()
            or options.method.lower() == "get"
            or options.content is not None
            or options.files is not None
            or self._middleware
            or not self._spans_are_off()
        ):
            return await super()._copy_and_prepare(options)
        content = encoded_plain_body(options.json_data, options.extra_json, self._message_encodings)
        if content is None:
            return await super()._copy_and_prepare(options)
        prepared = await super()._copy_and_prepare(options.model_copy(update={"json_data": None, "extra_json": None}))
        prepared.content = content
        return prepared

    def _spans_are_off(self) -> bool:
        """Whether this request's call span would be dropped unread: the client has no tracer, or
        its tracer is OpenTelemetry's proxy with no provider behind it and no span is current (the
        SDK then drops the non-recording, context-less span it starts before it records or
        propagates anything). With a provider, or inside a span whose context it would pass on,
        the SDK reads the body for the span, so it keeps its own path."""
        if self._tracer is None:
            return True
        options = getattr(self, "_open_telemetry", None)
        if not isinstance(options, dict) or options.get("tracer_provider") is not None:
            return False
        from opentelemetry import trace

        return type(trace.get_tracer_provider()) is trace.ProxyTracerProvider \
            and not trace.get_current_span().get_span_context().is_valid


__all__ = ["OnceEncodedAnthropic", "encoded_plain_body", "untaggable", "usable"]

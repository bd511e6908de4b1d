"""An OpenAI client that sends the Responses ``input`` list without re-walking it.

The openai SDK runs every request's parameters through ``async_maybe_transform``, which
walks each value against its TypedDict annotation to apply key aliases and value formats.
For ``input`` that annotation is a union of some twenty item types, and the SDK walks each
item against every member: on a long history it is most of a step's CPU (on 1,000 steps,
about 80 %), and grows with the history although nothing in it needs transforming: no
Responses input item type declares an alias or a format (``PropertyInfo(alias=…)`` or
``format=…``), and pydantic-ai builds the items as plain JSON-ready dicts.

``PassthroughOpenAI.responses.create`` therefore hands ``input`` (and ``tools``, a union of
tool types walked the same way, with no alias or format either) to the SDK as
``extra_body`` (public SDK API: merged into the JSON body as it is) and lets the transform
walk only the other, scalar parameters. The bytes on the wire are the same, save the key
order (tested). The upstream fix would be the same in the SDK: skip the walk for a type
whose members declare no alias or format (decidable once per type and cached).

The body's ``input`` items that a request shares with the one before it are not serialized again
(``encoded_items``): the client hands the SDK the body's bytes, made with ``openapi_dumps``'
settings, the items' text reused position by position while each is unchanged; the SDK sends
bytes it is given as they are. A body that is not plain JSON data is left to the SDK's encoder.

The same client also skips the SDK's parsing of the tools each response echoes back. Every
status event of a Responses stream (``response.created``, ``response.in_progress``, the terminal
``response.completed``, ...) carries the whole ``Response``, whose ``tools`` repeats the request's
tool schemas; the SDK validates each event against the union of all event types, and those schemas
against the union of all tool types: about 2 ms an event with ketch's eighteen tools, three events
a step, whatever the step does. Nothing reads that echo (pydantic-ai 2.68 takes the status, id,
usage, output, finish and store fields of these events; ketch reads none), so the event is built
with ``tools`` empty. An event without a list of tools there, or of any other type, is parsed as the
SDK parses it.

``KETCH_SDK_FASTPATHS=0`` turns all three off: the client then behaves as ``AsyncOpenAI``.
"""

from __future__ import annotations

import inspect
import json
from functools import cache, cached_property
from typing import Any

from openai import AsyncOpenAI
from openai.resources.responses import AsyncResponses

from ketch.providers.encoded_items import ItemEncodings, encoded_body, merged_body
from ketch.providers.history_scans import enabled


_PASSED = ("input", "tools")
"""Parameters handed over as they are: the history, and the tool schemas (a union of tool
types walked member by member, the same for every request of a session)."""


class _PassthroughResponses(AsyncResponses):
    async def create(self, *, extra_body: Any = None, **params: Any) -> Any:
        if not enabled():  # KETCH_SDK_FASTPATHS=0: the SDK's own transform, as with AsyncOpenAI
            return await super().create(extra_body=extra_body, **params)
        extra = dict(extra_body) if isinstance(extra_body, dict) else {}
        for name in _PASSED:
            value = params.get(name)
            if isinstance(value, list) and name not in extra:
                extra[name] = params.pop(name)
        return await super().create(extra_body=extra or extra_body, **params)


_STATUS_EVENTS = frozenset({
    "response.created", "response.queued", "response.in_progress",
    "response.completed", "response.incomplete", "response.failed",
})
"""The Responses stream events that carry the whole ``Response`` (and with it the echoed tools)."""


def without_echoed_tools(data: Any) -> Any:
    """``data`` as it is, or, for a status event whose response echoes the request's tools, a copy
    whose response has an empty ``tools`` (``data`` itself is not changed)."""
    if not isinstance(data, dict) or not isinstance(data.get("type"), str) or data["type"] not in _STATUS_EVENTS:
        return data
    response = data.get("response")
    if not isinstance(response, dict) or not isinstance(response.get("tools"), list) or not response["tools"]:
        return data
    return {**data, "response": {**response, "tools": []}}


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""``openapi_dumps``' settings (openai 3.57) without its ``default`` hook: it refuses anything that
hook would have turned into JSON (a date, a pydantic model), and the SDK then encodes the body."""


@cache
def _builds_requests_as_expected() -> bool:
    method = getattr(AsyncOpenAI, "_build_request", None)
    return method is not None and list(inspect.signature(method).parameters) == ["self", "options", "retries_taken"]


def _plain_body(options: Any) -> dict[str, Any] | None:
    """The JSON body the SDK would build for ``options`` (``json_data`` merged with ``extra_json``,
    ``Omit`` values dropped, as its ``_build_request`` does), when it is a JSON request with a list of
    Responses input items; None for anything else, which the SDK builds as it is."""
    from openai._types import Omit

    if options.method.lower() == "get" or options.files is not None or options.content is not None:
        return None
    headers = options.headers if isinstance(options.headers, dict) else {}
    if any(key.lower() == "content-type" and value != "application/json" for key, value in headers.items()):
        return None
    body = merged_body(options.json_data, options.extra_json, (Omit,))
    return body if body is not None and type(body.get("input")) is list else None


class PassthroughOpenAI(AsyncOpenAI):
    """``AsyncOpenAI`` whose Responses ``input`` and ``tools`` skip the SDK's parameter transform,
    whose input items a request shares with the one before it are not encoded again, and whose
    stream events skip parsing the tools a response echoes."""

    @cached_property
    def _input_encodings(self) -> ItemEncodings:
        return ItemEncodings(_ENCODER)

    def _build_request(self, options: Any, *args: Any, **kwargs: Any) -> Any:
        if enabled() and _builds_requests_as_expected():
            body = _plain_body(options)
            content = None if body is None else encoded_body(_ENCODER, body, "input", self._input_encodings)
            if content is not None:
                # JSON bytes as the body: the SDK sends them as they are (its ``_build_request``).
                options = options.model_copy(update={"json_data": content, "extra_json": None})
        return super()._build_request(options, *args, **kwargs)

    def _process_response_data(self, *args: Any, **kwargs: Any) -> Any:
        # The SDK (3.57) passes everything by keyword; any other call goes through untouched.
        if "data" in kwargs and enabled():
            kwargs["data"] = without_echoed_tools(kwargs["data"])
        return super()._process_response_data(*args, **kwargs)

    @property
    def user_agent(self) -> str:
        """The SDK's own (it names the client class: this one must not show on the wire)."""
        return f"{AsyncOpenAI.__name__}/Python {self._version}"

    @cached_property
    def responses(self) -> AsyncResponses:  # type: ignore[override]
        return _PassthroughResponses(self)


__all__ = ["PassthroughOpenAI", "without_echoed_tools"]

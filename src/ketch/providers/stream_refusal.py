"""A server that cannot stream tool calls gets its requests without streaming.

llama.cpp's server (before it learnt to) answers a streamed request that offers tools with
HTTP 500 "Cannot use tools with stream"; llama-cpp-python's starts the stream and drops the
connection before the first event. ketch streams every request, and always offers tools, so
on such a server no turn could ever succeed.

When a streamed request that offered tools fails that way before anything of the answer
arrived, :class:`StreamRefusalFallback` sends the same request again without streaming, and
every later request of the connection too (sticky for the process, like
``fallback.ResponsesFallback``), with one notice. The complete response is replayed as
stream events (``CompletedStreamedResponse``), so front ends still show the answer.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelHTTPError, RetryModelRequest
from pydantic_ai.models import CompletedStreamedResponse, Model, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel

from ketch.wire.stream_end import EMPTY_STREAM

_REFUSAL = re.compile(r"(?i)\bstream(?:ing)?\b.*\b(?:tool|function)s?\b|\b(?:tool|function)s?\b.*\bstream(?:ing)?\b")
"""An error text that names both streaming and tools ("Cannot use tools with stream")."""


@dataclass
class StreamSwitch:
    """Process-wide state of one connection: has it stopped streaming?"""

    off: bool = False
    proven: bool = False
    """A streamed request with tools succeeded: the server streams them (no more priming needed)."""


_SWITCHES: dict[str, StreamSwitch] = {}


def switch_for(connection_key: str) -> StreamSwitch:
    """The sticky state of a connection, shared by every session in this process."""
    return _SWITCHES.setdefault(connection_key, StreamSwitch())


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def refuses_streamed_tools(error: BaseException) -> bool:
    """Whether ``error`` is a server refusing to stream a request with tools."""
    if isinstance(error, ModelHTTPError) and not error.in_stream and error.status_code >= 400:
        body = error.body
        text = str(body.get("error", body) if isinstance(body, dict) else body or "")
        return bool(_REFUSAL.search(text))
    return any(EMPTY_STREAM in str(e) for e in _chain(error))


class UnstreamedModel(WrapperModel):
    """Asks the wrapped model for a whole response when the connection stopped streaming."""

    def __init__(self, wrapped: Model, switch: StreamSwitch) -> None:
        super().__init__(wrapped)
        self.switch = switch

    @asynccontextmanager
    async def request_stream(
        self, messages: Any, model_settings: Any, model_request_parameters: Any, run_context: Any = None
    ) -> AsyncIterator[StreamedResponse]:
        if not self.switch.off:
            async with self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context) as stream:
                yield stream
            return
        response = await self.wrapped.request(messages, model_settings, model_request_parameters)
        yield CompletedStreamedResponse(response, model_request_parameters=model_request_parameters, replay_events=True)


@dataclass
class StreamRefusalFallback(AbstractCapability[Any]):
    """Retries a refused streamed request whole, and stops streaming for the connection."""

    switch: StreamSwitch = field(default_factory=StreamSwitch)
    notify: Callable[[str], None] | None = None
    name: str = "the server"

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    def get_wrapper_model(self, model: Model) -> Model | None:
        # Only once streaming is off: other capabilities recognise the model of an attempt by identity.
        return UnstreamedModel(model, self.switch) if self.switch.off else None

    def _handles_model_request_error(self, ctx: Any, request_context: Any) -> bool:
        # Streams are opened before they are handed over (primed) only while a refusal is still possible.
        switch = self.switch
        return not (switch.off or switch.proven) and bool(request_context.model_request_parameters.function_tools)

    async def after_model_request(self, ctx: Any, *, request_context: Any, response: Any) -> Any:
        if not self.switch.off and request_context.model_request_parameters.function_tools:
            self.switch.proven = True
        return response

    async def on_model_request_error(self, ctx: Any, *, request_context: Any, error: Exception) -> Any:
        if self.switch.off or self.switch.proven or not request_context.model_request_parameters.function_tools:
            raise error
        if not refuses_streamed_tools(error):
            raise error
        self.switch.off = True
        if self.notify is not None:
            self.notify(
                f"{self.name} cannot stream answers that may call tools; ketch asks it for whole answers from "
                "now on (the answer appears when it is complete)"
            )
        raise RetryModelRequest()


__all__ = ["StreamRefusalFallback", "StreamSwitch", "UnstreamedModel", "refuses_streamed_tools", "switch_for"]

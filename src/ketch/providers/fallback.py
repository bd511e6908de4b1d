"""Sticky Chat Completions → Responses switch, for the official OpenAI preset only.

Newer OpenAI models reject some request shapes on ``/v1/chat/completions``. When Chat
Completions answers a *shape* rejection (400, 404, 405, 415, 422, 501), the connection
moves to Responses for the rest of the process: no re-probe per step. Retryable
failures (429, 5xx, timeouts) stay with the SDK's own backoff.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelHTTPError, RetryModelRequest

SHAPE_REJECTION_CODES = frozenset({400, 404, 405, 415, 422, 501})


@dataclass
class EndpointSwitch:
    """Process-wide state of one connection: has it moved to Responses?"""

    switched: bool = False
    on_switch: Callable[[], None] | None = None


_SWITCHES: dict[str, EndpointSwitch] = {}


def switch_for(connection_key: str) -> EndpointSwitch:
    """The sticky state for a connection, shared by every session in this process."""
    return _SWITCHES.setdefault(connection_key, EndpointSwitch())


def _is_chat(model: Any) -> bool:
    """Whether ``model`` speaks Chat Completions (a session whose hosted search needs Responses
    was built on Responses already)."""
    from ketch.wire.chat import ChatCompletionsModel

    return isinstance(model, ChatCompletionsModel)


@dataclass
class ResponsesFallback(AbstractCapability[Any]):
    """Sends requests to ``responses_model`` once Chat Completions rejected a request's shape."""

    chat_model: Any = None
    responses_model_factory: Callable[[], Any] | None = None
    state: EndpointSwitch = field(default_factory=EndpointSwitch)
    _responses_model: Any = None

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    def follow_model(self, model: Any, conn: Any) -> None:
        """After ``/model``: serve ``model`` when it is a Chat model of the official OpenAI preset
        (its own connection's switch and Responses model), and nothing otherwise."""
        self._responses_model = None
        if conn is None or not (conn.preset.official_openai and conn.wire == "openai-chat") or not _is_chat(model):
            self.chat_model, self.responses_model_factory = None, None
            return
        from ketch.providers.models import build_model
        from ketch.providers.wiring import connection_key

        self.chat_model = model
        self.responses_model_factory = lambda: build_model(conn, "openai-responses")
        self.state = switch_for(connection_key(conn))

    def _responses(self) -> Any:
        if self._responses_model is None and self.responses_model_factory is not None:
            self._responses_model = self.responses_model_factory()
        return self._responses_model

    def _handles_model_request_error(self, ctx: Any, request_context: Any) -> bool:
        # Only the chat model's requests: the agent opens every other stream lazily, as without it.
        return self.chat_model is not None and request_context.model is self.chat_model

    async def prepare_model_request(self, ctx: Any, request_context: Any) -> Any:
        if self.chat_model is None:
            return request_context
        if self.state.switched and request_context.model is self.chat_model:
            raise RetryModelRequest(self._responses())
        return request_context

    async def on_model_request_error(self, ctx: Any, *, request_context: Any, error: Exception) -> Any:
        if (
            self.chat_model is not None
            and request_context.model is self.chat_model
            and isinstance(error, ModelHTTPError)
            and error.status_code in SHAPE_REJECTION_CODES
        ):
            if not self.state.switched:
                self.state.switched = True
                if self.state.on_switch is not None:
                    self.state.on_switch()
            raise RetryModelRequest(self._responses())
        raise error

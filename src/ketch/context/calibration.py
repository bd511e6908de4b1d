"""Token counts corrected by what the server counted.

ketch estimates a request's tokens as characters / 4 (``context.budget``), which runs 20-40 %
below what a small local model's tokenizer counts (and a little below on hosted models). Every
answer reports the prompt tokens the server counted; :class:`Calibration` keeps the ratio of
that count to ketch's estimate of the same request, per connection and model, and the budget
of the next request is the estimate times that ratio.

The ratio is the largest of the last :data:`KEEP` observations (what a request holds, prose,
code or JSON, tokenizes differently, and a count that runs low is what overflows a window),
and never below 1: a server whose count runs below the estimate only keeps more headroom.

Where the server can count a request itself (llama.cpp ``POST /tokenize``, Anthropic
``POST /v1/messages/count_tokens``), the compactor asks it before the first answer has reported
a count, and whenever a request is close to the limit until then; a count that fails or takes
too long leaves the estimate as it was, and a server whose count failed is not asked again.
Once an answer has reported its prompt tokens, those alone set the ratio: ``/tokenize`` counts
ketch's own rendering of the request (tool schemas as JSON), and a chat template may send less
(llama-server's ChatML template for Gemma 3 sends no tool schemas: it counted 0.43 of ketch's
estimate at 8k where ``/tokenize`` said more than 1, and the history's room came out as none).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.capabilities import AbstractCapability

KEEP = 8
"""Observations the running ratio is taken over."""

MIN_ESTIMATE = 64
"""Requests estimated below this many tokens say too little about the ratio to count."""

MAX_RATIO = 4.0
"""The most the estimate is ever multiplied by (a server reporting nonsense must not starve the history)."""

COUNT_TIMEOUT = 2.0
"""Seconds a server's own count (``/tokenize``) may take before the estimate is used instead."""

Counter = Callable[[str, Any], Awaitable[int | None]]
"""``await counter(instructions, request_context)``: the server's token count of the request, or None."""


@dataclass
class Calibration:
    """The running ratio of server-counted to estimated prompt tokens of one connection and model."""

    counter: Counter | None = None
    failed: bool = False
    """A count the server was asked for failed: it is not asked again."""
    _seen: deque[float] = field(default_factory=lambda: deque(maxlen=KEEP), repr=False)
    """Ratios from the prompt tokens answers reported."""
    _asked: deque[float] = field(default_factory=lambda: deque(maxlen=KEEP), repr=False)
    """Ratios from the server's count on request (``/tokenize``), used until an answer reports one."""

    @property
    def ratio(self) -> float:
        """What an estimate is multiplied by: the largest recent observation, at least 1."""
        seen = self._seen or self._asked
        return min(MAX_RATIO, max(1.0, *seen)) if seen else 1.0

    @property
    def observed(self) -> bool:
        """Whether any count of this server has been seen."""
        return bool(self._seen or self._asked)

    @property
    def reported(self) -> bool:
        """Whether an answer has reported its prompt tokens (a count on request then adds nothing)."""
        return bool(self._seen)

    @staticmethod
    def _ratio(estimate: int, counted: int | None) -> float | None:
        if not isinstance(counted, int) or isinstance(counted, bool) or counted <= 0 or estimate < MIN_ESTIMATE:
            return None
        return counted / estimate

    def observe(self, estimate: int, counted: int | None) -> None:
        """Take the prompt tokens an answer reported for a request ketch estimated at ``estimate``."""
        if (ratio := self._ratio(estimate, counted)) is not None:
            self._seen.append(ratio)

    def observe_asked(self, estimate: int, counted: int | None) -> None:
        """Take the server's count on request (``/tokenize``) of a request estimated at ``estimate``."""
        if (ratio := self._ratio(estimate, counted)) is not None:
            self._asked.append(ratio)

    def scale(self, estimate: int) -> int:
        """``estimate`` corrected by the ratio (rounded up)."""
        return -(-int(estimate * self.ratio * 1000) // 1000)

    def unscale(self, tokens: int) -> int:
        """The estimate that :meth:`scale` turns into ``tokens`` (rounded down)."""
        return int(tokens / self.ratio)

    def reset(self) -> None:
        """Forget what was seen (another connection or model)."""
        self._seen.clear()
        self._asked.clear()
        self.counter, self.failed = None, False

    def counter_for(self, model: Any) -> Counter | None:
        """What counts this request: the server's ``/tokenize`` where it has one, Anthropic's
        count endpoint for a model on that wire; None after a failure, or where neither is."""
        if self.failed:
            return None
        if self.counter is not None:
            return self.counter
        return anthropic_counter(model) if getattr(model, "system", "") == "anthropic" else None


def llamacpp_counter(root: str, *, api_key: str | None = None) -> Counter:
    """A counter asking llama.cpp's ``POST {root}/tokenize`` (``{"content": text}`` →
    ``{"tokens": [...]}``); None on any failure or after :data:`COUNT_TIMEOUT`."""

    async def count(instructions: str, request_context: Any) -> int | None:
        import httpx

        from ketch.wire.tls import verifying_context

        text = request_text(instructions, request_context)
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        try:
            async with httpx.AsyncClient(timeout=COUNT_TIMEOUT, headers=headers, verify=verifying_context()) as client:
                response = await client.post(f"{root}/tokenize", json={"content": text})
            tokens = response.json().get("tokens") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        return len(tokens) if isinstance(tokens, list) else None

    return count


def _json_text(value: Any) -> str:
    """``value`` as JSON text to be counted (never sent as JSON: a NaN is counted as its repr)."""
    import json

    try:
        return json.dumps(value, default=str, allow_nan=False)
    except ValueError:
        return str(value)


def request_text(instructions: str, request_context: Any) -> str:
    """The text a request carries, for a server to count: instructions, the tool schemas as
    JSON, and every part's content and arguments (the chat template's framing is the server's,
    and the running ratio covers it once answers report their counts)."""
    params = request_context.model_request_parameters
    pieces = [instructions]
    for tool in [*params.function_tools, *getattr(params, "output_tools", [])]:
        pieces.append(_json_text({"name": tool.name, "description": tool.description or "",
                                   "parameters": tool.parameters_json_schema}))
    for message in request_context.messages:
        for part in message.parts:
            for name in ("content", "args"):
                value = getattr(part, name, None)
                if isinstance(value, str):
                    pieces.append(value)
                elif value is not None:
                    pieces.append(_json_text(value))
    return "\n".join(pieces)


def anthropic_counter(model: Any) -> Counter:
    """A counter asking the Anthropic API's ``count_tokens`` for the request (the SDK model's own
    ``count_tokens``: the same messages, tools and system prompt the request will carry)."""

    async def count(instructions: str, request_context: Any) -> int | None:
        try:
            # one try, within the count's own limit: a count is a refinement, never retried like
            # the model request it precedes (a silent server would otherwise hold every turn up)
            settings = {**(request_context.model_settings or {}), "max_retries": 0, "timeout": COUNT_TIMEOUT}
            usage = await model.count_tokens(list(request_context.messages), settings,
                                             request_context.model_request_parameters)
        except Exception:  # noqa: BLE001 - any failure: the estimate stands
            return None
        tokens = getattr(usage, "input_tokens", None)
        return tokens if isinstance(tokens, int) and tokens > 0 else None

    return count


class CalibrationObserver(AbstractCapability[Any]):
    """After each answer, gives the prompt tokens the server reported to the compactor."""

    def __init__(self, compactor: Any) -> None:
        super().__init__()
        self.compactor = compactor

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    async def after_model_request(self, ctx: Any, *, request_context: Any, response: Any) -> Any:
        self.compactor.observe_usage(getattr(response.usage, "input_tokens", None))
        return response


__all__ = ["Calibration", "CalibrationObserver", "Counter", "anthropic_counter", "llamacpp_counter", "request_text"]

"""Recognizing a provider's "the request is longer than the context window" on each wire.

- OpenAI (Chat and Responses): HTTP 400 with ``code: context_length_exceeded``, or a message
  such as "This model's maximum context length is 32768 tokens. However, your messages
  resulted in 40210 tokens"; Responses also says "Your input exceeds the context window of
  this model". A stream that fails with ``response.failed`` carries the same code.
- Anthropic: HTTP 400 ``invalid_request_error`` with "prompt is too long: 210503 tokens >
  200000 maximum", or "input length and `max_tokens` exceed context limit: 190000 + 32000 >
  200000".
- Local servers (llama.cpp, vLLM): "exceeds the available context size", "context length".
"""

from __future__ import annotations

import re

_PHRASES = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "exceed context limit",
    "exceeds the context",
    "exceeds the available context",
    "context length",
    "too many tokens",
    "input is too long",
)
_OPENAI_COUNTS = re.compile(r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens", re.S)
_ANTHROPIC_TOO_LONG = re.compile(r"prompt is too long: (\d+) tokens > (\d+)")
_ANTHROPIC_SUM = re.compile(r"exceed context limit: (\d+) \+ (\d+) > (\d+)")


def _errors(error: BaseException) -> list[BaseException]:
    pending, seen, out = [error], set(), []
    while pending:
        exc = pending.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        out.append(exc)
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        if exc.__cause__ is not None:
            pending.append(exc.__cause__)
    return out


def _texts(error: BaseException) -> list[str]:
    from pydantic_ai.exceptions import ModelHTTPError

    texts = []
    for exc in _errors(error):
        if isinstance(exc, ModelHTTPError) and exc.status_code in (400, 413, 422):
            texts.append(f"{exc.body} {exc.message}")
    return texts


def is_context_length_error(error: BaseException) -> bool:
    """Whether ``error`` (or one it wraps) is a provider's refusal of a request as too long."""
    return any(phrase in text.lower() for text in _texts(error) for phrase in _PHRASES)


def context_length_counts(error: BaseException) -> tuple[int, int | None] | None:
    """(input tokens the provider counted, its window or None) when the error says them."""
    for text in _texts(error):
        if m := _OPENAI_COUNTS.search(text):
            return int(m[2]), int(m[1])
        if m := _ANTHROPIC_TOO_LONG.search(text):
            return int(m[1]), int(m[2])
        if m := _ANTHROPIC_SUM.search(text):
            return int(m[1]), int(m[3])
    return None


__all__ = ["context_length_counts", "is_context_length_error"]

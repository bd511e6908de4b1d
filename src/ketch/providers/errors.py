"""Turning failures into one line for the user, split by who must act.

configuration (the user), provider (retry or report), tool (the model sees it),
interrupt (the model learns it was stopped). Keys never appear in the text.
"""

from __future__ import annotations

import re
from typing import Any

_KEYLIKE = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9_\-\.]{8,})")


_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@]+@")
"""The ``user:password@`` (or ``token@``) part of a URL."""
_URL_SECRET_PARAM = re.compile(
    r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|secret|password|sig|signature)=)[^&\s#]+"
)
"""A query parameter that carries a credential (``?api_key=…``, ``&token=…``)."""


def redact(text: str, secrets: tuple[str | None, ...] = ()) -> str:
    """Remove known secrets, anything shaped like an API key, and credentials written into URLs."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    text = _URL_USERINFO.sub(r"\1[redacted]@", text)
    text = _URL_SECRET_PARAM.sub(r"\1[redacted]", text)
    return _KEYLIKE.sub("[redacted]", text)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


_HTML_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_HTML_TAG = re.compile(r"<[^>]*>")


def _validation_errors(value: Any) -> str | None:
    """A list of validation errors (pydantic's ``{"loc": …, "msg": …}``, as llama-cpp-python and
    FastAPI servers send them) as ``messages[2].content: Input should be a valid string``."""
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, dict) and "msg" in v for v in value):
        return None
    items = []
    for error in value[:3]:
        path = ""
        for step in error.get("loc") or ():
            if isinstance(step, int) and not isinstance(step, bool):
                path += f"[{step}]"
            elif isinstance(step, str) and step != "body" and "-" not in step and "[" not in step:
                path += f".{step}" if path else step
        items.append(f"{path}: {error['msg']}" if path else str(error["msg"]))
    more = f" (and {len(value) - 3} more)" if len(value) > 3 else ""
    return "; ".join(items) + more


def _readable(message: Any) -> str:
    """A server's error message as text: a validation-error list (or its Python repr, which
    llama-cpp-python puts in its message) summarized, any other structure as compact JSON."""
    import ast
    import json

    if isinstance(message, str):
        text = message.strip()
        if text[:2] in ("[{", "[(", "{'") and len(text) < 20_000:
            try:
                parsed = ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return message
            return _validation_errors(parsed) or message
        return message
    if (summary := _validation_errors(message)) is not None:
        return summary
    try:
        return json.dumps(message, default=str, allow_nan=False)
    except (TypeError, ValueError):
        return str(message)


def _body_message(body: Any) -> str:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            if (detail := err.get("detail")) is not None and not err.get("message"):
                return _readable(detail)  # FastAPI: {"detail": [...]} or {"detail": "..."}
            return _readable(err.get("message") or err.get("type") or "")
        return _readable(err or "")
    text = str(body or "")
    if text.lstrip()[:1] == "<":  # an HTML error page from a proxy or gateway: its title, or its text
        title = _HTML_TITLE.search(text)
        text = title[1] if title else _HTML_TAG.sub(" ", text)
        text = f"an HTML page: {' '.join(text.split())}"
    return text


def describe_run_error(exc: BaseException, connection: Any = None) -> tuple[str, str, bool]:
    """(kind, one-line message, retryable) for an exception that ended a turn."""
    from pydantic_ai.exceptions import (
        ModelAPIError,
        ModelConnectionError,
        ModelHTTPError,
        ModelTimeoutError,
        UnexpectedModelBehavior,
        UserError,
    )

    secrets = (getattr(connection, "api_key", None),)
    name = getattr(connection, "name", "the provider")
    if isinstance(exc, ModelHTTPError):
        status = exc.status_code
        detail = _one_line(redact(_body_message(exc.body), secrets))
        if exc.in_stream:  # an error event inside a stream that had started: no retry happened
            msg = f"{name} sent an error in the middle of its answer; try again"
        elif status in (401, 403):
            msg = f"{name} rejected the API key (HTTP {status}): {_key_advice(connection, name)}"
        elif status == 429:
            msg = f"{name} is rate limiting requests (HTTP 429) and retries ran out; wait and try again"
        elif status >= 500:
            msg = f"{name} failed with HTTP {status} after retries; try again later"
        elif _too_long(exc):
            where = f"context_window under [connections.{name}]" if name != "adhoc" else "context_window in config"
            advice = getattr(exc, "ketch_window_hint", "") or f"Run /compact or set a lower {where}"
            msg = (
                f"{name} rejected the request as longer than the model's context window (HTTP {status}), "
                f"also after ketch pruned the history harder and retried; nothing stored was changed. "
                f"{advice[:1].upper()}{advice[1:]}"
            )
        elif status == 404 and "model" in detail.lower():
            msg = f"{name} does not know model '{exc.model_name}' (HTTP 404); list models with 'ketch models {name}'"
        elif status in (404, 405) and (url := _request_url(exc)):
            msg = f"{name} has no endpoint at {redact(url, secrets)} (HTTP {status}); {_path_advice(url, connection)}"
        else:
            msg = f"{name} rejected the request (HTTP {status})"
        if detail:
            msg += f": {detail}"
        if (hint := getattr(exc, "ketch_history_hint", "")):
            msg += f". {hint}"
        return "provider", msg, status == 429 or status >= 500
    if isinstance(exc, UnexpectedModelBehavior):
        if (tool := _TOOL_RETRIES.search(exc.message)) is not None:
            return "provider", (
                f"the model kept making invalid calls to tool '{tool[1]}' ({tool[2]} retries); the turn stopped. "
                "Try again, rephrase the task, or use another model"
            ), True
        if _empty_answers(exc):
            return "provider", (
                f"{name} answered with nothing (no text and no tool call), also when asked again; try again, "
                "or rephrase. A small local model may need a larger context (llama.cpp -c) or another chat template"
            ), True
        return "provider", _one_line(redact(f"malformed response from {name}: {exc.message}", secrets)), True
    if isinstance(exc, ModelConnectionError):
        url = redact(getattr(connection, "base_url", "") or "its base URL")
        text = _one_line(redact(_transport_cause(exc), secrets))
        if isinstance(exc, ModelTimeoutError):
            limit = getattr(connection, "timeout", None)
            if not limit:
                waited = "did not answer in time"
            elif getattr(exc, "phase", None) == "connect":
                waited = f"did not accept a connection within {min(limit, 30.0):g} s"
            else:
                waited = f"sent nothing for {limit:g} s"
            where = f"timeout = SECONDS under [connections.{name}] or " if name != "adhoc" else ""
            return "provider", (
                f"{name} at {url} {waited} ({text}); try again later, or allow longer with {where}KETCH_TIMEOUT=SECONDS"
            ), True
        if exc.phase in ("read", "write"):
            return "provider", f"the connection to {name} at {url} broke before the answer was complete ({text}); try again", True
        return "provider", f"could not reach {name} at {url} ({text}); is the server running and the URL right?", True
    if isinstance(exc, ModelAPIError):
        text = _one_line(redact(str(exc), secrets))
        return "provider", f"request to {name} failed: {text}", True
    if isinstance(exc, UserError):
        return "config", _one_line(redact(str(exc), secrets)), False
    from ketch.protocol.exceptions import ConfigError

    if isinstance(exc, ConfigError):  # e.g. the session store could not take a step
        return "config", _one_line(redact(str(exc), secrets)), False
    text = _one_line(redact(f"{type(exc).__name__}: {exc}", secrets))
    if _looks_like_stream_error(exc):
        return "provider", f"malformed or truncated stream from {name}: {text}", True
    return "internal", text, False


def _empty_answers(exc: BaseException) -> bool:
    """Whether the SDK gave up because the model's answers were empty: its output retries ran
    out on "Please return text or call a tool." (what it tells a model after an empty answer)."""
    return str(getattr(exc, "message", "")).startswith("Exceeded maximum output retries") and any(
        "Please return text or call a tool" in str(c) for c in _chain(exc)[1:]
    )


def _request_url(exc: BaseException) -> str:
    """The URL the failed request went to (the SDKs keep the request on their status error)."""
    for cause in _chain(exc):
        request = getattr(cause, "request", None)
        url = getattr(request, "url", None)
        if url is not None:
            return str(url).split("?", 1)[0]
    return ""


def _path_advice(url: str, connection: Any) -> str:
    """What to change about the base URL, judged from the path that was tried."""
    base = getattr(connection, "base_url", "") or "the base URL"
    where = "--base-url" if getattr(connection, "name", "") == "adhoc" else f"base_url under [connections.{getattr(connection, 'name', 'NAME')}]"
    if "/v1/v1/" in url:
        return f"the base URL {base} already ends in /v1 and the SDK adds another: drop the /v1 from {where}"
    if getattr(connection, "wire", "") == "anthropic-messages":
        return f"the Anthropic wire posts to BASE/v1/messages; check {where} (the server's root, without /v1)"
    if "/v1/" not in url:
        return f"OpenAI-compatible servers usually serve under /v1: try {base.rstrip('/')}/v1 in {where}"
    return f"check {where} ({base}) and --wire: the server may speak another protocol"


_TOOL_RETRIES = re.compile(r"Tool '([^']+)' exceeded max retries count of (\d+)")


def _too_long(exc: BaseException) -> bool:
    from ketch.context.overflow import is_context_length_error

    return is_context_length_error(exc)


def _key_advice(connection: Any, name: str) -> str:
    """What to do about a rejected key: an ad-hoc endpoint takes it only from --api-key-env."""
    key_env = getattr(connection, "key_env", "")
    if name == "adhoc":
        return f"check the key in {key_env}" if key_env else "pass the key with --api-key-env VAR"
    return f"check {key_env or 'its key variable'} or run 'ketch auth login {name}'"


def _transport_cause(exc: BaseException) -> str:
    """The innermost non-empty message of a transport failure (the SDKs wrap it in a generic one)."""
    text = str(exc)
    for cause in _chain(exc)[1:]:
        if isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
            cause = cause.exceptions[0]
        if str(cause):
            text = str(cause)
    return text


def _looks_like_stream_error(exc: BaseException) -> bool:
    names = {type(e).__name__ for e in _chain(exc)}
    return bool(names & {"JSONDecodeError", "RemoteProtocolError", "ReadError", "APIConnectionError", "ValidationError", "APIError"})


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen and len(seen) < 10:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen

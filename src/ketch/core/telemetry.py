"""Traces of what ketch did, over OTLP, for teams that run agents at scale.

Off unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set or the user's own config has
``[telemetry] otlp_endpoint``; a repository's config can neither turn it on nor point it
elsewhere (it would carry the session's activity to a place the repository chose). When on:
pydantic-ai's own instrumentation traces each agent run, model request (model, tokens) and
tool call, and ketch adds spans for turns, gate decisions, compaction and subagents.
Prompts, tool arguments and outputs are left out unless ``capture_content = true`` (user
config only). Nothing OpenTelemetry is imported while it is off; the exporter is the
optional extra ``ketch[otel]``.

Tracing must never disturb the session: the SDK's log records (an unreachable collector
logs a line per retry) go to ``problems`` instead of the terminal, each export gives up
after ``EXPORT_TIMEOUT_S``, and ``shutdown`` waits at most ``EXIT_FLUSH_S`` for what is
buffered (a collector that is down cannot hold the exit; the spans are then lost).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_tracer: Any = None
_provider: Any = None
EXPORT_TIMEOUT_S = 2.0
"""One export's deadline, retries included (the SDK's default is 10 s)."""
EXIT_FLUSH_S = 0.8
"""How long the exit waits for buffered spans."""
problems: list[str] = []
"""What the OpenTelemetry SDK logged (warnings and errors), kept off the terminal; the last few."""


@dataclass(frozen=True)
class TelemetrySettings:
    endpoint: str
    capture_content: bool = False


def user_telemetry() -> dict[str, Any]:
    """``[telemetry]`` of the user's own config file (never the repository's)."""
    import tomllib

    from ketch.config.settings import user_config_dir

    try:
        with open(user_config_dir() / "config.toml", "rb") as handle:
            table = tomllib.load(handle).get("telemetry", {})
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


def settings_from(user: dict[str, Any]) -> TelemetrySettings | None:
    """The standard variable first, then the user's config; None when tracing is off."""
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") \
        or user.get("otlp_endpoint")
    if not endpoint:
        return None
    return TelemetrySettings(str(endpoint), user.get("capture_content") is True)  # "false" is not a yes


def start(settings: TelemetrySettings, *, secrets: list[str]) -> str | None:
    """Turn tracing on for this process; returns a notice when it cannot (the extra missing)."""
    global _tracer, _provider
    if _tracer is not None:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        return "tracing is configured but the OpenTelemetry exporter is not installed: pip install 'ketch[otel]'"
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from ketch import __version__

    endpoint = settings.endpoint.rstrip("/")
    if not endpoint.endswith("/v1/traces") and not os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        endpoint += "/v1/traces"
    _keep_sdk_logs_off_the_terminal()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "ketch", "service.version": __version__}),
        shutdown_on_exit=False,  # its atexit shutdown would wait out the exporter's retries
    )
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=EXPORT_TIMEOUT_S)
    provider.add_span_processor(BatchSpanProcessor(_Redacting(exporter, secrets), export_timeout_millis=EXPORT_TIMEOUT_S * 1000))
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider, include_content=settings.capture_content))
    _provider = provider
    _tracer = provider.get_tracer("ketch", __version__)
    return None


def shutdown() -> None:
    """Send what is buffered (at exit), waiting at most ``EXIT_FLUSH_S``: the flush runs on a
    daemon thread, so a collector that does not answer cannot keep the process alive."""
    global _provider, _tracer
    provider, _provider, _tracer = _provider, None, None
    if provider is None:
        return
    import threading

    def flush() -> None:
        with contextlib.suppress(Exception):
            provider.force_flush(int(EXIT_FLUSH_S * 1000))
            provider.shutdown()

    worker = threading.Thread(target=flush, name="ketch-telemetry-flush", daemon=True)
    worker.start()
    worker.join(EXIT_FLUSH_S)


class _KeptOff(logging.Handler):
    """Keeps the SDK's log records in ``problems`` (the last 20) instead of the terminal."""

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            problems.append(record.getMessage().splitlines()[0][:300])
            del problems[:-20]


def _keep_sdk_logs_off_the_terminal() -> None:
    """The SDK logs through ``logging`` and, with no handler configured, Python prints
    warnings on stderr (over the prompt): OpenTelemetry's records stop at ours instead."""
    root = logging.getLogger("opentelemetry")
    if not any(isinstance(h, _KeptOff) for h in root.handlers):
        root.addHandler(_KeptOff(logging.WARNING))
    root.propagate = False


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A ketch span (a no-op while tracing is off); attributes with None values are left out."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(name, attributes={k: v for k, v in attributes.items() if v is not None}) as current:
        yield current


def event(name: str, **attributes: Any) -> None:
    """An event on the current span (a gate decision, say)."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().add_event(name, {k: v for k, v in attributes.items() if v is not None})


class _Redacting:
    """An exporter wrapper: any string attribute holding a key ketch holds is masked first."""

    def __init__(self, inner: Any, secrets: list[str]) -> None:
        self._inner = inner
        self._secrets = [s for s in secrets if s and len(s) >= 8]

    def _clean(self, value: Any) -> Any:
        if isinstance(value, str):
            for secret in self._secrets:
                value = value.replace(secret, "[redacted]")
        return value

    def export(self, spans: Any) -> Any:
        if self._secrets:
            for s in spans:
                attributes = getattr(s, "_attributes", None)
                store = getattr(attributes, "_dict", None)  # the SDK's BoundedAttributes, frozen once ended
                if store:
                    for key, value in list(store.items()):
                        store[key] = self._clean(value)
        return self._inner.export(spans)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)

"""``ketch -p``: one turn, no UI. Printers for text, json and stream-json.

The printers are peers of the TUI over the same event stream. Headless never waits on
stdin for a decision: calls that need approval are denied with a reason the model sees,
unless ``--yolo``. SIGINT kills a running command (the turn goes on); with no command
running it ends the turn with exit code 130.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO, assert_never

from ketch.protocol import strict_json
from ketch.protocol import events as ev
from ketch.protocol.exceptions import ConfigError

EXIT_OK, EXIT_PROVIDER, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_REFUSED, EXIT_STEP_LIMIT, EXIT_TOKEN_LIMIT, EXIT_COST_LIMIT, EXIT_TIME_LIMIT = 3, 4, 5, 6, 7
EXIT_BY_REASON = {"refused": EXIT_REFUSED, "step_limit": EXIT_STEP_LIMIT, "max_tokens": EXIT_TOKEN_LIMIT,
                  "cost_limit": EXIT_COST_LIMIT, "time_limit": EXIT_TIME_LIMIT}
"""How a turn that ended without an error but short of done exits (README: Exit codes)."""


_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}
"""Characters JSON leaves raw in a string but line readers (Python's ``splitlines``, JavaScript)
take as the end of a line: escaped, so each JSON value stays on its one line."""


def _json_line(value: Any) -> str:
    """``value`` as one line of strict JSON (UTF-8 text, line separators escaped), newline-ended."""
    return strict_json.dumps(value, ensure_ascii=False).translate(_LINE_BREAKS) + "\n"


@dataclass
class HeadlessPrinter:
    """Consumes events; writes stdout per the output format and errors to stderr."""

    fmt: str
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    session_id: str = ""
    result: str = ""
    reason: str = ""
    error_kind: str = ""
    error_message: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    """The session cost the last usage event reported; null until one says (unknown, also after an error)."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def handle(self, event: ev.AgentEvent) -> None:
        if self.fmt == "stream-json":
            self.out.write(_json_line(event.to_dict()))
            self.out.flush()
        self._fold(event)

    def _fold(self, event: ev.AgentEvent) -> None:
        match event:
            case ev.TurnStarted():
                self.session_id = event.session_id
            case ev.Usage():
                self.input_tokens += event.input_tokens
                self.output_tokens += event.output_tokens
                self.cache_read_tokens += event.cache_read_tokens
                self.cache_write_tokens += event.cache_write_tokens
                self.cost_usd = event.session_cost_usd
            case ev.ToolCallStarted():
                call = {"id": event.call_id, "name": event.name, "args": event.args}
                if event.agent:
                    call["subagent"] = event.agent
                self.tool_calls.append(call)
            case ev.ToolCallFinished():
                for call in self.tool_calls:
                    if call["id"] == event.call_id:
                        call.update(summary=event.summary, is_error=event.is_error)
            case ev.ApprovalResolved():
                for call in self.tool_calls:
                    if call["id"] == event.call_id:
                        call.update(decision=event.decision, decided_by=event.by)
            case ev.Error():
                self.error_kind = event.kind
                self.error_message = event.message
                if self.fmt != "stream-json":
                    self.err.write(f"ketch: {event.message}\n")
            case ev.Notice():
                if event.level == "warning" and self.fmt != "stream-json":
                    self.err.write(f"ketch: {event.text}\n")
            case ev.TurnFinished():
                self.reason = event.reason
                self.result = event.text
            case (
                ev.TextDelta()
                | ev.ReasoningDelta()
                | ev.ToolOutputChunk()
                | ev.ApprovalRequested()
                | ev.AskRequested()
                | ev.Compacted()
                | ev.PrefixBreak()
                | ev.TodoUpdated()
                | ev.WebSearchResult()
                | ev.SubagentStarted()
                | ev.SubagentProgress()
                | ev.SubagentFinished()
                | ev.BackgroundFinished()
            ):
                pass
            case _:
                assert_never(event)

    def finish(self) -> int:
        code = self.exit_code()
        if self.fmt == "text" and self.result:
            self.out.write(self.result.rstrip("\n") + "\n")
        elif self.fmt == "json":
            payload = {
                "type": "result",
                "result": self.result,
                "session_id": self.session_id,
                "reason": self.reason,
                "is_error": code in (EXIT_PROVIDER, EXIT_USAGE, EXIT_INTERRUPTED),
                "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                          "cache_read_tokens": self.cache_read_tokens, "cache_write_tokens": self.cache_write_tokens},
                "cost_usd": self.cost_usd,
                "tool_calls": self.tool_calls,
                "error": {"kind": self.error_kind, "message": self.error_message} if self.error_kind else None,
            }
            self.out.write(_json_line(payload))
        if code == EXIT_INTERRUPTED and self.fmt != "stream-json":
            self.err.write("ketch: interrupted\n")
        self.out.flush()
        return code

    def fail(self, kind: str, message: str) -> None:
        """A failure outside a turn (configuration, start-up): the JSON formats still get
        their error object or event; the one line on stderr is the caller's."""
        if self.fmt == "stream-json":
            self.handle(ev.Error(kind=kind, message=message))  # type: ignore[arg-type]
        elif self.fmt == "json":
            self.reason, self.error_kind, self.error_message = "error", kind, message
            self.finish()

    def exit_code(self) -> int:
        if self.reason in ("interrupted", "cancelled"):
            return EXIT_INTERRUPTED
        if self.error_kind == "config":
            return EXIT_USAGE
        if self.error_kind or self.reason == "error":
            return EXIT_PROVIDER
        return EXIT_BY_REASON.get(self.reason, EXIT_OK)


def read_prompt(arg: str) -> str:
    if arg == "-":
        if sys.stdin is None:
            raise ConfigError("no prompt: stdin is closed; pass the prompt as -p TEXT")
        if sys.stdin.isatty():
            sys.stderr.write("ketch: reading the prompt from the terminal; end it with Ctrl-D\n")
        text = sys.stdin.read()
    else:
        text = arg
    if not text.strip():
        raise ConfigError("the prompt is empty: pass text to -p, or '-p -' with the prompt on stdin")
    return text


def run_headless(args: Any) -> int:
    try:
        prompt = read_prompt(args.prompt)
        return asyncio.run(_run(args, prompt))
    except ConfigError as exc:
        HeadlessPrinter(args.output_format).fail("config", str(exc))
        raise
    except Exception as exc:  # cli.main turns it into one line on stderr
        from ketch.providers.errors import redact

        HeadlessPrinter(args.output_format).fail("internal", redact(f"internal error: {type(exc).__name__}: {exc}"))
        raise


async def _run(args: Any, prompt: str) -> int:
    from ketch.frontends.assemble import build_session
    from ketch.frontends.run_limits import RunLimits, checked_limits

    max_cost, time_limit = checked_limits(getattr(args, "max_cost", None), getattr(args, "time_limit", None))
    session = await build_session(args, interactive=False)
    printer = HeadlessPrinter(args.output_format)
    limits = RunLimits(session, max_cost=max_cost, time_limit=time_limit)
    loop = asyncio.get_running_loop()

    def on_sigint() -> None:
        if not session.interrupt_command():
            session.cancel_turn()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        limits.start()
        if getattr(args, "compact", False):
            for event in await session.compact_now():
                printer.handle(event)
        if session.has_pending():  # calls left awaiting approval when the session was closed
            async for event in session.resume_pending():
                _report(printer, limits, event)
            if printer.reason not in ("done", ""):
                return printer.finish()
        async for event in session.run_turn(prompt):
            _report(printer, limits, event)
    finally:
        limits.stop_clock()
        loop.remove_signal_handler(signal.SIGINT)
        await session.aclose()
    return printer.finish()


def _report(printer: HeadlessPrinter, limits: Any, event: ev.AgentEvent) -> None:
    """One event of the run to the printer, as the run's limits see it."""
    event = limits.watch(event)
    if isinstance(event, ev.TurnFinished) and event.reason in ("cost_limit", "time_limit"):
        printer.handle(limits.notice(event))
    printer.handle(event)

"""The session's side of the store: committing steps and the calls left open.

A mixin of ``Session``. Every finished step is committed before the next model request;
calls waiting for approval are noted so a resumed session asks again.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse

from ketch.protocol import events as ev
from ketch.core.encodable import encodable
from ketch.core.stream_translate import TurnState
from ketch.core.turn_record import cancelled_history, interim_history, open_calls
from ketch.tools.base import ToolDeps


class Persistence:
    """Storing the history of one session (needs the attributes ``Session`` sets)."""

    _store_waited_out = False
    """The last write failed after waiting out another program's hold on the store."""

    @property
    def history_rewritten(self) -> bool:
        """Set when the history was rewritten outside the writer's view. Outside a turn (a repair
        at load, ``/repair``, ``/compact``) a message may have been changed in place, so the next
        write compares every message by content; inside one (pruning) changed messages are new
        objects, which the writer finds by itself."""
        return getattr(self, "_rewritten", False)

    @history_rewritten.setter
    def history_rewritten(self, value: bool) -> None:
        self._rewritten = value
        turn = getattr(self, "_turn", None)  # (set in ``__init__`` before the turn exists)
        writer = getattr(self, "_writer", None)
        if value and writer is not None and (turn is None or turn.task is None or turn.task.done()):
            writer.recheck()

    def _persist(self, messages: list[ModelMessage]) -> None:
        """Make the stored history ``messages`` (writing only new and changed rows) with the
        step's events, as one transaction. On a storage fault the events wait for the next write."""
        from ketch.state.store_errors import StoreBusy

        self.messages = messages
        events, self._step_events = self._step_events, []
        try:
            self._writer.commit(messages, events)
        except BaseException as exc:
            self._step_events[:0] = events
            self._store_waited_out = isinstance(exc, StoreBusy)
            raise
        self._store_waited_out = False
        self.history_rewritten = False

    def _tool_started(self, ctx: RunContext[ToolDeps], call: Any) -> None:
        """Just before a tool body runs: store the history with this call marked as started, so a
        process killed while it runs leaves a result saying it ran and was cut off."""
        turn = self._turn
        if turn is None:
            return
        turn.record.live = ctx.messages
        turn.record.awaiting_approval = False
        turn.record.started.add(call.tool_call_id)
        self._persist_interim(turn)

    def _tool_finished(self, turn: TurnState, part: Any) -> None:
        """A tool finished: its real result replaces the note in the stored history."""
        turn.record.results[part.tool_call_id] = part
        self._persist_interim(turn)

    def _persist_interim(self, turn: TurnState) -> None:
        if self.store is None:
            return
        history = interim_history(turn.record)
        if history is not None:
            self._persist(_encodable_tail(history))

    def _store_turn_end(self, finished: Any) -> Any:
        """Store the turn's last events with ``finished`` before the front end sees it: a storage
        fault there ends the turn as an error (said in one line); the events wait for the next write.
        When the last write already waited out another program's hold on the store, this one is
        tried without waiting again (the turn has failed on it already; the user would wait twice)."""
        finished = self._emit(finished, deliver=False)
        waited = self._store_waited_out and self.store is not None
        try:
            with self.store.without_waiting() if waited else contextlib.nullcontext():
                self._persist(self.messages)
        except Exception as exc:  # noqa: BLE001 - the one line the front end shows
            from ketch.providers.errors import describe_run_error

            with contextlib.suppress(ValueError):
                self._step_events.remove(finished)
            if finished.reason != "error":
                kind, message, retryable = describe_run_error(exc, self.connection)
                self._emit(ev.Error(kind=kind, message=message, retryable=retryable))  # type: ignore[arg-type]
                finished = dataclasses.replace(finished, reason="error")
            finished = self._emit(finished, deliver=False)
        self._store_waited_out = False  # the next turn's writes wait again
        return finished

    def _keep_cancelled(self, prompt: str | None, turn: TurnState) -> None:
        """After a cancel: store the prompt, the partial answer marked as cancelled and every
        finished step, as a history the next prompt can follow on every wire."""
        if turn.record.awaiting_approval:
            return  # left while asked to approve: the calls stay pending, asked again on resume
        history = _encodable_tail(cancelled_history(self.messages, turn.record, prompt))
        closed = bool(open_calls(turn.record.live or self.messages))
        try:
            self._persist(history)
            if closed and self.store is not None:
                self.store.set_pending(self.session_id, None)
        except Exception as exc:  # noqa: BLE001 - reported as the turn's error; the history stays in memory
            from ketch.providers.errors import describe_run_error

            kind, message, retryable = describe_run_error(exc, self.connection)
            self._emit(ev.Error(kind=kind, message=message, retryable=retryable))  # type: ignore[arg-type]

    def pending_calls(self) -> list[dict[str, Any]]:
        """Tool calls of the last response that have no result yet (an approval the user never gave)."""
        last = self.messages[-1] if self.messages else None
        if not isinstance(last, ModelResponse):
            return []
        return [{"call_id": c.tool_call_id, "name": c.tool_name, "args": c.args_as_dict()} for c in last.tool_calls]

    def has_pending(self) -> bool:
        """Whether the history ends in unanswered tool calls: call ``resume_pending`` before a new turn."""
        return bool(self.pending_calls())

    def resume_pending(self) -> AsyncIterator[ev.AgentEvent]:
        """Process the calls left open when the session was closed: they go through the gate again
        (an ``ApprovalRequested`` when interactive), then the model continues. Events as ``run_turn``."""
        return self.run_turn(None)

    def _record_pending(self, ctx: RunContext[ToolDeps], calls: Sequence[Any]) -> None:
        """Before asking the user, commit the response holding ``calls`` and note them as pending."""
        if self._turn is not None:
            self._turn.record.live, self._turn.record.awaiting_approval = ctx.messages, True
        if self.store is None:
            return
        self._persist(list(ctx.messages))
        self.store.set_pending(
            self.session_id, [{"call_id": c.tool_call_id, "name": c.tool_name, "args": c.args_as_dict()} for c in calls]
        )

    def _close_open_calls(self) -> None:
        """A new prompt on a history ending in open calls: mark that response interrupted, so the
        SDK answers its calls with its standard "interrupted" result instead of leaving them dangling."""
        import dataclasses

        if self.has_pending():
            self.messages = [*self.messages[:-1], dataclasses.replace(self.messages[-1], state="interrupted")]


def _encodable_tail(history: list[ModelMessage], newest: int = 3) -> list[ModelMessage]:
    """``history`` with the messages ketch built for it (the newest few: results, a prompt, a
    partial answer) made encodable: a file name that is not UTF-8 in a tool result, say."""
    return [*history[:-newest], *(encodable(m) for m in history[-newest:])]

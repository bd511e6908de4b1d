"""The session's side of the store: committing steps and the calls left open.

A mixin of ``Session``. Every finished step is committed before the next model request;
calls waiting for approval are noted so a resumed session asks again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse

from ketch.core import events as ev
from ketch.tools.base import ToolDeps


class Persistence:
    """Storing the history of one session (needs the attributes ``Session`` sets)."""

    def _persist(self, messages: list[ModelMessage]) -> None:
        """Commit every message not yet stored, with the step's events, as one transaction."""
        self.messages = messages
        if self.store is None:
            self._persisted = len(messages)
            self.history_rewritten = False
            return
        events, self._step_events = self._step_events, []
        if self.history_rewritten or len(messages) < self._persisted:
            self.store.replace_history(self.session_id, messages)
            if events:
                self.store.append_step(self.session_id, [], events)
        elif len(messages) > self._persisted or events:
            self.store.append_step(self.session_id, messages[self._persisted :], events)
        self._persisted = len(messages)
        self.history_rewritten = False

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

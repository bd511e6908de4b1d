"""From the SDK's stream items to ketch's typed events.

A mixin of ``Session``: text and reasoning deltas, tool calls and their results become
``events.py`` events; the final answer is the text after the last tool call.
"""

from __future__ import annotations

import asyncio

from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolReturnPart,
)

from ketch.protocol import events as ev
from ketch.core.tool_brief import brief
from ketch.core.turn_record import StepRecord


@dataclass
class TurnState:
    """One ``run_turn``: its events' queue, the task driving it, its text and the step in progress.
    A new one per turn; the session keeps the newest (events after its end are stamped with it)."""

    turn_id: str
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    """The events for the front end, in order (``Session._emit`` puts, ``run_turn`` yields)."""
    task: asyncio.Task[None] | None = None
    """The task driving the turn (``Session._drive``)."""
    text: list[str] = field(default_factory=list)
    compacted: bool = False
    delivered: bool = False
    """Whether any output of this turn reached the front end (no silent retries after)."""
    record: StepRecord = field(default_factory=StepRecord)
    """The step in progress, for what a cancel or a crash leaves stored (``turn_record``)."""


class StreamTranslator:
    """Translating one turn's stream (needs the attributes ``Session`` sets)."""

    def _translate(self, item: Any, turn: TurnState) -> None:
        if self._searches.starts_call(item):
            turn.text.clear()  # text before a hosted search is not the answer
        if (found := self._searches.observe(item)) is not None:
            self._emit(found)
            return
        if isinstance(item, PartStartEvent):
            if item.index == 0:
                turn.record.new_response()
            if isinstance(item.part, TextPart) and item.part.content:
                turn.record.answer.append(item.part.content)
                turn.text.append(item.part.content)
                self._emit(ev.TextDelta(text=item.part.content))
            elif isinstance(item.part, ThinkingPart) and item.part.content:
                self._emit(ev.ReasoningDelta(text=item.part.content))
        elif isinstance(item, PartDeltaEvent):
            delta = item.delta
            if isinstance(delta, TextPartDelta) and delta.content_delta:
                turn.record.answer.append(delta.content_delta)
                turn.text.append(delta.content_delta)
                self._emit(ev.TextDelta(text=delta.content_delta))
            elif isinstance(delta, ThinkingPartDelta) and delta.content_delta:
                self._emit(ev.ReasoningDelta(text=delta.content_delta))
        elif isinstance(item, FunctionToolCallEvent):
            turn.text.clear()  # the final answer is the text after the last tool call
            turn.record.new_response()  # the response holding this call is whole
            args = item.part.args_as_dict()
            self._call_args[item.part.tool_call_id] = args
            self._emit(ev.ToolCallStarted(call_id=item.part.tool_call_id, name=item.part.tool_name, args=args))
        elif isinstance(item, FunctionToolResultEvent):
            part = item.part
            self._tool_finished(turn, part)
            is_error = not isinstance(part, ToolReturnPart) or part.outcome != "success"
            if isinstance(part.content, str):
                content = part.content
            elif isinstance(part, ToolReturnPart):
                content = part.model_response_str()
            else:
                content = part.model_response()
            args = self._call_args.pop(part.tool_call_id, {})
            denied = isinstance(part, ToolReturnPart) and part.outcome == "denied"
            if self.hooks is not None and not denied:  # a denied call never ran
                self._background(self.hooks.after_tool(part.tool_name or "", args, _summarize(content), is_error))
            tail = self._output_tails.pop(part.tool_call_id)
            preview = self._previews.pop(part.tool_call_id, "")
            # only file tools preview a diff (the shell's preview is its command line)
            diff = preview if not is_error and part.tool_name in _DIFF_TOOLS else ""
            summary = brief(part.tool_name or "", args, content, is_error=is_error, tail=tail)
            self._emit(
                ev.ToolCallFinished(
                    call_id=part.tool_call_id,
                    name=part.tool_name or "",
                    summary=summary,
                    is_error=is_error,
                    diff=diff,
                )
            )


_DIFF_TOOLS = ("write_file", "edit_file")


def _summarize(content: str, limit: int = 400) -> str:
    text = content.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"

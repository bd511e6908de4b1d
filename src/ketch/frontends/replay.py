"""A stored conversation as the events its live turns produced, for ``ui/replay.py``.

Text and tool calls come from the messages (the store keeps no streamed deltas); each tool
result, denial, error, notice and turn end comes from the events stored with its step, so
the resumed transcript shows the same results, the same denials and the same marks. Calls
and their stored events are paired by their place in the history: the n-th call with an id
gets the n-th stored result with that id (some servers reuse call ids across turns).
Only the last ``REPLAY_TURNS`` turns, ``REPLAY_ITEMS`` items at most, are printed (a long
session would take seconds); the banner says where the rest is.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from typing import Any

from ketch.protocol import events as ev
from ketch.core.tool_brief import brief
from ketch.ui.replay import Banner, Prompt, ReplayItem

REPLAY_TURNS = 20
REPLAY_ITEMS = 300
"""Earlier turns are left out once this many items (answers, calls, results) are shown;
the last turn is always shown whole."""
DIM, RESET = "\x1b[2m", "\x1b[0m"
_CANCELLED_TAIL = re.compile(r"\s*\[cancelled by the user: [^\]\n]*\]\s*$")
"""The note the core appends to the stored text of an answer the user cancelled (for the
model); live, the UI marks the cut under the answer instead, so the replay does the same."""
_TURN_LEVEL = (ev.Error, ev.Notice, ev.Compacted, ev.WebSearchResult, ev.SubagentFinished, ev.TurnFinished)


def _prompt_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        from ketch.core.attachments import stored_text

        return stored_text(list(content))
    return None


def _decode(rows: Sequence[dict[str, Any]]) -> list[ev.AgentEvent]:
    out: list[ev.AgentEvent] = []
    for row in rows:
        try:
            out.append(ev.event_from_dict(row))
        except (KeyError, TypeError, ValueError):
            continue  # an event from another version: its text is in the messages anyway
    return out


def replay_items(session_id: str, messages: Sequence[Any], stored: Sequence[dict[str, Any]]) -> list[ReplayItem]:
    """The conversation's items: banner, prompts and events, banner."""
    from pydantic_ai.messages import (
        ModelRequest, ModelResponse, RetryPromptPart, TextPart, ThinkingPart, ToolCallPart, ToolReturnPart, UserPromptPart,
    )

    from ketch.context.reminders import is_reminder

    events = _decode(stored)
    finished = _in_order(e for e in events if isinstance(e, ev.ToolCallFinished) and not e.agent)
    resolved = _in_order(e for e in events if isinstance(e, ev.ApprovalResolved) and not e.agent)
    turn_ids = [(e.prompt, e.turn_id) for e in events if isinstance(e, ev.TurnStarted)]
    by_turn: dict[str, list[ev.AgentEvent]] = {}
    notices: dict[str, list[tuple[int, ev.Notice]]] = {}  # turn id: (answers stored before it, notice)
    answered: dict[str, int] = {}
    for e in events:
        if isinstance(e, ev.Usage) and not e.agent and e.turn_id:
            answered[e.turn_id] = answered.get(e.turn_id, 0) + 1
        elif isinstance(e, ev.Notice) and not e.agent and e.turn_id:
            notices.setdefault(e.turn_id, []).append((answered.get(e.turn_id, 0), e))
        elif isinstance(e, _TURN_LEVEL) and not e.agent and e.turn_id:
            by_turn.setdefault(e.turn_id, []).append(e)

    turns: list[list[ReplayItem]] = [[]]
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    current = ""

    cancelled: set[int] = set()
    responses = 0  # the current turn's answers so far

    def notices_before(answer: int | None) -> None:
        """The current turn's notices that were stored before its ``answer``-th answer (all
        that are left when None): live, a notice shows where it came, e.g. a window reading
        above the answer it preceded, so the replay puts it there too."""
        waiting = notices.get(current, [])
        while waiting and (answer is None or waiting[0][0] <= answer):
            turns[-1].append(waiting.pop(0)[1])

    def close_turn() -> None:
        notices_before(None)
        ending = by_turn.pop(current, [])
        if len(turns) - 1 in cancelled and not any(isinstance(e, ev.TurnFinished) and e.reason == "cancelled" for e in ending):
            ending.append(ev.TurnFinished(reason="cancelled"))
        turns[-1].extend(ending)

    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and not is_reminder(part) and (text := _prompt_text(part.content)) is not None:
                    close_turn()
                    match = next((i for i, (p, _) in enumerate(turn_ids) if p == text), None)
                    current = turn_ids.pop(match)[1] if match is not None else ""
                    turns.append([Prompt(text)])
                    responses = 0
                elif isinstance(part, (ToolReturnPart, RetryPromptPart)) and part.tool_call_id in calls:
                    name, args = calls.pop(part.tool_call_id)
                    turns[-1].append(_finished(part, name, args, finished, ToolReturnPart))
        elif isinstance(message, ModelResponse):
            notices_before(responses)
            responses += 1
            for part in message.parts:
                if isinstance(part, ThinkingPart) and part.content.strip():
                    turns[-1].append(ev.ReasoningDelta(text=part.content))  # kept for ctrl-r, one line shown
                elif isinstance(part, TextPart) and part.content:
                    text = _CANCELLED_TAIL.sub("", part.content)
                    if text != part.content:
                        cancelled.add(len(turns) - 1)
                    if text:
                        turns[-1].append(ev.TextDelta(text=text))
                elif isinstance(part, ToolCallPart):
                    args = part.args_as_dict()
                    calls[part.tool_call_id] = (part.tool_name, args)
                    turns[-1].append(ev.ToolCallStarted(call_id=part.tool_call_id, name=part.tool_name, args=args))
                    if (res := _next_for(resolved, part.tool_call_id, part.tool_name)) is not None:
                        turns[-1].append(res)
    close_turn()
    shown = [t for t in turns if t]
    hidden, count = len(shown), 0
    while hidden > 0 and len(shown) - hidden < REPLAY_TURNS and (count == 0 or count + len(shown[hidden - 1]) <= REPLAY_ITEMS):
        hidden -= 1
        count += len(shown[hidden])
    head = f"Resumed session {session_id} · {len(messages)} messages"
    if hidden:
        head += f" · the {hidden} earlier turns are in: ketch export {session_id}"
    items: list[ReplayItem] = [Banner((DIM + head + RESET, ""))]
    for turn in shown[hidden:]:
        items.extend(turn)
    items.append(Banner((DIM + "── end of the earlier conversation ──" + RESET, "")))
    return items


def _in_order(found: Any) -> dict[str, deque[Any]]:
    """Stored events by call id, each id's in the order they were stored: a server may reuse
    a call id in a later response, so an id alone does not name one call."""
    out: dict[str, deque[Any]] = {}
    for event in found:
        out.setdefault(event.call_id, deque()).append(event)
    return out


def _next_for(queued: dict[str, deque[Any]], call_id: str, name: str) -> Any:
    """The next stored event of ``call_id`` (the history's calls with that id come in the same
    order as their events were stored), when it is for a call of ``name``; else None."""
    waiting = queued.get(call_id)
    if not waiting or waiting[0].name != name:
        return None
    return waiting.popleft()


def _finished(part: Any, name: str, args: dict[str, Any], finished: dict[str, deque[ev.ToolCallFinished]],
              return_cls: type) -> ev.ToolCallFinished:
    stored = _next_for(finished, part.tool_call_id, name)
    if stored is not None:
        return stored
    is_error = not isinstance(part, return_cls) or getattr(part, "outcome", "success") != "success"
    content = part.content if isinstance(part.content, str) else (
        part.model_response_str() if isinstance(part, return_cls) else part.model_response())
    return ev.ToolCallFinished(call_id=part.tool_call_id, name=name, is_error=is_error,
                               summary=brief(name, args, content, is_error=is_error))

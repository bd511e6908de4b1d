"""One ketch event as the ACP updates an editor shows (``ketch acp``): message and thought
chunks, tool calls with kind, title, locations and diffs, the plan, context use; approval and
``ask`` requests are handed to the caller, which asks the client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ketch.protocol import events as ev

LIVE_TAIL = 20_000
"""Characters of a running command's output a tool call update shows (its tail)."""


class LiveCalls:
    """One session's tool calls between start and result: their live output (or the editor's
    terminal they run in), and which are still open when a turn ends."""

    def __init__(self) -> None:
        self.open: set[str] = set()
        self.output: dict[str, str] = {}
        self.terminals: dict[str, str] = {}
        self.cancelled = False
        """The editor cancelled the turn running now: calls it cuts short end saying so."""

    def in_terminal(self, call_id: str, terminal_id: str) -> None:
        self.terminals[call_id] = terminal_id


KINDS = {"read": "read", "write": "edit", "shell": "execute", "network": "fetch", "meta": "think", "mcp": "other"}


def tool_title(name: str, args: dict[str, Any]) -> str:
    key = {"shell": "command", "read_file": "path", "write_file": "path", "edit_file": "path", "grep": "pattern",
           "glob": "pattern", "list_dir": "path", "web_fetch": "url"}.get(name)
    value = args.get(key) if key else None
    return f"{name} {value}" if isinstance(value, str) and value else name


async def forward(conn: Any, session: Any, event: Any, ask: Callable[[Any, Any], None], review: Any,
                  live: LiveCalls) -> None:
    """One ketch event as ACP updates (or a permission request); ``review`` (``EditReview``)
    keeps each edit's "before" for its whole-file diff."""
    import acp
    from acp.schema import ToolCallLocation, UsageUpdate

    sid = session.session_id
    send = conn.session_update
    if isinstance(event, ev.TextDelta):
        await send(session_id=sid, update=acp.update_agent_message_text(event.text))
    elif isinstance(event, ev.ReasoningDelta):
        await send(session_id=sid, update=acp.update_agent_thought_text(event.text))
    elif isinstance(event, ev.ToolCallStarted):
        await review.started(session, event)
        live.open.add(event.call_id)
        path = event.args.get("path")
        locations = [ToolCallLocation(path=str(session.workspace.root / path))] if isinstance(path, str) else None
        await send(session_id=sid, update=acp.start_tool_call(
            event.call_id, tool_title(event.name, event.args), kind=KINDS.get(session.kinds.get(event.name, ""), "other"),
            status="pending", locations=locations, raw_input=event.args))
    elif isinstance(event, ev.ToolOutputChunk):
        if event.call_id in live.terminals:  # the editor's terminal shows it
            await send(session_id=sid, update=acp.update_tool_call(event.call_id, status="in_progress"))
            return
        shown = live.output[event.call_id] = (live.output.get(event.call_id, "") + event.text)[-LIVE_TAIL:]
        await send(session_id=sid, update=acp.update_tool_call(event.call_id, status="in_progress",
                                                               content=[acp.tool_content(acp.text_block(shown))]))
    elif isinstance(event, ev.ToolCallFinished):
        live.open.discard(event.call_id)
        live.output.pop(event.call_id, None)
        content = [acp.tool_content(acp.text_block(event.summary))]
        if event.is_error and live.cancelled:
            content.insert(0, acp.tool_content(acp.text_block(CANCELLED)))
        terminal = live.terminals.pop(event.call_id, None)
        if terminal is not None:
            content.insert(0, acp.tool_terminal_ref(terminal))
        diff = await review.finished(session, event)
        if diff is not None:
            content.insert(0, diff)
        await send(session_id=sid, update=acp.update_tool_call(
            event.call_id, status="failed" if event.is_error else "completed", content=content, raw_output=event.summary,
            locations=[ToolCallLocation(path=diff.path)] if diff is not None else None))
    elif isinstance(event, ev.TurnFinished):
        await _close_open_calls(conn, sid, live, event.reason)
    elif isinstance(event, ev.ApprovalRequested):
        ask(session, event)
    elif isinstance(event, ev.AskRequested):
        ask(session, event)
    elif isinstance(event, ev.TodoUpdated):
        entries = [acp.plan_entry(i.get("content", ""), status=_plan_status(i.get("status", ""))) for i in event.items]
        await send(session_id=sid, update=acp.update_plan(entries))
    elif isinstance(event, ev.Usage):
        status = session.status()
        if status.context_window:
            await send(session_id=sid, update=UsageUpdate(session_update="usage_update", used=status.context_tokens,
                                                            size=status.context_window))
    elif isinstance(event, (ev.Notice, ev.Error)):
        prefix = "ketch: " if isinstance(event, ev.Notice) else "ketch error: "
        text = event.text if isinstance(event, ev.Notice) else event.message
        await send(session_id=sid, update=acp.update_agent_thought_text(prefix + text + "\n"))


CANCELLED = "Cancelled by the user."
"""What a call the editor cancelled ends with: protocol version 1's tool call status has no
"cancelled" (the draft version 2 has), so its end state is ``failed`` with this content."""


async def _close_open_calls(conn: Any, sid: str, live: LiveCalls, reason: str) -> None:
    """Calls a turn left without a result end in the editor too (as ``failed``: see ``CANCELLED``)."""
    import acp

    why = CANCELLED if reason in ("cancelled", "interrupted") else f"Did not finish (the turn ended: {reason})."
    for call_id in sorted(live.open):
        await conn.session_update(session_id=sid, update=acp.update_tool_call(
            call_id, status="failed", content=[acp.tool_content(acp.text_block(why))]))
    live.open.clear()
    live.output.clear()
    live.terminals.clear()
    live.cancelled = False


def _plan_status(status: str) -> str:
    return {"in_progress": "in_progress", "completed": "completed", "done": "completed"}.get(status, "pending")

"""Translates session events into scrollback commits and live-region state.

One method maps each event type (``apply``, a ``match`` ending in ``assert_never``). The
answer text is buffered and only turned into output on ``flush`` (the ~60 ms tick): closed
Markdown blocks are committed, the open block is re-rendered for the live region.
Requests (approval, ask) are not handled here; the app owns the overlays for them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, assert_never

from ketch.protocol.events import (
    AgentEvent, ApprovalRequested, ApprovalResolved, AskRequested, BackgroundFinished, Compacted, Error, Notice,
    ReasoningDelta, SubagentFinished, SubagentProgress, SubagentStarted, TextDelta, TodoUpdated,
    ToolCallFinished, ToolCallStarted, ToolOutputChunk, TurnFinished, TurnStarted, Usage, PrefixBreak,
    WebSearchResult,
)
from ketch.ui.background import background_lines
from ketch.ui.blocks import BlockSplitter
from ketch.ui.rich_render import AnsiRenderer
from ketch.ui.results import CallRecord, is_expandable, result_lines
from ketch.ui.toolfmt import clip, headline, paint

TOOL_TAIL_LINES = 5


@dataclass
class ToolProgress:
    """A running tool call as the live region shows it."""

    name: str
    args: dict[str, Any]
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TOOL_TAIL_LINES))
    partial: str = ""

    def add_output(self, text: str) -> None:
        """Keep the last few complete lines (and the line being written)."""
        data = self.partial + text.replace("\r\n", "\n")
        *complete, self.partial = data.split("\n")
        for line in complete:
            self.tail.append(line.rsplit("\r", 1)[-1])

    def lines(self) -> list[str]:
        """The tail, including an unfinished last line."""
        rows = list(self.tail)
        if self.partial:
            rows.append(self.partial.rsplit("\r", 1)[-1])
        return rows[-TOOL_TAIL_LINES:]


class TurnView:
    """The visible state of the running turn, plus what it has committed."""

    def __init__(self, renderer: AnsiRenderer, width: Callable[[], int],
                 commit: Callable[[list[str]], None]) -> None:
        self._renderer = renderer
        self._width = width
        self._commit = commit
        self._splitter = BlockSplitter()
        self._pending_text = ""
        self._rendered_open = ""
        self._blocks_in_answer = 0
        self._after_answer: list[list[str]] = []
        """Rows of background commands that ended while an answer was streaming (shown after it)."""
        self.answer_lines: list[str] = []
        """ANSI lines of the open Markdown block."""
        self.reasoning = ""
        self._reasoning_began = 0.0
        self.thoughts: list[str] = []
        """The reasoning of every answer of the session so far (ctrl-r opens them)."""
        self.tools: dict[str, ToolProgress] = {}
        self.subagents: dict[str, str] = {}
        self.todos: list[dict[str, str]] = []
        self.calls: list[CallRecord] = []
        """Every finished call of the session, numbered from 1 (for ctrl-o and /expand)."""
        self._outputs: dict[str, list[tuple[str, str]]] = {}
        self._denials: dict[str, str] = {}
        self.cancelled_answer = False
        self.status_dirty = False
        """Set when an event changed what ``session.status()`` would report."""

    def apply(self, event: AgentEvent) -> None:
        """Take one event (cheap: heavy rendering waits for ``flush``)."""
        match event:
            case TextDelta():
                if not event.agent:
                    if self.reasoning:
                        self.close_reasoning()
                    self._pending_text += event.text
            case ReasoningDelta():
                if not event.agent:
                    if not self.reasoning:
                        self._reasoning_began = time.monotonic()
                    self.reasoning += event.text
            case ToolCallStarted():
                if event.agent:
                    return
                self.close_reasoning()
                self.end_answer()
                self.tools[event.call_id] = ToolProgress(event.name, dict(event.args))
            case ToolOutputChunk():
                tool = self.tools.get(event.call_id)
                if tool is not None:
                    tool.add_output(event.text)
                    self._outputs.setdefault(event.call_id, []).append((event.stream, event.text))
            case ToolCallFinished():
                if event.agent:
                    return
                self.end_answer()
                tool = self.tools.pop(event.call_id, None)
                record = CallRecord(len(self.calls) + 1, event.call_id, event.name, tool.args if tool else {},
                                    summary=event.summary, is_error=event.is_error, diff=event.diff,
                                    denied=self._denials.pop(event.call_id, ""))
                for stream, text in self._outputs.pop(event.call_id, []):
                    record.add_output(stream, text)
                self.calls.append(record)
                self._commit(result_lines(record, self._width(), expandable=is_expandable(record)) + [""])
            case ApprovalResolved():
                self._note_resolution(event)
            case ApprovalRequested() | AskRequested() | TurnStarted():
                pass
            case Compacted():
                self.commit_text(f"context compacted: {event.tokens_before:,} → {event.tokens_after:,} tokens", "2")
            case Usage() | PrefixBreak():
                self.status_dirty = True
            case TodoUpdated():
                self.todos = list(event.items)
                self.status_dirty = True
            case WebSearchResult():
                self.end_answer()
                query = " ".join(event.query.split()) or "(the provider gave no query)"  # one row, whatever it sent
                rows = [paint("●", "32") + paint(clip(f" web_search  {query}", self._width() - 2), "1")]
                rows += [f"    {clip(s.get('title') or s.get('url', ''), self._width() - 4)}" for s in event.sources[:5]]
                if not event.sources:
                    rows.append(paint("    no sources came back", "2"))
                self._commit(rows + [""])
            case SubagentStarted():
                self.subagents[event.subagent_id] = f"{event.kind}: {event.description}"
            case SubagentProgress():
                base = self.subagents.get(event.subagent_id, "").split("  ·  ")[0]
                self.subagents[event.subagent_id] = f"{base}  ·  {event.tool} {event.detail}".rstrip()
            case SubagentFinished():
                label = self.subagents.pop(event.subagent_id, event.subagent_id).split("  ·  ")[0]
                mark = paint("●", "32" if event.ok else "31")
                self._commit([f"{mark} task  {clip(label, self._width() - 10)}", ""])
            case Notice():
                self.end_answer()
                self.commit_text(event.text, "33" if event.level == "warning" else "2")
            case BackgroundFinished():  # never in the middle of an answer: after it, when one is streaming
                self._after_answer.append(background_lines(event, self._width()))
                if not (self._pending_text or self._blocks_in_answer or self._splitter.open_text):
                    self.end_answer()
                self.status_dirty = True
            case Error():
                self.end_answer()
                self.commit_text(f"Error: {event.message}", "31")
            case TurnFinished():
                if event.reason in ("cancelled", "interrupted"):
                    self.end_answer()
                    self._commit_stopped_calls()
                    self.commit_text("⎿ stopped by the user; the answer above is incomplete"
                                     if self.cancelled_answer else "⎿ stopped by the user", "33")
                self.end_turn()
            case _:
                assert_never(event)

    def _commit_stopped_calls(self) -> None:
        """The turn was stopped with calls still running: each keeps what the live region
        showed of it (its headline and the lines it printed), marked stopped, instead of
        vanishing with the live region."""
        width = self._width()
        for call_id, tool in list(self.tools.items()):
            rows = [paint("●", "33") + paint(headline(tool.name, tool.args, width)[1:], "1")]
            printed = [line for _, text in self._outputs.get(call_id, []) for line in text.replace("\r\n", "\n").split("\n")]
            printed = [line.rsplit("\r", 1)[-1] for line in printed if line.strip()]
            if len(printed) > TOOL_TAIL_LINES:
                rows.append(paint(f"    … {len(printed) - TOOL_TAIL_LINES} earlier lines", "2"))
            rows += ["    " + clip(line, width - 5) for line in printed[-TOOL_TAIL_LINES:]]
            rows.append(paint("  ⎿ stopped by the user before it finished", "33"))
            self._commit(rows + [""])
            self.tools.pop(call_id, None)
            self._outputs.pop(call_id, None)

    def _note_resolution(self, event: ApprovalResolved) -> None:
        if event.by == "user" and event.decision != "deny":
            return
        who = event.rule or event.by
        if event.decision == "deny":
            why = f": {event.reason}" if event.reason else ""
            if event.call_id in self.tools:  # shown once, under the call, when it finishes
                by = (f"user ({event.rule})" if event.rule else "user") if event.by == "user" else who
                self._denials[event.call_id] = f"by {by}{why}"
            else:
                self.commit_text(f"✗ {event.name} denied ({'user' if event.by == 'user' else who}){why}", "31")
        elif event.by not in ("user",):
            self.commit_text(f"✓ {event.name} allowed ({who})", "2")

    def commit_text(self, text: str, sgr: str = "") -> None:
        """Commit a plain message (wrapped to the width), followed by a blank line."""
        width = self._width()
        lines = self._renderer.styled(text, "", width) if len(text) > width or "\n" in text else [text]
        self._commit([paint(line, sgr) for line in lines] + [""])

    def flush(self) -> bool:
        """Move buffered text into blocks; True when the live region changed."""
        if not self._pending_text:
            return False
        text, self._pending_text = self._pending_text, ""
        for block in self._splitter.feed(text):
            self._commit_block(block)
        return self._render_open()

    def end_answer(self) -> None:
        """The answer segment ended (a tool call or the turn): commit what is open (the
        open block is not drawn live first: it goes to the scrollback at once)."""
        if self._pending_text:
            text, self._pending_text = self._pending_text, ""
            for block in self._splitter.feed(text):
                self._commit_block(block)
        for block in self._splitter.finish():
            self._commit_block(block)
        self._render_open()
        if self._blocks_in_answer:
            self._commit([""])
        self.cancelled_answer = bool(self._blocks_in_answer)
        self._blocks_in_answer = 0
        while self._after_answer:
            self._commit(self._after_answer.pop(0))

    def close_reasoning(self) -> None:
        """The answer (or a call) starts after reasoning: the reasoning leaves the live region,
        is kept for ctrl-r, and one line in the transcript says it was there."""
        if not self.reasoning.strip():
            self.reasoning = ""
            return
        self.end_answer()
        seconds = round(time.monotonic() - self._reasoning_began)
        self.thoughts.append(self.reasoning)
        self.reasoning = ""
        took = f" for {seconds} s" if seconds >= 1 else ""
        self._commit([paint(f"✻ thought{took} · ctrl-r shows it", "2"), ""])

    def end_turn(self) -> None:
        """Commit the rest of the answer; reasoning is kept (ctrl-r), progress dropped."""
        self.close_reasoning()
        self.end_answer()
        for call_id, text in self._denials.items():
            self.commit_text(f"✗ denied {text}", "31")
        self._denials.clear()
        self._outputs.clear()
        self.tools.clear()
        self.subagents.clear()
        self.status_dirty = True

    def rerender(self) -> None:
        """Re-wrap the open block (after a terminal resize)."""
        self._rendered_open = "\0"
        self._render_open()

    def _commit_block(self, block: str) -> None:
        lines = self._renderer.markdown(block, self._width())
        if self._blocks_in_answer:
            lines = [""] + lines
        self._blocks_in_answer += 1
        self._commit(lines)

    def _render_open(self) -> bool:
        text = self._splitter.open_text
        if text == self._rendered_open:
            return False
        self._rendered_open = text
        if not text.strip():
            self.answer_lines = []
        elif self._splitter.in_fence:
            self.answer_lines = _open_fence_lines(text, self._width())
        else:
            self.answer_lines = self._renderer.markdown(text, self._width())
        return True


def _open_fence_lines(text: str, width: int) -> list[str]:
    """A code block still arriving: plain lines (highlighted once, when it closes)."""
    body = text.split("\n")[1:]
    return [clip(line, width) for line in body]


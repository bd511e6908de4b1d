"""What ``/rewind`` does to a live session: the prompts it can go back to, the plan for the
files, and the restore itself (files, conversation, or both). The UI drives it through
``AppConfig.rewind``; ``ketch rewind`` does the same without a session.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

WHATS = {"both": "code and conversation", "chat": "conversation", "code": "code"}


@dataclass(frozen=True)
class RewindChoice:
    turn: int
    label: str
    in_history: bool


@dataclass(frozen=True)
class RewindPlan:
    diff: str
    outside: list[str]
    unrestorable: list[str]


@dataclass(frozen=True)
class RewindResult:
    lines: list[str]
    prompt: str | None
    """The prompt the conversation went back to: the input box gets it."""


class SessionRewind:
    """``/rewind`` on whichever session ``live()`` returns when it is asked."""

    def __init__(self, live: Callable[[], Any]) -> None:
        self._live = live
        self._plan: Any = None

    @property
    def session(self) -> Any:
        session = self._live()
        if session is None:
            raise RuntimeError("the session is still loading")
        return session

    @property
    def checkpoints(self) -> Any:
        cp = getattr(self.session, "checkpoints", None)
        if cp is None:
            raise RuntimeError("checkpoints are off for this session, so there is nothing to rewind to")
        return cp

    async def prompts(self) -> list[RewindChoice]:
        from ketch.checkpoints.rewind import list_prompts

        entries = await asyncio.to_thread(list_prompts, self.checkpoints, self.session.session_id, list(self.session.messages))
        choices = []
        for e in entries:
            files = ", ".join(f"{f} +{a} -{r}" for f, (a, r) in sorted(e.files.items())[:3])
            more = f" (+{len(e.files) - 3} more)" if len(e.files) > 3 else ""
            text = " ".join(e.prompt.split())[:60]
            choices.append(RewindChoice(e.turn, f"{e.turn}. {text}" + (f"  · {files}{more}" if files else "  · no file changes"), e.in_history))
        return choices

    async def plan(self, turn: int) -> RewindPlan:
        from ketch.checkpoints.rewind import plan_code

        self._plan = await asyncio.to_thread(plan_code, self.checkpoints, self.session.session_id, turn)
        plan = self._plan
        return RewindPlan(plan.diff, plan.outside, [f.path for f in plan.files if f.action == "unrestorable"])

    async def apply(self, turn: int, what: str, *, include_changed: bool = False) -> RewindResult:
        from ketch.checkpoints.rewind import apply_code, cut_conversation, plan_code

        session, cp = self.session, self.checkpoints
        lines: list[str] = []
        if what in ("code", "both"):
            plan = self._plan if self._plan is not None and self._plan.target.turn == turn else await asyncio.to_thread(
                plan_code, cp, session.session_id, turn)
            self._plan = None
            done = await asyncio.to_thread(apply_code, cp, plan, session.workspace, include_outside=include_changed)
            counts = [f"{len(done[k])} {k}" for k in ("restored", "deleted", "left", "unrestorable") if done[k]]
            lines.append("Files: " + (", ".join(counts) if counts else "nothing to change") + ".")
            if done["left"]:
                lines.append("Left alone (changed since ketch last saw them): " + ", ".join(done["left"]))
        prompt = None
        if what in ("chat", "both"):
            kept, prompt = await asyncio.to_thread(cut_conversation, cp, session.session_id, list(session.messages), turn)
            from ketch.protocol.operations import Rewind

            session.apply(Rewind(tuple(kept)))
            lines.append(f"Conversation: back to before prompt {turn}; it is in the input box to edit and send again.")
        return RewindResult(lines, prompt)

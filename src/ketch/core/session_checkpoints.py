"""The session's side of checkpoints: a snapshot as a turn starts, before a later step
writes, and as the turn ends (``checkpoints.rewind.Checkpointer``).

A mixin of ``Session``. The turn's first snapshot runs on a thread while the first model
request is under way; every tool call waits for it before it runs, so nothing changes the
workspace before the checkpoint holds it. A checkpoint that fails turns checkpoints off for
the session with one warning; it never fails the turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ketch.protocol import events as ev

WRITING_KINDS = frozenset({"write", "shell", "mcp"})
WRITING_NAMES = frozenset({"task"})


class CheckpointSteps:
    """Checkpoint timing of one session (needs the attributes ``Session`` sets)."""

    _ck_off: bool = False
    _ck_turn: int = 0
    _ck_pending: asyncio.Task[Any] | None = None
    _ck_steps: set[int] | None = None

    @property
    def checkpoints(self) -> Any:
        """The session's checkpoints (a service), None once they failed: off for the rest of the session."""
        return None if self._ck_off else self.services.checkpoints  # type: ignore[attr-defined]

    def _ck_failed(self, exc: BaseException) -> None:
        self._ck_off = True
        self._emit(ev.Notice(level="warning", text=f"checkpoints are off for this session (rewind will not cover it): {exc}"))

    def _checkpoint_turn_start(self, prompt: str) -> None:
        cp = self.checkpoints
        if cp is None:
            return
        self._ck_steps = set()
        session_id = self.session_id

        def take() -> None:
            self._ck_turn = cp.next_turn(session_id)
            cp.take(session_id, self._ck_turn, "before", prompt=prompt)

        self._ck_pending = asyncio.get_running_loop().create_task(asyncio.to_thread(take))

    async def _checkpoint_ready(self) -> None:
        task, self._ck_pending = self._ck_pending, None
        if task is None:
            return
        try:
            await task
        except Exception as exc:  # noqa: BLE001 - never fail the turn
            self._ck_failed(exc)

    async def _checkpoint_before_tool(self, name: str, step: int) -> None:
        """Before a tool runs: the turn's first snapshot is done; a later step that writes gets its own."""
        await self._checkpoint_ready()
        cp = self.checkpoints
        if cp is None or self._ck_steps is None:
            return
        background = self.background_may_have_written()  # type: ignore[attr-defined]
        if self.kinds.get(name) not in WRITING_KINDS and name not in WRITING_NAMES and not background:
            return
        if step in self._ck_steps:
            return
        first = not self._ck_steps and not background
        self._ck_steps.add(step)
        if first:
            return  # nothing wrote since the turn's own checkpoint
        try:
            await asyncio.to_thread(cp.take, self.session_id, self._ck_turn, "step", step=step)
        except Exception as exc:  # noqa: BLE001
            self._ck_failed(exc)

    async def _checkpoint_turn_end(self) -> None:
        await self._checkpoint_ready()
        cp = self.checkpoints
        if cp is None or self._ck_steps is None:
            return
        self._ck_steps = None
        try:
            await asyncio.to_thread(cp.take, self.session_id, self._ck_turn, "after")
            notice = await asyncio.to_thread(cp.enforce_cap)
        except Exception as exc:  # noqa: BLE001
            self._ck_failed(exc)
            return
        if notice:
            self._emit(ev.Notice(level="warning", text=notice))

"""The session's side of background commands (``tools.background``): the event each one's
end makes, the lines the UI lists, ``/bashes``'s kill, and the reminder section.

A mixin of ``Session``. A command that ends during a turn is a ``BackgroundFinished`` event of
that turn (stream-json prints it, the UI shows it, the store keeps it with the step); one that
ends between turns waits in ``take_idle_events`` for the front end. The model learns of each
end from the ``Background commands`` section of the state reminder on its next request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, MutableMapping
from typing import Any

from ketch.protocol import events as ev

BACKGROUND_SECTION = "Background commands"


class BackgroundCommands:
    """Background commands of one session (needs the attributes ``Session`` sets)."""

    background_jobs: Any = None
    _bg_idle: list[ev.BackgroundFinished]
    _bg_version: int = 0
    _bg_checkpointed: int = 0

    def _attach_background(self, jobs: Any) -> None:
        """Own ``jobs`` (a ``tools.background.BackgroundJobs``, the session's service): hear of
        each end, list them, and tell the model of ended ones in the state reminder."""
        self.background_jobs = jobs
        self._bg_idle = []
        jobs.listeners.append(self._background_ended)
        jobs.on_start = self._background_started
        self.prefix.volatile = self.volatile_with_background(self.prefix.volatile)  # type: ignore[attr-defined]

    def _background_started(self, job: Any) -> None:
        self._bg_version += 1

    def _background_ended(self, job: Any) -> None:
        from ketch.tools.background import short_command

        self._bg_version += 1
        event = ev.BackgroundFinished(job_id=job.job_id, command=short_command(job.command), exit_code=job.exit_code, how=job.how())
        if self._turn_running():  # type: ignore[attr-defined]
            self._emit(event)  # type: ignore[attr-defined]
        else:
            self._bg_idle.append(dataclasses.replace(event, session_id=self.session_id))  # type: ignore[attr-defined]

    @property
    def background_version(self) -> int:
        """Changes whenever a background command starts or ends (the UI re-reads the status then)."""
        return self._bg_version

    def take_idle_events(self) -> list[ev.AgentEvent]:
        """Events that happened between turns (background commands that ended), once each."""
        idle = getattr(self, "_bg_idle", None)
        if not idle:
            return []
        out, self._bg_idle = list(idle), []
        return out

    def background_lines(self) -> list[str]:
        """One line per running background command: id, command, how long it has run."""
        from ketch.tools.background import short_command

        jobs = self.background_jobs
        if jobs is None:
            return []
        return [f"{j.job_id}  {short_command(j.command, 80)}  ({j.state()})" for j in jobs.running()]

    async def kill_background(self, job_id: str, by: str = "/bashes") -> str:
        """Stop one background command (``/bashes kill ID``); the line to print."""
        jobs = self.background_jobs
        if jobs is None:
            raise ValueError("this session runs no background commands")
        from pydantic_ai.exceptions import ToolFailed

        try:
            job = jobs.get(job_id)
        except ToolFailed as exc:
            raise ValueError(str(exc)) from None
        if not job.running:
            return f"{job.job_id} had already ended: {job.how()}"
        await jobs.kill(job.job_id, by)
        return f"stopped {job.job_id} and every process it started"

    def background_may_have_written(self) -> bool:
        """Whether a background command ran since the last checkpoint asked (so a step that
        writes nothing itself still gets its own snapshot, as a shell command's step does)."""
        jobs = self.background_jobs
        if jobs is None:
            return False
        busy = bool(jobs.running()) or self._bg_version != self._bg_checkpointed
        self._bg_checkpointed = self._bg_version
        return busy

    def volatile_with_background(self, volatile: Callable[[], MutableMapping[str, str]] | None) -> Callable[[], MutableMapping[str, str]] | None:
        """``volatile`` plus the section listing the background commands that ended."""
        if volatile is None:
            return None

        def sections() -> MutableMapping[str, str]:
            out = volatile()
            jobs = self.background_jobs
            summary = jobs.ended_summary() if jobs is not None else None
            if summary is not None:
                out[BACKGROUND_SECTION] = summary
            return out

        return sections

"""The one ordered per-step pipeline (``core.step_pipeline``).

- The capabilities a real session's agent (and a subagent's) runs are in the order
  ``STAGES`` declares, whichever package each came from; a capability no stage names is refused.
- The session's own stage does its work once a step, in its order: the requests the provider
  received, the ``Usage`` events and the stored history show it. A ``Usage`` event per request
  (no more, no fewer), each once that step's response is whole and before its tools run; each
  request's history, the state reminder in it, stored before the provider answered it.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, Hold, ToolCall, Turn

from ketch.core.step_pipeline import BEFORE_REQUEST, STAGES, StepPipeline, in_stage_order, stage_names
from ketch.frontends.assemble import build_session
from ketch.protocol import events as ev

STAGE_INDEX = {stage.name: n for n, stage in enumerate(STAGES)}


def _args(tmp_path: Path, base_url: str, wire: str = "openai-chat") -> argparse.Namespace:
    return argparse.Namespace(cwd=str(tmp_path), base_url=base_url, wire=wire, model="fake-model", yolo=True,
                              sandbox="full-access", approval=None)


def _agent_stages(session: Any) -> list[str]:
    """The stage of each capability the session's pydantic-ai agent holds, in the agent's order
    (after the SDK's own defaults, which it puts first: tool search, the pending-message drain)."""
    held = list(session.agent.root_capability.capabilities)
    kinds = [type(c).__name__ for c in held]
    first = kinds.index("Hooks")
    assert not {stage.kind for stage in STAGES} & set(kinds[:first]), kinds  # nothing of ketch's before its first stage
    return stage_names(held[first:])


def _in_declared_order(names: list[str]) -> bool:
    return [STAGE_INDEX[n] for n in names] == sorted(STAGE_INDEX[n] for n in names)


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
async def test_a_sessions_agent_runs_every_stage_in_the_declared_order(tmp_path: Path, isolated_home: Path, wire: str) -> None:
    from ketch.core.agents import AgentVariant

    with FakeProvider([Turn(text="ok")]) as fake:
        session = await build_session(_args(tmp_path, fake.base_url, wire), interactive=False)
        try:
            names = _agent_stages(session)
            assert _in_declared_order(names), names
            assert len(names) == len(set(names)), names  # one capability a stage
            assert {"session", "approval", "tool_offer", "strict_arguments", "small_window", "counted_cut", "redaction",
                    "item_not_found_retry", "context_length_retry", "calibration"} <= set(names), names
            assert names[0] == "session"  # first in the list: its after-response work (usage) runs last
            runner = session.deps.extras["subagents"]
            child = runner.factory(session, AgentVariant(name="explore", prompt="look", tools=("read",)), "explore-1")
            child_names = _agent_stages(child)
            assert _in_declared_order(child_names) and {"session", "strict_arguments", "redaction"} <= set(child_names), child_names
            await child.aclose()
        finally:
            await session.aclose()


def test_a_capability_without_a_stage_is_refused() -> None:
    class Unplaced:
        pass

    with pytest.raises(ValueError, match="Unplaced"):
        in_stage_order([Unplaced()])


def test_the_session_stage_lists_its_parts_in_the_declared_order() -> None:
    pipeline = StepPipeline(session=None)
    assert tuple(name for name, _ in pipeline.before) == BEFORE_REQUEST
    assert BEFORE_REQUEST.index("fit_window") < BEFORE_REQUEST.index("remind") < BEFORE_REQUEST.index("cache_marks") \
        < BEFORE_REQUEST.index("record")  # the reminder after the pruning, the store gets what is sent


async def test_each_step_records_and_counts_once_in_order(tmp_path: Path, isolated_home: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    holds = [Hold("step 1"), Hold("step 2")]
    script = [Turn(tool_calls=[ToolCall("read_file", {"path": "a.txt"})], hold=holds[0]),
              Turn(tool_calls=[ToolCall("shell", {"command": "echo hi"})], hold=holds[1]),
              Turn(text="done")]
    stored_at_request: list[str] = []
    with FakeProvider(script) as fake:
        session = await build_session(_args(tmp_path, fake.base_url), interactive=False)
        try:
            events: list[Any] = []

            async def drive() -> None:
                async for event in session.run_turn("go"):
                    events.append(event)

            turn = asyncio.create_task(drive())
            for hold in holds:  # the provider has the request and has not answered: what is stored now?
                assert await asyncio.to_thread(hold.wait_reached), hold
                stored_at_request.append("\n".join(session.store.message_rows(session.session_id)))
                hold.release()
            await turn
            requests = [r for r in fake.requests if r.wire == "chat"]
            usages = [i for i, e in enumerate(events) if isinstance(e, ev.Usage)]
            assert len(requests) == 3 and len(usages) == 3  # usage once a step, no more
            started = [i for i, e in enumerate(events) if isinstance(e, ev.ToolCallStarted)]
            finished = [i for i, e in enumerate(events) if isinstance(e, ev.ToolCallFinished)]
            assert len(started) == len(finished) == 2
            # each step: its usage once the response is whole, before its tools run, after the step before it
            assert usages[0] < started[0] < finished[0] < usages[1] < started[1] < finished[1] < usages[2], (usages, started, finished)
            # each request was stored before it was sent, the state reminder in it (reminded, then recorded)
            assert '"content":"go"' in stored_at_request[0] and '"content":"<system-reminder>' in stored_at_request[0]
            assert "alpha" not in stored_at_request[0] and "alpha" in stored_at_request[1] and "alpha" in requests[1].raw.decode()
        finally:
            await session.aclose()

"""What ``/model``, ``/think``, ``/agent``, ``/clear`` and ``/fork`` change lives in one object,
``session.state`` (``core.session_state.SessionState``).

Through a real session: each operation sent with ``Session.apply`` changes fields of that one
object and rebinds no other attribute of the session, except the history writer and the step's
event list a switch of conversation starts afresh; the services stay the same objects; a
switch starts the totals afresh in the same state.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fakeprovider import FakeProvider, Turn

from ketch.core.agents import AgentVariant
from ketch.core.session_state import SessionState
from ketch.frontends.assemble import build_session
from ketch.protocol import operations as op

SWITCH_BOOKKEEPING = {"_writer", "_step_events"}
"""Rebound when the session continues as another conversation (its writer, its step's events)."""


def _rebound(before: dict[str, Any], session: Any) -> set[str]:
    after = vars(session)
    return {k for k in before.keys() | after.keys() if before.get(k) is not after.get(k)}


async def test_each_operation_changes_the_one_state_object(tmp_path: Path, isolated_home: Path) -> None:
    args = argparse.Namespace(cwd=str(tmp_path), base_url="", wire="openai-chat", model="fake-model", yolo=False,
                              sandbox="full-access", approval=None)
    with FakeProvider([Turn(text="one")]) as fake:
        args.base_url = fake.base_url
        session = await build_session(args, interactive=False)
        try:
            state, services = session.state, session.services
            assert isinstance(state, SessionState)
            async for _ in session.run_turn("hi"):
                pass
            assert state.usage.input_tokens > 0 and state.messages is session.messages and len(state.messages) == 2

            before = dict(vars(session))
            session.apply(op.SetAgent(AgentVariant(name="plan", prompt="plan only", tools=("read_file",))))
            assert state.variant.name == "plan" and _rebound(before, session) == set()

            before = dict(vars(session))
            session.apply(op.SetThinking("high", {"max_tokens": 1000}))
            assert state.config.think == "high" and _rebound(before, session) == set()

            before = dict(vars(session))
            session.apply(op.SetModel(session.model, session.connection, None))
            assert _rebound(before, session) == set()

            old_id, before = state.session_id, dict(vars(session))
            forked = session.apply(op.Fork(in_place=False))
            assert forked and state.session_id == forked != old_id and len(state.messages) == 2
            assert _rebound(before, session) <= SWITCH_BOOKKEEPING and state.usage.input_tokens == 0

            before = dict(vars(session))
            cleared = session.apply(op.Clear(directory=str(tmp_path)))
            assert state.session_id == cleared and state.messages == [] and session.messages is state.messages
            assert _rebound(before, session) <= SWITCH_BOOKKEEPING
            assert session.state is state and session.services is services
        finally:
            await session.aclose()

"""The working line (elapsed, tokens in/out, current tool) and a status line that reads
the same from the first frame, after a turn, after resume, fork and compaction."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from fakeprovider import FakeProvider, Turn
from uifakes import FakeSession, Gate, Harness

from ketch.protocol.events import TextDelta, ToolCallStarted, Usage
from ketch.frontends.assemble import build_session
from ketch.frontends.slash_actions import SlashActions
from ketch.ui.statusline import status_text


async def test_working_line_counts_time_tokens_and_names_the_current_tool() -> None:
    turn = [Usage(input_tokens=1200, output_tokens=40), TextDelta(text="x" * 400),
            ToolCallStarted(call_id="c1", name="grep", args={"pattern": "foo"}), Gate("hold")]
    session = FakeSession([turn])
    async with Harness(session, columns=120) as h:
        await h.type("go\r")
        await h.wait_text("… working 0s · ↑ 1.2k ↓ 140 tokens · grep")
        await h.wait_text("… working 1s · ↑ 1.2k", timeout=2.5)
        session.gate("hold").set()
        await h.idle()
        assert "working" not in h.sink.text()


def _args(tmp: Path, base_url: str, **kw: object) -> argparse.Namespace:
    return argparse.Namespace(cwd=str(tmp), model="fake-model", wire="openai-chat", base_url=base_url, yolo=True, **kw)


async def test_cost_and_context_read_the_same_at_start_after_a_turn_resume_fork_and_compact(tmp_path: Path) -> None:
    script = [Turn(text="first answer " * 50, usage=(3000, 200)), Turn(text="summary of it"), Turn(text="later")]
    with FakeProvider(script) as fake:
        session = await build_session(_args(tmp_path, fake.base_url), interactive=True)
        try:
            start = session.status()
            assert start.cost_usd is None  # a model without a known price: unknown from the first frame
            assert "cost unknown" in status_text(start, 200)
            [e async for e in session.run_turn("hello")]
            after = session.status()
            assert after.cost_usd is None and after.context_tokens == 3200
            sid = session.session_id
        finally:
            await session.aclose()

        resumed = await build_session(_args(tmp_path, fake.base_url, resume=sid), interactive=True)
        try:
            st = resumed.status()
            assert st.cost_usd is None and "cost unknown" in status_text(st, 200)
            assert st.context_tokens > 0 and st.context_tokens == sum(st.context_parts.values())
            actions = SlashActions(lambda: resumed, _args(tmp_path, fake.base_url), tmp_path)
            await actions.run("fork", "")
            forked = resumed.status()
            assert forked.session_id != sid and forked.context_tokens > 0 and forked.cost_usd is None
            await actions.run("compact", "")
            compacted = resumed.status()
            assert 0 < compacted.context_tokens == sum(compacted.context_parts.values())
            assert compacted.context_parts["messages"] > 0
        finally:
            await resumed.aclose()

"""The scrollback seam: finished output is written once, above the live region, in one
write per frame wrapped in synchronized output. It relies on private prompt_toolkit
renderer attributes; these tests pin them."""

from __future__ import annotations

from prompt_toolkit.renderer import Renderer
from uifakes import FakeSession, Gate, Harness

from ketch.protocol.events import TextDelta
from ketch.ui.terminal import SYNC_BEGIN, SYNC_END


def test_renderer_still_has_the_private_state_the_seam_rewinds() -> None:
    import inspect

    source = inspect.getsource(Renderer.reset) + inspect.getsource(Renderer.render)
    for name in ("self._cursor_pos", "self._last_screen", "self._last_style"):
        assert name in source


async def test_committed_block_bytes_never_recur_in_later_frames() -> None:
    turn = [
        TextDelta(text="Alpha paragraph one "), Gate("a"),
        TextDelta(text="ends.\n\nBravo para"), Gate("b"),
        TextDelta(text="graph two.\n\nCharlie"), Gate("c"),
        TextDelta(text=" three."),
    ]
    session = FakeSession([turn])
    async with Harness(session) as h:
        await h.type("go\r")
        await h.wait_text("Alpha paragraph one")
        session.gate("a").set()
        await h.wait_text("Bravo para")
        session.gate("b").set()
        await h.wait_text("Charlie")
        session.gate("c").set()
        await h.idle()
        writes = h.sink.writes
        for text in ("Alpha paragraph one ends.", "Bravo paragraph two.", "Charlie three."):
            hits = [i for i, w in enumerate(writes) if text in w]
            assert len(hits) == 1, (text, hits)
            assert f"\x1b[2K{text}" in writes[hits[0]]
        lines = h.sink.display()
        order = [lines.index(t) for t in ("› go", "Alpha paragraph one ends.", "Bravo paragraph two.", "Charlie three.")]
        assert order == sorted(order)


async def test_every_frame_is_one_synchronized_write() -> None:
    session = FakeSession(default_turn=lambda p: [TextDelta(text="x " * 50 + "\n\nDone.")])
    async with Harness(session) as h:
        await h.type("hello\r")
        await h.idle()
        frames = [w for w in h.sink.writes if w]
        assert frames
        assert all(w.startswith(SYNC_BEGIN) and w.endswith(SYNC_END) for w in frames)
        assert all(w.count(SYNC_BEGIN) == 1 for w in frames)
        commit = next(w for w in frames if "Done." in w)
        assert "\x1b[J" in commit and "›" in commit  # erase, commit, and the prompt redrawn together


async def test_long_answer_scrolls_into_history_once_and_in_order() -> None:
    paragraphs = [f"Paragraph number {i} of the answer." for i in range(60)]
    session = FakeSession(default_turn=lambda p: [TextDelta(text="\n\n".join(paragraphs) + "\n")])
    async with Harness(session, rows=20) as h:
        await h.type("long\r")
        await h.idle()
        lines = [line for line in h.sink.all_lines() if line.startswith("Paragraph number")]
        assert lines == paragraphs

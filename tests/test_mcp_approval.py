"""The per-server MCP question in the terminal UI: asked one after another until none is left,
and an answer that does not stick ends the questions instead of looping."""

from __future__ import annotations

import asyncio

from ketch.ui.trust_overlay import TrustOverlay, TrustQuestion, ask_each


def test_each_question_is_asked_in_turn_with_its_own_labels() -> None:
    stored: list[tuple[str, bool]] = []
    pending = [
        TrustQuestion("/w", ".ketch/config.toml", [("allow shell", False)]),
        TrustQuestion("/w", ".ketch/config.toml", [("runs srv --x", False)], heading="MCP server a wants to start",
                      labels=("Start this server (y)", "Do not start it (n)")),
    ]
    for q in pending:
        q.answer = lambda ok, q=q: (stored.append((q.heading, ok)), pending.remove(q))
    shown: list[str] = []

    async def next_question():
        return pending[0] if pending else None

    def push(overlay: TrustOverlay) -> None:
        shown.append("".join(text for _style, text in overlay.fragments(80)))
        overlay.on_key("y" if not overlay.question.heading else "n")

    asyncio.run(ask_each(next_question, push))
    assert stored == [("", True), ("MCP server a wants to start", False)]
    assert "runs srv --x" in shown[1] and "Do not start it (n)" in shown[1] and "Trust this folder" not in shown[1]


def test_an_answer_that_does_not_stick_stops_the_questions() -> None:
    question = TrustQuestion("/w", ".ketch/config.toml", [("runs x", False)], heading="MCP server a wants to start")
    asked: list[bool] = []
    question.answer = asked.append  # stores nothing: the same question comes back

    async def next_question():
        return question

    asyncio.run(ask_each(next_question, lambda overlay: overlay.on_key("y")))
    assert asked == [True]

"""A runnable demo of the UI with a fake session (``python -m ketch.ui.demo``).

Used by bench/startup.py and bench/render.py: every prompt is answered with a long
Markdown text streamed at ``--rate`` tokens a second. No model, no network.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import AsyncIterator

from ketch.protocol.events import AgentEvent, Decision, TextDelta, TurnFinished
from ketch.protocol.frontend import SessionStatus


END_OF_ANSWER = "That is the whole answer."


def sample_answer(tokens: int = 4000) -> str:
    """Deterministic Markdown of about ``tokens`` word-tokens: prose, lists, code fences."""
    parts: list[str] = []
    count = 0
    n = 0
    while count < tokens:
        n += 1
        parts.append(f"## Section {n}")
        parts.append(" ".join(f"word{n}x{i} flows onward" for i in range(14)) + ".")
        parts.append("\n".join(f"- point {n}.{i} about `item_{i}` matters" for i in range(4)))
        code = "\n".join(f"    total_{i} = compute({n}, {i})  # step {i}" for i in range(6))
        parts.append(f"```python\ndef section_{n}():\n{code}\n    return total_0\n```")
        count = len(split_tokens("\n\n".join(parts)))
    parts.append(END_OF_ANSWER)
    return "\n\n".join(parts) + "\n"


def split_tokens(text: str) -> list[str]:
    """Word-sized pieces (a word with its trailing space), about one token each."""
    return re.findall(r"\S+\s*|\s+", text)


class DemoSession:
    """Streams ``answer`` for every prompt at ``rate`` tokens per second."""

    def __init__(self, answer: str, rate: float) -> None:
        self._tokens = split_tokens(answer)
        self._rate = rate
        self._cancelled = False
        self.turns = 0

    async def run_turn(self, prompt: str) -> AsyncIterator[AgentEvent]:
        self._cancelled = False
        self.turns += 1
        loop = asyncio.get_running_loop()
        start = loop.time()
        sent = 0
        while sent < len(self._tokens) and not self._cancelled:
            due = min(len(self._tokens), int((loop.time() - start) * self._rate) + 1)
            if due > sent:
                yield TextDelta(text="".join(self._tokens[sent:due]))
                sent = due
            await asyncio.sleep(0.005)
        yield TurnFinished(reason="cancelled" if self._cancelled else "done")

    def decide(self, request_id: str, decision: Decision, reason: str = "") -> None:
        """No requests in the demo."""

    def answer(self, request_id: str, text: str) -> None:
        """No requests in the demo."""

    def interrupt_command(self) -> bool:
        return False

    def cancel_turn(self) -> None:
        self._cancelled = True

    def status(self) -> SessionStatus:
        return SessionStatus(session_id="demo", model="demo-model", cwd="/demo", cost_usd=0.0)


def main(argv: list[str] | None = None) -> int:
    """Run the demo UI on this terminal."""
    from ketch.ui.app import early_prompt, quiet_tty

    with quiet_tty():
        early_prompt()
        parser = argparse.ArgumentParser(prog="python -m ketch.ui.demo")
        parser.add_argument("--rate", type=float, default=200.0, help="tokens per second")
        parser.add_argument("--tokens", type=int, default=4000, help="length of the answer")
        parser.add_argument("--flush", type=float, default=0.06, help="flush interval (s)")
        args = parser.parse_args(argv)
        from ketch.ui.app import run_app
        from ketch.ui.appconfig import AppConfig

        async def factory() -> DemoSession:
            return DemoSession(sample_answer(args.tokens), args.rate)

        config = AppConfig(session_factory=factory, flush_interval=args.flush)
        try:
            return asyncio.run(run_app(config))
        except KeyboardInterrupt:
            return 130


if __name__ == "__main__":
    sys.exit(main())

"""Serve the fake provider until killed, for trying ``ketch`` by hand or in tmux.

    python tests/fakeprovider_server.py [demo|echo] [--port N] [--slow SECONDS]

Prints the base URL on the first line of stdout (``http://127.0.0.1:PORT/v1``; ``--port``
picks the port, a free one by default), then serves until SIGTERM/ctrl-c. Point ketch at
it with ``ketch --base-url URL --wire openai-chat --model fake-model``.

Side requests are answered apart from the script: a session-title request (ketch names
each new interactive session with a small model call) gets a fixed title and does not
use up a scripted turn, so the walkthrough plays the same however the requests race.

Scenarios:
  demo  the README walkthrough: an edit that needs approval, a slow answer (so a second
        prompt can be queued), a ``sleep 30`` shell call to interrupt, then echo answers.
  echo  every prompt is answered with its own text.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "src"))

from fakeprovider import FakeProvider, RecordedRequest, ToolCall, Turn, tool_results, user_texts  # noqa: E402

from ketch.state.titles import TITLE_INSTRUCTIONS  # noqa: E402

GREETING = 'print("hello from ketch")\n'
DEMO_TITLE = "Greeting script and a long check"


def is_title_request(request: RecordedRequest) -> bool:
    """True for ketch's session-title call: its instructions, and no tools offered."""
    body = request.body or {}
    return "tools" not in body and TITLE_INSTRUCTIONS in json.dumps(body, ensure_ascii=False)


def echo(request: RecordedRequest) -> Turn:
    """Answer with the last user text, or quote the tool result just sent back."""
    items = (request.body or {}).get("messages") or []
    if items and isinstance(items[-1], dict) and items[-1].get("role") == "tool":
        result = tool_results(request)[-1][1].strip()
        return Turn(text=f"The tool said: {result.splitlines()[0] if result else '(no output)'}")
    texts = user_texts(request)
    return Turn(text=f"You said: {texts[-1] if texts else '(nothing)'}")


def after_interrupt(request: RecordedRequest) -> Turn:
    results = tool_results(request)
    said = results[-1][1].strip().splitlines()[0] if results else "(no result)"
    return Turn(text=f"The command was stopped before it finished (the tool said: \"{said}\"). "
                     "Nothing else ran, so the check can be retried later.")


def demo_script(slow: float = 4.0) -> list[Any]:
    """The walkthrough in README.md (see the module docstring)."""
    return [
        Turn(text="I'll create the file.", tool_calls=[ToolCall("write_file", {"path": "hello.py", "content": GREETING})]),
        Turn(text="Created `hello.py`. Run it with:\n\n```sh\npython hello.py\n```\n", delay=slow),
        Turn(text="Starting the long check.", tool_calls=[ToolCall("shell", {"command": "sleep 30"})]),
        after_interrupt,
    ]


class Director:
    """Plays the scenario for model requests and answers side requests on the side."""

    def __init__(self, script: list[Any], then: Callable[[RecordedRequest], Turn] | None = echo) -> None:
        self._script = deque(script)
        self._then = then
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Turn:
        if is_title_request(request):
            return Turn(text=DEMO_TITLE)
        with self._lock:
            entry = self._script.popleft() if self._script else self._then
        if entry is None:
            return Turn(text="(script exhausted)")
        return entry(request) if callable(entry) else entry


def serve(script: list[Any], port: int = 0, entries: int = 10_000) -> FakeProvider:
    """A started fake provider playing ``script`` through a ``Director``."""
    director = Director(script)
    return FakeProvider([director] * entries, strict_responses=False).start(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", nargs="?", choices=("demo", "echo"), default="demo")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--slow", type=float, default=4.0, help="seconds the demo's second answer takes")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0-65535, not {args.port}")
    try:
        fake = serve(demo_script(args.slow) if args.scenario == "demo" else [], args.port)
    except OSError as exc:
        print(f"fakeprovider_server: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(fake.base_url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    fake.stop(check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

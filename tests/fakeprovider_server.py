"""Serve the fake provider until killed, for trying ``ketch`` by hand or in tmux.

    python tests/fakeprovider_server.py [demo|echo] [--port N]

Prints the base URL on the first line of stdout (``http://127.0.0.1:PORT/v1``), then
serves until SIGTERM/ctrl-c. Point ketch at it with
``ketch --base-url URL --wire openai-chat --model fake-model``.

Scenarios:
  demo  the README walkthrough: an edit that needs approval, a slow answer (so a second
        prompt can be queued), a ``sleep 30`` shell call to interrupt, then echo answers.
  echo  every prompt is answered with its own text.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from fakeprovider import FakeProvider, RecordedRequest, ToolCall, Turn, tool_results, user_texts  # noqa: E402

GREETING = 'print("hello from ketch")\n'


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


def demo_script(slow: float = 4.0) -> list:
    """The walkthrough in README.md (see the module docstring)."""
    return [
        Turn(text="I'll create the file.", tool_calls=[ToolCall("write_file", {"path": "hello.py", "content": GREETING})]),
        Turn(text="Created `hello.py`. Run it with:\n\n```sh\npython hello.py\n```\n", delay=slow),
        Turn(text="Starting the long check.", tool_calls=[ToolCall("shell", {"command": "sleep 30"})]),
        after_interrupt,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", nargs="?", choices=("demo", "echo"), default="demo")
    parser.add_argument("--slow", type=float, default=4.0, help="seconds the demo's second answer takes")
    args = parser.parse_args(argv)
    script = demo_script(args.slow) if args.scenario == "demo" else []
    fake = FakeProvider(script + [echo] * 500, strict_responses=False).start()
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

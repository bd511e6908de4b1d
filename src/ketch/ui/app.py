"""Entry points of the interactive UI: ``run_app`` (async) and ``main`` (sync)."""

from __future__ import annotations

import asyncio
import sys
from contextlib import contextmanager
from collections.abc import Iterator
from typing import Any

from ketch.ui.appconfig import AppConfig

__all__ = ["AppConfig", "run_app", "main", "quiet_tty", "early_prompt"]

EARLY_PROMPT = "\r\x1b[1m› \x1b[0m\x1b[K\r"


def early_prompt() -> None:
    """Draw the prompt marker at once, before prompt_toolkit is imported (~0.3 s).

    Keys typed meanwhile wait in the tty (echo is off) and reach the input when the app
    starts; its first frame draws over this line.
    """
    if sys.stdout.isatty():
        sys.stdout.write(EARLY_PROMPT)
        sys.stdout.flush()


@contextmanager
def quiet_tty() -> Iterator[None]:
    """Turn off tty echo at once, so keys typed before raw mode do not print as garbage."""
    try:
        import termios

        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
    except Exception:  # noqa: BLE001 - not a tty (pipes, tests): nothing to do
        yield
        return
    quiet = list(saved)
    quiet[0] &= ~termios.ICRNL  # Enter stays "\r", as in the app's raw mode
    quiet[3] &= ~(termios.ECHO | termios.ICANON)
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


async def run_app(config: AppConfig, *, input: Any = None, output: Any = None) -> int:
    """Run the interactive UI (on this terminal unless ``input``/``output`` are given),
    then print the farewell; returns the exit code."""
    from ketch.ui.controller import KetchApp
    from ketch.ui.farewell import farewell_lines

    app = KetchApp(config, input=input, output=output)
    code = await app.run()
    app.refresh_status()
    for line in farewell_lines(app.status, config.program):
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return code


def main(config: AppConfig) -> int:
    """Synchronous wrapper: quiet the tty first, then run the app."""
    with quiet_tty():
        early_prompt()
        try:
            return asyncio.run(run_app(config))
        except KeyboardInterrupt:
            return 130

"""The ``shell`` tool's command run in a terminal the editor creates (``ketch acp`` with a
client offering ``terminal``): the user watches it live in the editor and can kill it there.

What runs is exactly what would run here: the sandbox's launch argv, started with ``env -i``
and ketch's scrubbed child environment (the editor's own environment, keys included, never
reaches it). The gate decided before the tool ran. Output is polled into the live sink and
kept for the result; the timeout and an interrupt kill the terminal's command; the terminal
is always released.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARK = "KETCH_EDITOR_RUN"
"""The environment variable naming one run, so its processes can be found and killed: the editor
kills only the process it started, not what that one started."""

POLL_S = 0.2
"""How often the editor is asked for the output so far (for the live view and the result)."""


@dataclass(frozen=True)
class TerminalRun:
    """How a command in the editor's terminal ended."""

    output: str
    code: int | None
    signal: str | None
    timed_out: bool


def scrubbed_argv(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``argv`` started with exactly ``env`` and nothing of the starting process's environment."""
    if "=" in argv[0]:
        raise ValueError(f"a program name with '=' cannot follow env's assignments: {argv[0]!r}")
    return ["env", "-i", "--", *(f"{k}={v}" for k, v in env.items() if k and "=" not in k), *argv]


async def run_in_editor_terminal(terminal: Any, call_id: str, argv: Sequence[str], cwd: Path, env: Mapping[str, str],
                                 timeout_s: float, sink: Callable[[str], None], output_cap: int) -> TerminalRun:
    """Run ``argv`` in a terminal of the editor (``terminal``: ``EditorTerminals``) and wait for it."""
    import secrets

    mark = secrets.token_hex(8)
    handle = await terminal.create(call_id, scrubbed_argv(argv, {**env, MARK: mark}), cwd, output_cap)

    async def kill() -> None:
        await handle.kill()
        await asyncio.to_thread(kill_marked, mark)

    seen = 0
    timed_out = False

    async def pump() -> str:
        nonlocal seen
        output = await handle.output()
        if len(output) > seen:
            sink(output[seen:])
        seen = len(output)
        return output

    exit_wait = asyncio.ensure_future(handle.wait_for_exit())
    try:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not exit_wait.done():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                timed_out = True
                await kill()
                break
            await asyncio.wait({exit_wait}, timeout=min(POLL_S, left))
            await pump()
        code, sig = await exit_wait
        return TerminalRun(await pump(), code, sig, timed_out)
    except BaseException:
        await asyncio.shield(kill())  # an interrupt or a cancelled turn: the command stops too
        raise
    finally:
        if not exit_wait.done():
            exit_wait.cancel()
        await asyncio.shield(handle.release())


def kill_marked(mark: str) -> None:
    """Kill every process of this user carrying the run's mark, with everything it started."""
    import psutil

    for process in psutil.process_iter():
        try:
            if process.environ().get(MARK) != mark:
                continue
            for member in [process, *process.children(recursive=True)]:
                member.kill()
        except (psutil.Error, OSError):
            continue  # gone, or not ours to read

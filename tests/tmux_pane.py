"""A real terminal for end-to-end UI tests: a private tmux server running a clean bash in the
test's directory, with this venv's ``ketch`` on PATH and the test's own config and data dirs."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest


@contextmanager
def tmux_pane(tmp_path: Path, name: str, *, columns: int, rows: int) -> Iterator[SimpleNamespace]:
    """``keys(*keys)``, ``wait(text, timeout)`` (the scrollback once it shows ``text``) and
    ``screen()``; the tmux server is killed on exit."""
    if shutil.which("tmux") is None:
        pytest.fail(f"tmux is required for the end-to-end {name} test")
    sock = f"ketch-{name}-{os.getpid()}-{tmp_path.name}"

    def tmux(*args: str) -> str:
        return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True, timeout=10).stdout

    env = {
        "HOME": os.environ["HOME"], "KETCH_CONFIG_DIR": os.environ["KETCH_CONFIG_DIR"],
        "KETCH_DATA_DIR": os.environ["KETCH_DATA_DIR"], "PYDANTIC_AI_NO_BANNER": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "TERM": "xterm-256color", "PS1": "$ ",
    }
    shell_cmd = "env -i " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " bash --norc --noprofile"
    tmux("new-session", "-d", "-s", "k", "-x", str(columns), "-y", str(rows), "-c", str(tmp_path), shell_cmd)

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", "k", "-S", "-")

    def wait(text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = screen()
            if text in shown:
                return shown
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared:\n{screen()}")

    try:
        wait("$")
        yield SimpleNamespace(keys=lambda *k: tmux("send-keys", "-t", "k", *k), wait=wait, screen=screen)
    finally:
        tmux("kill-server")

"""Shared by the git trap tests: repositories whose config names programs that leave markers."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic_ai.exceptions import ToolFailed

from ketch.core.prompt import git_summary
from ketch.tools.base import ToolDeps, ToolSettings
from ketch.tools.git import git_blame, git_diff, git_log, git_show, git_status, staged_diff
from ketch.tools.workspace import Workspace


@dataclass
class Ctx:
    deps: ToolDeps
    tool_call_id: str = "call-1"


def git(root: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], check=check, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL, timeout=15)


class Traps:
    """Programs that leave a marker named after them in ``markers/`` and pass data through."""

    def __init__(self, base: Path) -> None:
        self.bin = base / "bin"
        self.markers = base / "markers"
        self.bin.mkdir()
        self.markers.mkdir()

    def program(self, name: str, *, passthrough: bool = True) -> str:
        """A program leaving ``markers/<name>``; it copies stdin (or its one file argument) to
        stdout when ``passthrough``, else it exits 1 at once (for transports and prompts)."""
        path = self.bin / name
        rest = 'if [ "$#" -eq 1 ] && [ -f "$1" ]; then cat "$1"; else cat; fi\n' if passthrough else "exit 1\n"
        path.write_text(f'#!/bin/sh\necho "$*" >> {self.markers / name}\n{rest}')
        path.chmod(0o755)
        return str(path)

    def fired(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())

    def clear(self) -> None:
        for path in self.markers.iterdir():
            path.unlink()


def traps_fixture(tmp_path: Path) -> Traps:
    return Traps(tmp_path)


def repo_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key, value in {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
                       "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com"}.items():
        monkeypatch.setenv(key, value)
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("alpha\n")
    (root / "b.txt").write_text("bravo\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    (root / "a.txt").write_text("alpha\nagain\n")
    git(root, "commit", "-q", "-am", "second")
    return root


def ctx_for(root: Path) -> Ctx:
    return Ctx(ToolDeps(workspace=Workspace(root), settings=ToolSettings(shell_timeout_s=20)))


def touch_same_size(path: Path) -> None:
    """Change a file without changing its size, so git must hash it (run the clean filter)."""
    text = path.read_text()
    path.write_text(text[:-2] + ("X" if text[-2] != "X" else "Y") + "\n")
    os.utime(path, (1_600_000_000, 1_600_000_000))


async def run_every_tool(root: Path) -> None:
    ctx = ctx_for(root)
    for call in (lambda: git_status(ctx), lambda: git_diff(ctx), lambda: git_diff(ctx, staged=True),
                 lambda: git_diff(ctx, ref="HEAD~1"), lambda: git_log(ctx), lambda: git_show(ctx),
                 lambda: git_show(ctx, "HEAD:a.txt"), lambda: git_blame(ctx, "a.txt")):
        try:
            await call()
        except ToolFailed:
            pass  # a refused read is fine; a program running is not
    staged_diff(root)
    git_summary(root, timeout=20)


def armed(traps: Traps, *plain: subprocess.CompletedProcess[str]) -> None:
    """The plain-git control left a marker: the trap is real. Clear it for the tool run."""
    assert traps.fired(), f"the trap did not fire under plain git: {[p.stderr for p in plain]}"
    traps.clear()

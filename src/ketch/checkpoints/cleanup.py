"""``ketch checkpoints list|prune``: what the workspaces' checkpoints take, and removing the
ones whose session is gone or that are older than a number of days."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ketch.checkpoints.log import CheckpointLog
from ketch.checkpoints.shadow import ShadowRepo


@dataclass(frozen=True)
class WorkspaceCheckpoints:
    folder: Path
    root: str
    count: int
    size_bytes: int


def _workspaces(data_dir: Path) -> list[Path]:
    base = data_dir / "checkpoints"
    return sorted(p for p in base.iterdir() if (p / "log.db").exists()) if base.is_dir() else []


def _open(folder: Path) -> tuple[str, CheckpointLog, ShadowRepo]:
    root = (folder / "workspace").read_text(encoding="utf-8", errors="surrogateescape").strip()
    return root, CheckpointLog(folder, Path(root)), ShadowRepo(Path(root), folder / "git")


def list_workspaces(data_dir: Path) -> list[WorkspaceCheckpoints]:
    out = []
    for folder in _workspaces(data_dir):
        root, log, shadow = _open(folder)
        try:
            out.append(WorkspaceCheckpoints(folder, root, len(log.oldest_first()), shadow.size_bytes() if (folder / "git").exists() else 0))
        finally:
            log.close()
    return out


def prune(data_dir: Path, live_sessions: set[str], *, older_than_days: float) -> list[tuple[str, int]]:
    """Remove checkpoints of sessions not in ``live_sessions`` and those older than the limit;
    returns (workspace, how many went) for each workspace that lost any."""
    cutoff = time.time() - older_than_days * 86400
    report = []
    for folder in _workspaces(data_dir):
        root, log, shadow = _open(folder)
        try:
            gone = [c.id for c in log.oldest_first() if c.session_id not in live_sessions or c.created < cutoff]
            if gone:
                log.delete(gone)
                if (folder / "git").exists():
                    shadow.drop([str(i) for i in gone])
                    shadow.prune()
                report.append((root, len(gone)))
        finally:
            log.close()
    return report

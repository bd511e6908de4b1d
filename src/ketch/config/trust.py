"""Which folders the user trusts, and with which repository config.

The answer lives in ``trust.json`` in the user's data dir, per project folder, with the
digest of the widening part of that folder's ``.ketch/config.toml``
(``config/project.py``). A folder counts as trusted only while its widening part still
has the digest the user trusted: a changed config is asked about again (interactive) or
ignored (headless, without ``--trust``). A file that cannot be read trusts nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ketch.config.folder_records import read_folders, write_folders

TRUST_FILE = "trust.json"
_VERSION = 1

Standing = Literal["nothing_to_trust", "trusted", "flag", "declined", "unknown", "changed"]


@dataclass(frozen=True)
class TrustRecord:
    folder: str
    trusted: bool
    digest: str
    at: float


@dataclass(frozen=True)
class ProjectTrust:
    """How this run treats the project's config: what it would add and whether it does."""

    folder: Path
    split: Any
    """The ``ProjectSplit`` (None when the project has no config file)."""
    standing: Standing

    @property
    def applied(self) -> bool:
        """Whether the widening part takes effect."""
        return self.standing in ("trusted", "flag")

    @property
    def needs_answer(self) -> bool:
        """Whether the interactive UI should ask (never asked, or the config changed)."""
        return self.standing in ("unknown", "changed")

    def notice(self) -> str:
        """One line naming what was ignored (empty when nothing was)."""
        split = self.split
        parts: list[str] = []
        if split is not None and split.dropped:
            parts.append(
                f"{split.path}: ignored {', '.join(split.dropped)} (only your own config may set it)"
            )
        if split is not None and split.widens and not self.applied:
            why = {
                "declined": "you chose not to trust this folder",
                "changed": "its config changed since you trusted this folder",
                "unknown": "this folder is not trusted",
            }[self.standing]
            named = "; ".join(a.text for a in split.additions)
            parts.append(
                f"{split.path}: {why}, so ketch ignored what it would add: {named}. "
                "Trust it with 'ketch trust add' (or --trust for one run) to apply it"
            )
        return " ".join(parts)


def widening_digest_of_nothing() -> str:
    from ketch.config.project import widening_digest

    return widening_digest({})


def trust_path() -> Path:
    from ketch.config.dirs import user_data_dir

    return user_data_dir() / TRUST_FILE


def _read() -> dict[str, Any]:
    return read_folders(trust_path())


def _write(folders: dict[str, Any]) -> None:
    write_folders(trust_path(), folders, _VERSION)


def _record(folder: str, entry: Any) -> TrustRecord | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("digest"), str):
        return None
    at = entry.get("at")
    return TrustRecord(folder, entry.get("trusted") is True, entry["digest"], float(at) if isinstance(at, (int, float)) else 0.0)


def lookup(folder: Path) -> TrustRecord | None:
    return _record(str(folder), _read().get(str(folder)))


def records() -> list[TrustRecord]:
    found = [_record(k, v) for k, v in sorted(_read().items())]
    return [r for r in found if r is not None]


def remember(folder: Path, trusted: bool, digest: str) -> None:
    """Store the user's answer for ``folder`` and the digest it was given for."""
    folders = _read()
    folders[str(folder)] = {"trusted": trusted, "digest": digest, "at": round(time.time(), 3)}
    _write(folders)


def forget(folder: Path) -> bool:
    folders = _read()
    if folders.pop(str(folder), None) is None:
        return False
    _write(folders)
    return True


def standing_of(folder: Path, split: Any, *, flag: bool = False) -> ProjectTrust:
    """How a run treats ``folder``'s config: ``flag`` is ``--trust``."""
    if split is None or not split.widens:
        return ProjectTrust(folder, split, "nothing_to_trust")
    if flag:
        return ProjectTrust(folder, split, "flag")
    record = lookup(folder)
    if record is None:
        return ProjectTrust(folder, split, "unknown")
    if record.digest != split.digest:
        return ProjectTrust(folder, split, "changed")
    return ProjectTrust(folder, split, "trusted" if record.trusted else "declined")

"""Taking checkpoints for a session, and planning and applying a rewind.

``Checkpointer`` is what the loop holds: it snapshots the workspace as a turn starts, before
a later step writes, and as the turn ends. A code rewind is planned first (``plan_code``):
the files that differ between the chosen checkpoint and now, the diff that would put them
back, and the files that changed since ketch last looked (by the user, by hand), which are
left alone unless the caller says otherwise. Applying writes only inside the workspace jail.
A conversation rewind cuts the stored history back to before the chosen prompt
(``cut_conversation``).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ketch.checkpoints.log import Checkpoint, CheckpointLog, workspace_dir
from ketch.checkpoints.shadow import ShadowError, ShadowRepo
import ketch.tools.beneath as beneath

DEFAULT_CAP_BYTES = 2 * 1024**3


class RewindError(Exception):
    """A rewind that cannot be done as asked (no such prompt, no checkpoint)."""


def checkpointer_for(root: Path, *, enabled: bool, cap_mb: int = DEFAULT_CAP_BYTES // 1024**2) -> tuple["Checkpointer | None", str]:
    """The session's checkpointer, or None with the reason it is off (one notice)."""
    import shutil

    from ketch.config.settings import user_data_dir

    if not enabled:
        return None, ""
    root = Path(root).resolve()
    if root == Path(root.anchor) or root == Path.home().resolve():
        return None, f"checkpoints are off: {root} is not a project folder (no .git or .ketch), so /rewind cannot put files back"
    if shutil.which("git") is None:
        return None, "checkpoints are off: git is not installed, so /rewind cannot put files back"
    return Checkpointer(root, user_data_dir(), cap_bytes=cap_mb * 1024**2), ""


class Checkpointer:
    """Checkpoints of one workspace (created lazily in the user data dir)."""

    def __init__(self, root: Path, data_dir: Path, *, cap_bytes: int = DEFAULT_CAP_BYTES) -> None:
        self.root = Path(root)
        self.folder = workspace_dir(data_dir, self.root)
        self.cap_bytes = cap_bytes
        self._shadow: ShadowRepo | None = None
        self._log: CheckpointLog | None = None

    @property
    def shadow(self) -> ShadowRepo:
        if self._shadow is None:
            self._shadow = ShadowRepo(self.root, self.folder / "git")
        return self._shadow

    @property
    def log(self) -> CheckpointLog:
        if self._log is None:
            self._log = CheckpointLog(self.folder, self.root)
        return self._log

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def next_turn(self, session_id: str) -> int:
        turns = [c.turn for c in self.log.of_session(session_id) if c.kind != "rewind"]
        return max(turns, default=0) + 1

    def take(self, session_id: str, turn: int, kind: str, *, step: int = 0, prompt: str = "") -> Checkpoint:
        snap = self.shadow.snapshot()
        ident = self.log.add(session_id, turn, kind, snap, step=step, prompt=prompt)
        self.shadow.keep(str(ident), snap.tree)
        return Checkpoint(ident, session_id, turn, step, kind, snap.tree, snap.large, prompt, 0.0)

    def enforce_cap(self) -> str | None:
        """Drop the oldest checkpoints while the store is over its cap; a notice when any went."""
        size = self.shadow.size_bytes()
        if size <= self.cap_bytes:
            return None
        rows = self.log.oldest_first()
        dropped: list[int] = []
        for row in rows[: max(1, len(rows) // 4)]:  # the oldest quarter, then measure again next turn
            dropped.append(row.id)
        self.log.delete(dropped)
        self.shadow.drop([str(i) for i in dropped])
        self.shadow.prune()
        return (
            f"checkpoints of this workspace passed {self.cap_bytes // 1024**2} MiB; "
            f"the {len(dropped)} oldest were dropped (their prompts can no longer be rewound)"
        )


# ---------------------------------------------------------------------- the session's prompts


@dataclass(frozen=True)
class PromptEntry:
    turn: int
    prompt: str
    files: dict[str, tuple[int, int]]
    """Files the turn changed, with lines added and removed (from its before/after checkpoints)."""
    in_history: bool
    """Whether the conversation can go back to before it (compaction may have summarized it)."""


def turn_checkpoints(cp: Checkpointer, session_id: str) -> dict[int, list[Checkpoint]]:
    turns: dict[int, list[Checkpoint]] = {}
    for row in cp.log.of_session(session_id):
        if row.kind != "rewind":
            turns.setdefault(row.turn, []).append(row)
    return turns


def prompt_positions(messages: list[Any]) -> list[tuple[int, str]]:
    """(message index, text) of each user prompt in a history; compaction summaries are not prompts."""
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from ketch.context.reminders import is_reminder

    from ketch.context.prune import SUMMARY_HEADER

    found = []
    for index, message in enumerate(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart) and not is_reminder(part):
                text = part.content if isinstance(part.content, str) else " ".join(str(c) for c in part.content if isinstance(c, str))
                if not text.startswith(SUMMARY_HEADER):
                    found.append((index, text))
                break
    return found


def _turn_positions(turns: dict[int, list[Checkpoint]], messages: list[Any]) -> dict[int, int]:
    """Turn number -> index of its prompt in ``messages``, matched from the newest back."""
    positions = prompt_positions(messages)
    out: dict[int, int] = {}
    numbers = sorted(turns, reverse=True)
    i = len(positions) - 1
    for turn in numbers:
        if i < 0:
            break
        prompt = turns[turn][0].prompt
        if positions[i][1] == prompt:
            out[turn] = positions[i][0]
            i -= 1
    return out


def list_prompts(cp: Checkpointer, session_id: str, messages: list[Any]) -> list[PromptEntry]:
    turns = turn_checkpoints(cp, session_id)
    positions = _turn_positions(turns, messages)
    entries = []
    for turn in sorted(turns):
        rows = turns[turn]
        before = next((r for r in rows if r.kind == "before"), rows[0])
        after = next((r for r in reversed(rows) if r.kind == "after"), None)
        files = cp.shadow.numstat(before.tree, after.tree) if after is not None else {}
        for rel in set(before.large) ^ set(after.large if after else before.large):
            files.setdefault(rel, (0, 0))
        entries.append(PromptEntry(turn, before.prompt, files, turn in positions))
    return entries


# ---------------------------------------------------------------------- code


@dataclass
class FileRestore:
    path: str
    action: str
    """``write`` (put the checkpoint's content back), ``delete`` (created since), or
    ``unrestorable`` (a large or binary file recorded by hash only, now different)."""
    changed_outside: bool = False
    """It changed since ketch last looked: the user's own edit, left alone by default."""


@dataclass
class CodePlan:
    target: Checkpoint
    now: Checkpoint
    files: list[FileRestore] = field(default_factory=list)
    diff: str = ""
    seen: str = ""
    """The tree of the files as ketch last left them (changes from it are the user's)."""
    wanted: dict[str, tuple[str, str] | None] = field(default_factory=dict)
    """Each differing path's entry in the target (mode, blob), or None: not in the target."""

    @property
    def outside(self) -> list[str]:
        return [f.path for f in self.files if f.changed_outside]


def _before(cp: Checkpointer, session_id: str, turn: int, step: int | None) -> Checkpoint:
    rows = turn_checkpoints(cp, session_id).get(turn)
    if not rows:
        raise RewindError(f"prompt {turn} of session {session_id} has no checkpoint")
    if step:
        for row in rows:
            if row.kind == "step" and row.step >= step:
                return row
    return next((r for r in rows if r.kind == "before"), rows[0])


def plan_code(cp: Checkpointer, session_id: str, turn: int, *, step: int | None = None) -> CodePlan:
    """What restoring the files to before prompt ``turn`` (or its step) would do."""
    return plan_code_to(cp, session_id, _before(cp, session_id, turn, step))


def undo_target(cp: Checkpointer, session_id: str) -> Checkpoint:
    """The checkpoint the newest rewind of the session took before it restored anything."""
    rows = [r for r in cp.log.of_session(session_id) if r.kind == "rewind"]
    if not rows:
        raise RewindError(f"session {session_id} has no rewind to undo")
    return rows[-1]


def plan_code_to(cp: Checkpointer, session_id: str, target: Checkpoint) -> CodePlan:
    """What restoring the files to ``target`` would do.

    Takes a checkpoint of the workspace as it is now first (kind ``rewind``): the point a
    rewind can itself be undone to, and the state the plan is computed against."""
    last_seen = cp.log.latest()
    now = cp.take(session_id, target.turn, "rewind", prompt=target.prompt)
    shadow = cp.shadow
    seen_tree = last_seen.tree if last_seen is not None else now.tree
    plan = CodePlan(target=target, now=now, seen=seen_tree)
    plan.wanted = shadow.changes(now.tree, target.tree)
    outside = set(shadow.changes(seen_tree, now.tree)) if seen_tree != now.tree else set()
    for rel, entry in sorted(plan.wanted.items()):
        plan.files.append(FileRestore(rel, "write" if entry is not None else "delete", rel in outside))
    for rel, (size, digest) in sorted(target.large.items()):
        if now.large.get(rel) != (size, digest) and rel not in plan.wanted:
            plan.files.append(FileRestore(rel, "unrestorable"))
    plan.diff = shadow.diff(now.tree, target.tree, [f.path for f in plan.files if f.action != "unrestorable"])
    return plan


def apply_code(cp: Checkpointer, plan: CodePlan, workspace: Any, *, include_outside: bool = False) -> dict[str, list[str]]:
    """Put the plan's files back. Returns what was ``restored``, ``deleted``, ``left`` (changed
    outside ketch, or outside the jail now) and ``unrestorable``."""
    from pydantic_ai.exceptions import ToolFailed

    shadow = cp.shadow
    want = {rel: entry for rel, entry in plan.wanted.items() if entry is not None}
    contents = shadow.blobs(sorted({blob for item in plan.files if item.action == "write"
                                    and (include_outside or not item.changed_outside)
                                    for _mode, blob in [want[item.path]]}))
    done: dict[str, list[str]] = {"restored": [], "deleted": [], "left": [], "unrestorable": []}
    root = Path(cp.root)
    # deletions first, deepest first: a directory the turn made where a file was goes before
    # the file comes back
    ordered = sorted(plan.files, key=lambda f: (f.action != "delete", -f.path.count("/") if f.action == "delete" else 0))
    for item in ordered:
        if item.action == "unrestorable":
            done["unrestorable"].append(item.path)
            continue
        if item.changed_outside and not include_outside:
            done["left"].append(item.path)
            continue
        if _through_symlink(root, item.path):  # git would not write through one either
            done["left"].append(item.path)
            continue
        try:
            if workspace is not None:
                workspace.resolve(item.path)
        except ToolFailed:  # a path that now leads out of the jail (or is not a path) is left
            done["left"].append(item.path)
            continue
        # every change below is made beneath the workspace directory in one step, to the name
        # itself (a symlink there is replaced or removed, never followed): a directory swapped
        # for a link meanwhile makes it fail, not land elsewhere
        base, rel = str(root), item.path
        try:
            if item.action == "delete":
                try:
                    beneath.unlink(base, rel)
                except IsADirectoryError:
                    done["left"].append(item.path)
                    continue
                except FileNotFoundError:
                    pass
                _remove_empty_parents(base, Path(rel))
                done["deleted"].append(item.path)
                continue
            mode, blob = want[item.path]
            content = contents[blob]
            found = beneath.lstat(base, rel)
            if found is not None and stat.S_ISDIR(found.st_mode):
                done["left"].append(item.path)
                continue
            if mode == "120000":
                beneath.symlink(base, rel, os.fsdecode(content))
            else:
                beneath.write_bytes(base, rel, content, mode=0o755 if mode == "100755" else 0o644)
        except (OSError, ToolFailed):
            done["left"].append(item.path)
            continue
        done["restored"].append(item.path)
    _record_restored(cp, plan, want, done)
    return done


def _record_restored(cp: Checkpointer, plan: CodePlan, want: dict[str, Any], done: dict[str, list[str]]) -> None:
    """Note the files as ketch now left them, so the next rewind tells ketch's restores from the
    user's edits: what was restored or deleted as such, everything else as ketch last saw it."""
    from ketch.checkpoints.shadow import Snapshot

    changes: dict[str, tuple[str, str] | None] = {rel: want[rel] for rel in done["restored"]}
    changes.update({rel: None for rel in done["deleted"]})
    tree = cp.shadow.tree_with(plan.seen, changes) if changes else plan.seen
    ident = cp.log.add(plan.now.session_id, plan.now.turn, "restored", Snapshot(tree, dict(plan.target.large)))
    cp.shadow.keep(str(ident), tree)


def _through_symlink(root: Path, rel: str) -> bool:
    """Whether a directory on the way to ``rel`` is now a symbolic link."""
    current = root
    for part in Path(rel).parts[:-1]:
        current = current / part
        if current.is_symlink():
            return True
        if not current.exists():
            return False
    return False


def _remove_empty_parents(root: str, rel: Path) -> None:
    """Directories a deleted file leaves empty go too (git keeps no empty directories, so the
    checkpoint had none there)."""
    parent = rel.parent
    while str(parent) not in (".", ""):
        try:
            beneath.rmdir(root, parent.as_posix())
        except (OSError, ToolFailed):
            return
        parent = parent.parent


# ---------------------------------------------------------------------- conversation


def cut_conversation(cp: Checkpointer, session_id: str, messages: list[Any], turn: int) -> tuple[list[Any], str]:
    """The history before prompt ``turn`` and that prompt's text; its checkpoints are forgotten
    (the next prompt takes its number). The cut is at a request that opens a turn, so the kept
    history ends where a turn ended: every tool call in it has its result."""
    turns = turn_checkpoints(cp, session_id)
    positions = _turn_positions(turns, messages)
    if turn not in positions:
        raise RewindError(
            f"prompt {turn} is no longer in the conversation (compaction summarized it); only its files can be rewound"
        )
    index = positions[turn]
    kept = list(messages[:index])
    prompt = turns[turn][0].prompt
    cp.log.forget_from_turn(session_id, turn)
    return kept, prompt


__all__ = [
    "Checkpointer",
    "CodePlan",
    "FileRestore",
    "PromptEntry",
    "RewindError",
    "ShadowError",
    "apply_code",
    "cut_conversation",
    "list_prompts",
    "plan_code",
    "prompt_positions",
]

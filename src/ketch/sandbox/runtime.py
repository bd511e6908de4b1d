"""A session's sandbox: its policy, the mechanism in use, and the one function every launch
site calls to turn an argv into the argv to execute.

``Sandbox.wrap(argv, cwd=...)`` returns a ``Launch``: the argv (the command itself when
nothing confines it) and whether it is confined. The shell tool, user hooks, the read-only
git tools and stdio MCP servers each call it once where they start a process.

``fail_closed`` is true when the policy wants confinement and no mechanism works: the gate
then asks before every shell command (headless: denies it), and hooks and MCP servers run
unconfined, as the start-up notice says.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ketch.sandbox import bwrap, landlock, macos
from ketch.sandbox.detect import Mechanism
from ketch.sandbox.policy import SandboxPolicy, with_nested_run_later

_REFUSALS: dict[str, tuple[tuple[str, str], ...]] = {
    # bubblewrap refuses writes with EROFS; the seccomp filter answers EPERM
    "bubblewrap": (
        ("Read-only file system", "a write outside the writable places"),
        ("Operation not permitted", "an operation it does not allow (a network socket, ptrace, a write)"),
    ),
    # Landlock refuses writes (and TCP) with EACCES
    "landlock": (
        ("Permission denied", "a write outside the writable places"),
        ("Operation not permitted", "an operation it does not allow (a network socket, ptrace, a write)"),
    ),
    "seatbelt": (
        ("Operation not permitted", "an operation it does not allow (a write outside, the network)"),
        ("Permission denied", "a write outside the writable places"),
    ),
}
_NETWORK_REFUSALS: tuple[tuple[str, str], ...] = (
    ("Network is unreachable", "a network connection (the network is off)"),
    ("Temporary failure in name resolution", "a name lookup (the network is off)"),
    ("Could not resolve host", "a name lookup (the network is off)"),
    ("Name or service not known", "a name lookup (the network is off)"),
    ("Connection refused", "a network connection (the network is off)"),
    ("Address family not supported", "a network socket (the network is off)"),
)


CARVE_OUT_HOLD: dict[str, str] = {
    "bubblewrap": "each directory between a writable root and a carve-out is a mount point too, and the "
    "kernel refuses to rename or remove a mount point (EBUSY)",
    "landlock": "directories holding a carve-out are granted entry by entry, never as a whole, so they "
    "cannot be renamed, removed or made anew (EACCES)",
    "seatbelt": "the carve-outs are denied by path, so whatever is made at that path later is denied as well",
}
"""How each mechanism keeps a carve-out read-only when a command renames or replaces one of
its parent directories (a bind mount or an inode rule alone would move with the old one)."""


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    confined: bool
    pass_fds: tuple[int, ...] = ()
    read_only: frozenset[Path] = frozenset()
    """The run-later paths that were read-only for this launch (to notice ones it created)."""


@dataclass
class Sandbox:
    policy: SandboxPolicy
    mechanism: Mechanism
    approval: str = "ask"
    """The approval mode: ask, auto or never."""
    escalated: set[str] = field(default_factory=set)
    """Shell commands the user let run outside the sandbox for the rest of the session."""
    workspace: Any = None
    """The session's ``Workspace``: directories added to it later are writable roots too."""
    _tmpdir: str = ""
    _scanned: bool = False

    @property
    def confines(self) -> bool:
        """Whether commands run confined (a confining mode and a working mechanism)."""
        return self.policy.confined and self.mechanism.available

    @property
    def fail_closed(self) -> bool:
        return self.policy.confined and not self.mechanism.available

    def private_tmp(self) -> str:
        """The session's scratch directory, shared by all its sandboxed commands until the
        session ends: bubblewrap binds it at ``/tmp``; Landlock and Seatbelt cannot replace
        /tmp, so there only ``TMPDIR`` points at it (and writes to /tmp itself are refused)."""
        if not self._tmpdir:
            self._tmpdir = tempfile.mkdtemp(prefix="ketch-tmp-")
        return self._tmpdir

    def current_policy(self) -> SandboxPolicy:
        """The policy as it stands now: run-later places looked up again, added directories
        writable. The bounded scan for nested run-later files runs once, on first use (not at
        start-up, where a large tree would delay the prompt)."""
        if not self._scanned:
            self._scanned = True
            self.policy = with_nested_run_later(self.policy)
        extra = list(getattr(self.workspace, "extra_dirs", []) or [])
        return self.policy.refreshed(extra)

    def wrap(self, argv: Sequence[str], *, cwd: Path | str, network: bool | None = None, read_only: bool = False) -> Launch:
        """The argv that runs ``argv`` under this session's policy (as is, unconfined, when
        nothing confines). ``network`` overrides the policy's (MCP servers); ``read_only``
        allows no writes at all (the read-only git tools)."""
        if not self.confines:
            return Launch(list(argv), confined=False)
        policy = self.current_policy()
        if read_only:
            policy = policy.read_only_view()
        if network is not None:
            policy = policy.with_network(network)
        name = self.mechanism.name
        seccomp_file = self.mechanism.seccomp_file(policy.network)
        if name == "bubblewrap":
            wrapped = bwrap.argv(
                self.mechanism.binary, policy, argv, cwd=cwd, seccomp_file=seccomp_file,
                tmp_overlay=self.mechanism.tmp_overlay,
                scratch=None if read_only else self.private_tmp(),  # the read-only git tools write nothing, not even there
            )
        elif name == "landlock":
            wrapped = landlock.argv(policy, argv, seccomp_file=seccomp_file, tmpdir=self.private_tmp())
        elif name == "seatbelt":
            wrapped = macos.argv(policy, argv, tmpdir=self.private_tmp())
        else:
            raise ValueError(f"unknown sandbox mechanism {name!r}")
        return Launch(wrapped, confined=True, read_only=frozenset(policy.read_only))

    def created_run_later(self, launch: Launch) -> list[Path]:
        """Run-later paths at the top of a writable root that exist now and did not when
        ``launch`` started: a command may create them (only existing ones are read-only)."""
        if not launch.confined:
            return []
        return sorted(set(self.current_policy().read_only) - launch.read_only)

    def write_verdict(self, path: str) -> str:
        """The policy's answer for ketch's own file tools writing ``path`` (relative to the
        workspace or absolute; symlinks resolved as the jail resolves them)."""
        target = Path(os.path.expanduser(path))
        if not target.is_absolute():
            target = self.policy.workspace / target
        return self.current_policy().write_verdict(os.path.realpath(target))

    def refusal(self, output: str, *, network: bool | None = None) -> str:
        """What the sandbox seems to have refused, judged from a confined command's output ('' for nothing)."""
        net = self.policy.network if network is None else network
        for marker, what in (*_REFUSALS.get(self.mechanism.name, ()), *(() if net else _NETWORK_REFUSALS)):
            if re.search(re.escape(marker), output, re.IGNORECASE):
                return f"{what} (the output says {marker!r})"
        return ""

    def describe(self) -> list[str]:
        """Lines for ``/sandbox``, ``/permissions`` and ``ketch sandbox check``."""
        lines = [f"mechanism: {self.mechanism.name} ({self.mechanism.reason})", *self.policy.describe(), f"approval: {self.approval}"]
        if self.confines and self.policy.roots_for_writes() and self.mechanism.name in CARVE_OUT_HOLD:
            lines.append("read-only carve-outs hold against renaming a parent: " + CARVE_OUT_HOLD[self.mechanism.name])
        if self.fail_closed:
            lines.append("no sandbox mechanism works here: every shell command asks (headless: denied); hooks and MCP servers run unconfined")
        if self.escalated:
            lines.append("allowed outside the sandbox for this session: " + ", ".join(sorted(self.escalated)))
        return lines


def cleanup_tmp(sandbox: Sandbox) -> None:
    """Remove the session's private temporary directory (the session closer calls it)."""
    if sandbox._tmpdir and os.path.isdir(sandbox._tmpdir):
        import shutil

        shutil.rmtree(sandbox._tmpdir, ignore_errors=True)


def launch_argv(sandbox: Sandbox | None, argv: Sequence[str], cwd: Path | str, **options: bool | None) -> list[str]:
    """``argv`` as the launch sites execute it: wrapped by ``sandbox``, or as is without one."""
    return list(argv) if sandbox is None else sandbox.wrap(argv, cwd=cwd, **options).argv  # type: ignore[arg-type]


def check_file_write(settings: Any, resolved: Path | str, shown: str) -> None:
    """Refuse (ToolFailed) a file tool's write that the sandbox policy forbids outright: any
    write in read-only mode, a write outside the writable roots. Run-later paths only ask
    (the gate did that before the tool ran)."""
    sandbox: Sandbox | None = getattr(settings, "sandbox", None)
    if sandbox is None:
        return
    verdict = sandbox.current_policy().write_verdict(resolved)
    if verdict in ("read_only", "outside"):
        from pydantic_ai.exceptions import ToolFailed

        why = "the sandbox is read-only" if verdict == "read_only" else "it is outside the places the sandbox lets ketch write"
        raise ToolFailed(f"Cannot write {shown}: {why}.")

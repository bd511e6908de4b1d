"""A private git object store holding snapshots of one workspace.

The store is a bare git directory under the user data dir, driven with ``GIT_DIR`` pointing
at it and ``GIT_WORK_TREE`` at the workspace, so the user's ``.git`` is never touched (git
always skips directories named ``.git``). Its own index is the stat cache: a snapshot asks
``git status`` what changed since the last one and hashes only that, so an unchanged tree of
10,000 files costs one status call and one ``write-tree``.

Nothing the repository configures can run: the user's and the system's git config are not
read, the private config turns off hooks, fsmonitor and auto-gc, and the private
``info/attributes`` (which outranks the tree's ``.gitattributes``) switches off filters,
end-of-line conversion and encodings, so the stored bytes are the file's bytes.

Files over ``LARGE_FILE_BYTES`` and binary files are not stored: they are recorded by size
and SHA-256 only, and excluded from the private index so that they are not hashed again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

LARGE_FILE_BYTES = 1024 * 1024
MAX_NEW_FILES = 200_000
"""More files than this to record at once: the folder is not a project checkpoints can cover."""
_BINARY_SNIFF = 8000
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

_ATTRIBUTES = "* -text -filter -ident !eol !working-tree-encoding\n"
_CONFIG = {
    "core.bare": "false",
    "core.hooksPath": "/dev/null",
    "core.fsmonitor": "false",
    "core.untrackedCache": "false",
    "core.autocrlf": "false",
    "core.symlinks": "true",
    "core.quotePath": "false",
    "gc.auto": "0",
    "status.showUntrackedFiles": "all",
    "advice.statusHints": "false",
}


class ShadowError(Exception):
    """The private store could not be written or read (git missing, disk full, ...)."""


@dataclass
class Snapshot:
    tree: str
    large: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Files recorded by size and SHA-256 only (too large, or binary)."""


def _open_beneath(root: str, rel: str) -> BinaryIO:
    """Open a workspace file for reading beneath the root in one step (no symlink followed on
    the way, no FIFO or device): what a snapshot hashes is the workspace's own file."""
    import ketch.tools.beneath as beneath

    return os.fdopen(beneath.open_regular_fd(root, rel, rel), "rb")


def _sha256(root: str, rel: str) -> str:
    digest = hashlib.sha256()
    try:
        with _open_beneath(root, rel) as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except Exception:  # noqa: BLE001 - changed meanwhile (or not a file): recorded as unreadable
        return "unreadable"
    return digest.hexdigest()


def _is_binary(root: str, rel: str) -> bool:
    try:
        with _open_beneath(root, rel) as handle:
            return b"\0" in handle.read(_BINARY_SNIFF)
    except Exception:  # noqa: BLE001 - as an unreadable file
        return False


def _exclude_line(rel: str) -> str:
    """An anchored ignore pattern matching exactly ``rel``."""
    escaped = "".join("\\" + c if c in "*?[]\\!# " else c for c in rel)
    return "/" + escaped


class ShadowRepo:
    """Snapshots of ``root`` in the git directory ``git_dir`` (created on first use)."""

    def __init__(self, root: Path, git_dir: Path, *, large_file_bytes: int = LARGE_FILE_BYTES) -> None:
        self.root = Path(root)
        self.git_dir = Path(git_dir)
        self.large_file_bytes = large_file_bytes
        self._large: dict[str, tuple[int, int, str]] = {}
        """Known large/binary files: path -> (size, mtime_ns, sha256)."""
        self._large_loaded = False

    # ------------------------------------------------------------------ git
    def _env(self) -> dict[str, str]:
        """git reads' own allowlisted environment (``tools.gitsafe``: no keys, no transports),
        pointed at the private store, with no user or system config at all."""
        from ketch.tools.gitsafe import base_env

        env = base_env()
        env.update(
            GIT_DIR=str(self.git_dir),
            GIT_WORK_TREE=str(self.root),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
            XDG_CONFIG_HOME=str(self.git_dir / "xdg"),  # no global ignore file of the user's
            HOME=str(self.git_dir / "xdg"),
        )
        env.pop("GIT_CONFIG_SYSTEM", None)
        return env

    def git(self, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
        env = self._env()
        if args[0] == "init":
            del env["GIT_WORK_TREE"], env["GIT_DIR"]
        for attempt in range(20):
            try:
                done = subprocess.run(["git", *args], input=input, capture_output=True, env=env, cwd=self.root, timeout=300)
            except FileNotFoundError:
                raise ShadowError("git is not installed; checkpoints need it") from None
            except subprocess.TimeoutExpired:
                raise ShadowError(f"git {args[0]} took over 300 s in the checkpoint store") from None
            if done.returncode == 0 or b".lock" not in done.stderr:
                break
            time.sleep(0.1)  # another ketch in this workspace is snapshotting: wait for its lock
        if check and done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise ShadowError(f"git {args[0]} failed in the checkpoint store {self.git_dir}: {message[-1] if message else done.returncode}")
        return done.stdout

    def ensure(self) -> None:
        if not (self.git_dir / "HEAD").exists():
            self.git_dir.mkdir(parents=True, exist_ok=True)
            self.git("init", "-q", "--bare", str(self.git_dir))
            for key, value in _CONFIG.items():
                self.git("config", key, value)
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        attributes = info / "attributes"
        if not attributes.exists() or attributes.read_text() != _ATTRIBUTES:
            attributes.write_text(_ATTRIBUTES)
        (self.git_dir / "xdg").mkdir(exist_ok=True)

    # ------------------------------------------------------------------ large files
    def _large_file(self) -> Path:
        return self.git_dir / "ketch-large.tsv"

    def _load_large(self) -> None:
        if self._large_loaded:
            return
        self._large_loaded = True
        try:
            for line in self._large_file().read_text(encoding="utf-8", errors="surrogateescape").splitlines():
                size, mtime, digest, rel = line.split("\t", 3)
                self._large[rel] = (int(size), int(mtime), digest)
        except (OSError, ValueError):
            self._large = {}

    def _save_large(self) -> None:
        lines = [f"{s}\t{m}\t{d}\t{rel}" for rel, (s, m, d) in sorted(self._large.items())]
        tmp = self._large_file().with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8", errors="surrogateescape")
        os.replace(tmp, self._large_file())

    def _write_excludes(self) -> None:
        """The private ignore list: the user's ``.git/info/exclude`` plus the large files."""
        own = ""
        try:
            own = (self.root / ".git" / "info" / "exclude").read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
        lines = [own.rstrip("\n"), *(_exclude_line(rel) for rel in sorted(self._large))]
        (self.git_dir / "info" / "exclude").write_text("\n".join(line for line in lines if line) + "\n")

    def _classify(self, rel: str, st: os.stat_result) -> bool:
        """Whether ``rel`` is recorded by hash only (large or binary); records it if so."""
        if not stat.S_ISREG(st.st_mode):
            return False
        root = str(self.root)
        if st.st_size > self.large_file_bytes or _is_binary(root, rel):
            known = self._large.get(rel)
            if known and known[0] == st.st_size and known[1] == st.st_mtime_ns:
                return True
            self._large[rel] = (st.st_size, st.st_mtime_ns, _sha256(root, rel))
            return True
        return False

    # ------------------------------------------------------------------ snapshot
    def _changed(self) -> tuple[list[str], list[str]]:
        """Paths whose worktree state differs from the private index: (present, gone).

        Two cheap questions instead of ``git status`` (which would also compare the whole
        index with a commit the store never makes): what the index knows that changed, and
        which files it does not know and are not ignored."""
        present, gone = [], []
        fields = self.git("diff-files", "-z", "--name-status", "--ignore-submodules=all").split(b"\0")
        for code, rel in zip(fields[0::2], fields[1::2]):
            (gone if code == b"D" else present).append(os.fsdecode(rel))
        untracked = self.git("ls-files", "-z", "--others", "--exclude-standard")
        present.extend(os.fsdecode(rel) for rel in untracked.split(b"\0") if rel)
        return present, gone

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One snapshot at a time per store, across processes (two ketch in one workspace)."""
        self.git_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.git_dir.parent / "ketch.lock", "a+b") as handle:
            try:
                import fcntl
            except ImportError:  # not POSIX: git's own index lock (waited for in ``git``) is all there is
                yield
                return
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def snapshot(self) -> Snapshot:
        """Record the workspace as it is now; only what changed since the last snapshot is hashed."""
        with self._exclusive():
            return self._snapshot()

    def _snapshot(self) -> Snapshot:
        self.ensure()
        self._load_large()
        large_before = dict(self._large)
        # large/binary files: still there, still the same?
        for rel in list(self._large):
            try:
                st = os.lstat(os.path.join(self.root, rel))
            except OSError:
                del self._large[rel]
                continue
            if not self._classify(rel, st):
                del self._large[rel]  # now small text: stored from here on
        self._write_excludes()
        present, gone = self._changed()
        if len(present) > MAX_NEW_FILES:
            raise ShadowError(f"{self.root} has over {MAX_NEW_FILES:,} files to record; add the bulky folders to .gitignore")
        add: list[str] = []
        remove: list[str] = list(gone)
        for rel in present:
            try:
                st = os.lstat(os.path.join(self.root, rel))
            except OSError:
                remove.append(rel)
                continue
            if stat.S_ISDIR(st.st_mode):
                continue  # a nested repository: not snapshotted
            if self._classify(rel, st):
                remove.append(rel)
            else:
                add.append(rel)
        if remove:  # first: a directory that became a file (or a link) needs its entries gone
            self.git("update-index", "--force-remove", "-z", "--stdin", input=b"".join(os.fsencode(p) + b"\0" for p in remove))
        if add:
            self.git("update-index", "--add", "--remove", "--replace", "-z", "--stdin",
                     input=b"".join(os.fsencode(p) + b"\0" for p in add))
        if self._large != large_before:
            self._save_large()
            self._write_excludes()
        tree = self.git("write-tree").decode().strip()
        return Snapshot(tree=tree, large={rel: (s, d) for rel, (s, _m, d) in self._large.items()})

    def tree_with(self, base: str, entries: dict[str, tuple[str, str] | None]) -> str:
        """``base`` with some paths set to ``(mode, blob)`` or removed (``None``), built in a
        scratch index so that the store's own index (its stat cache) is left as it is."""
        scratch = self.git_dir / "ketch-scratch-index"
        env_index = {"GIT_INDEX_FILE": str(scratch)}
        try:
            self._git_env(env_index, "read-tree", base)
            lines = "".join(
                (f"{mode} {blob}\t{rel}\0" if entry is not None else f"0 {'0' * 40}\t{rel}\0")
                for rel, entry in entries.items()
                for mode, blob in [entry or ("0", "")]
            )
            self._git_env(env_index, "update-index", "-z", "--index-info", input=lines.encode("utf-8", "surrogateescape"))
            return self._git_env(env_index, "write-tree").decode().strip()
        finally:
            scratch.unlink(missing_ok=True)

    def _git_env(self, extra: dict[str, str], *args: str, input: bytes | None = None) -> bytes:
        saved = self._env
        self._env = lambda: {**saved(), **extra}  # type: ignore[method-assign]
        try:
            return self.git(*args, input=input)
        finally:
            self._env = saved  # type: ignore[method-assign]

    def keep(self, name: str, tree: str) -> None:
        """Reference ``tree`` so that pruning the store keeps it: a loose ref, written as git
        writes one (the store is private, so no other writer races it; one process less)."""
        refs = self.git_dir / "refs" / "ketch"
        refs.mkdir(parents=True, exist_ok=True)
        tmp = refs / f".{name}.tmp"
        tmp.write_text(tree + "\n")
        os.replace(tmp, refs / name)

    def drop(self, names: list[str]) -> None:
        for name in names:
            (self.git_dir / "refs" / "ketch" / name).unlink(missing_ok=True)

    def prune(self) -> None:
        self.git("prune", "--expire=now", check=False)

    def size_bytes(self) -> int:
        out = self.git("count-objects", "-v").decode()
        kib = 0
        for line in out.splitlines():
            key, _, value = line.partition(": ")
            if key in ("size", "size-pack"):
                kib += int(value or 0)
        return kib * 1024

    # ------------------------------------------------------------------ reading
    def files(self, tree: str) -> dict[str, tuple[str, str]]:
        """``path -> (mode, blob id)`` of every file in ``tree``."""
        if tree == EMPTY_TREE:
            return {}
        out = self.git("ls-tree", "-r", "-z", "--full-tree", tree)
        files = {}
        for entry in out.split(b"\0"):
            if not entry:
                continue
            meta, _, rel = entry.partition(b"\t")
            mode, kind, blob = meta.decode().split(" ")
            if kind == "blob":
                files[os.fsdecode(rel)] = (mode, blob)
        return files

    def blob(self, blob: str) -> bytes:
        return self.git("cat-file", "blob", blob)

    def blobs(self, ids: list[str]) -> dict[str, bytes]:
        """Many blobs in one ``cat-file --batch``."""
        if not ids:
            return {}
        out = self.git("cat-file", "--batch", input="".join(i + "\n" for i in ids).encode())
        found: dict[str, bytes] = {}
        pos = 0
        for ident in ids:
            end = out.index(b"\n", pos)
            header = out[pos:end].split(b" ")
            pos = end + 1
            if len(header) < 3:  # "<id> missing"
                continue
            size = int(header[2])
            found[ident] = out[pos:pos + size]
            pos += size + 1
        return found

    def changes(self, old: str, new: str) -> dict[str, tuple[str, str] | None]:
        """Paths that differ between two trees, each with its entry in ``new`` (mode, blob),
        or None where ``new`` has no such file."""
        out = self.git("diff-tree", "-r", "-z", "--no-renames", "--raw", old, new)
        fields = out.split(b"\0")
        result: dict[str, tuple[str, str] | None] = {}
        for meta, rel in zip(fields[0::2], fields[1::2]):
            if not meta.startswith(b":"):
                continue
            _old_mode, new_mode, _old_id, new_id, status = meta[1:].decode().split(" ")
            if new_mode == "160000" or (status != "D" and new_mode == "000000"):
                continue  # a nested repository's entry
            result[os.fsdecode(rel)] = None if status == "D" else (new_mode, new_id)
        return result

    def numstat(self, old: str, new: str) -> dict[str, tuple[int, int]]:
        """Lines added and removed per path between two trees (binary files count 0)."""
        out = self.git("diff-tree", "-r", "-z", "--numstat", "--no-renames", old, new)
        stats: dict[str, tuple[int, int]] = {}
        fields = out.split(b"\0")
        for entry in fields:
            if not entry:
                continue
            added, removed, rel = entry.split(b"\t", 2)
            stats[os.fsdecode(rel)] = (int(added) if added != b"-" else 0, int(removed) if removed != b"-" else 0)
        return stats

    def diff(self, old: str, new: str, paths: list[str]) -> str:
        if not paths:
            return ""
        out = self.git("diff-tree", "-p", "--no-renames", "--no-ext-diff", "--no-textconv", old, new, "--", *paths)
        return out.decode("utf-8", "replace")

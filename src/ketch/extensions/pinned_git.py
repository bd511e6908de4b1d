"""One file of a git repository at a pinned commit, fetched and checked before anyone sees it.

A registry item can come from a git repository instead of inline text. What the user approves
is a full commit id (never a branch, a tag or an abbreviation), and what is installed is the
file read out of exactly that commit:

* the pin must be a full object id; anything shorter or not hex is refused, so no name can
  stand in for it;
* a repository that has a ref named like a commit id (``refs/heads/<hex>``, a tag, any ref
  whose last part is 4 to 64 hex digits) is refused outright: such a ref exists to shadow an
  id in someone's lookup;
* the commit is fetched by id into a scratch bare store that has no refs at all, then checked
  to be that commit object; the file is read as ``<commit>:<path>`` and must be a blob;
* an optional ``sha256`` of the file's bytes must match as well.

Only ``https`` reaches a remote (``tools.gitsafe.run_fetch_store``: no ssh, no ``ext::``,
no credential helper, no prompt); a local repository (an absolute path or ``file://``) only
where the caller allows it (an install the user typed).
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

FULL_COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
HEX_LIKE = re.compile(r"^[0-9a-fA-F]{4,64}$")
MAX_FILE_BYTES = 64 * 1024


class PinError(Exception):
    """The source, the pin or what was fetched is refused (the message says which)."""


@dataclass(frozen=True)
class PinnedFile:
    url: str
    commit: str
    path: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def check_commit(commit: object) -> str:
    if not isinstance(commit, str) or not FULL_COMMIT.match(commit):
        raise PinError(f"pin {commit!r} is not a full commit id (40 or 64 lowercase hex digits); a branch, tag or abbreviation can move")
    return commit


def check_source(url: object, *, allow_local: bool) -> tuple[str, str]:
    """``(url git is given, protocol)`` for a source, or PinError."""
    if not isinstance(url, str) or not url or url.startswith("-") or any(not c.isprintable() for c in url):
        raise PinError(f"git source {url!r} is not a usable address")
    if url.startswith("https://"):
        from ketch.config.hostcheck import url_problem

        problem = url_problem(url)
        if problem is not None or not urlsplit(url).hostname:
            raise PinError(f"git source refused: {problem or 'no host'}")
        return url, "https"
    if allow_local:
        path = url.removeprefix("file://")
        if Path(path).is_absolute() and Path(path).is_dir():
            return "file://" + str(Path(path).resolve()), "file"
    raise PinError(f"git source {url!r} must be an https:// address" + (" or a local repository's absolute path" if allow_local else ""))


def check_path(path: object) -> str:
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path or any(not c.isprintable() for c in path):
        raise PinError(f"file path {path!r} in the repository is not usable")
    parts = PurePosixPath(path).parts
    if any(p in ("..", ".") for p in parts):
        raise PinError(f"file path {path!r} leaves the repository")
    return "/".join(parts)


def _git(store: Path, args: list[str], protocol: str, timeout_s: float) -> bytes:
    from ketch.tools.gitsafe import GitLaunchError, run_fetch_store

    try:
        result = run_fetch_store(store, args, protocols=[protocol], cwd=store, timeout_s=timeout_s)
    except GitLaunchError as exc:
        raise PinError(str(exc)) from None
    if result.returncode != 0:
        tail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["(no message)"]
        raise PinError(f"git {args[0]} failed: {tail[0][:300]}")
    return result.stdout


def shadowing_refs(listing: bytes) -> list[str]:
    """Refs in ``git ls-remote`` output named like a commit id (any part after ``refs/``)."""
    found = []
    for line in listing.decode("utf-8", "replace").splitlines():
        _oid, _, ref = line.partition("\t")
        ref = ref.removesuffix("^{}")
        parts = ref.split("/")
        if any(HEX_LIKE.match(part) for part in parts[1:]) or HEX_LIKE.match(ref):
            found.append(ref)
    return found


def fetch_pinned(url: str, commit: str, path: str, *, allow_local: bool = False, sha256: str | None = None,
                 timeout_s: float = 120.0) -> PinnedFile:
    """The bytes of ``path`` at ``commit`` in the repository at ``url``, checked as the module says."""
    commit = check_commit(commit)
    path = check_path(path)
    address, protocol = check_source(url, allow_local=allow_local)
    with tempfile.TemporaryDirectory(prefix="ketch-pin-") as tmp:
        store = Path(tmp) / "store.git"
        store.mkdir()
        _git(store, ["init", "--bare", "--quiet", str(store)], protocol, timeout_s)
        shadows = shadowing_refs(_git(store, ["ls-remote", "--", address], protocol, timeout_s))
        if shadows:
            raise PinError(f"{url} has refs named like commit ids ({', '.join(shadows[:3])}): refused, such a ref exists to shadow a pinned id")
        _git(store, ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--depth=1", "--", address, commit], protocol, timeout_s)
        if _git(store, ["for-each-ref", "--format=%(refname)"], protocol, timeout_s).strip():
            raise PinError("the scratch store gained a ref while fetching: refused")
        kind = _git(store, ["cat-file", "-t", commit], protocol, timeout_s).strip()
        if kind != b"commit":
            raise PinError(f"{commit} in {url} is a {kind.decode(errors='replace') or 'missing object'}, not a commit")
        resolved = _git(store, ["rev-parse", "--verify", "--end-of-options", f"{commit}^{{commit}}"], protocol, timeout_s).strip()
        if resolved.decode() != commit:
            raise PinError(f"fetched {resolved.decode(errors='replace')}, not the pinned {commit}")
        spec = f"{commit}:{path}"
        if _git(store, ["cat-file", "-t", spec], protocol, timeout_s).strip() != b"blob":
            raise PinError(f"{path} at {commit} is not a file")
        size = int(_git(store, ["cat-file", "-s", spec], protocol, timeout_s).strip() or b"0")
        if size > MAX_FILE_BYTES:
            raise PinError(f"{path} at {commit} is larger than {MAX_FILE_BYTES // 1024} KB")
        data = _git(store, ["cat-file", "blob", spec], protocol, timeout_s)
    pinned = PinnedFile(url, commit, path, data)
    if sha256 is not None and pinned.sha256 != sha256:
        raise PinError(f"{path} at {commit} has sha256 {pinned.sha256}, not the pinned {sha256}")
    return pinned

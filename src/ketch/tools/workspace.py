"""The workspace: the directories ketch may touch, the path jail, and a gitignore-aware walker.

Every path a tool receives goes through :meth:`Workspace.resolve` before anything is opened.
Resolution follows symlinks the way the kernel would (``os.path.realpath`` semantics, also
for files that do not exist yet) and the *resolved* path must lie under the workspace root
or a directory the user added. Tools then operate on the resolved path, never on the raw
string, so what was checked is what gets opened.

:meth:`Workspace.walk` lists files the way ``rg`` would: ``.gitignore`` and ``.ignore``
files at every level (plus ``.git/info/exclude`` at the top), hidden entries skipped unless
asked, ``.git`` always skipped, symlinked directories never followed.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic_ai.exceptions import ToolFailed

import ketch.tools.beneath as beneath
from ketch.tools.walk_dir import IGNORE_FILE_NAMES  # noqa: F401 - the names, where they were
from ketch.tools.walk_dir import list_beneath as _list_beneath
from ketch.tools.walk_dir import load_rules as _load_rules

if TYPE_CHECKING:  # imported by tools.walk_dir when an ignore file is first read
    from pathspec import GitIgnoreSpec

    _Rules = tuple[tuple[str, GitIgnoreSpec], ...]  # (absolute directory the patterns are relative to, compiled)


ALWAYS_SKIPPED = frozenset({".git"})


class PathOutsideWorkspace(ToolFailed):
    """A path resolved (after following symlinks) outside every workspace directory."""


class InvalidPath(ToolFailed):
    """A path that can never name a file: empty, a NUL byte, or a symlink loop."""



def _is_within(path: str, directory: str) -> bool:
    if directory == os.sep:
        return path.startswith(os.sep)
    return path == directory or path.startswith(directory + os.sep)


def _has_symlink_component(path: str) -> bool:
    """True when an existing component of an (absolute) path is still a symlink.

    ``os.path.realpath`` in non-strict mode gives up on a symlink loop and returns the
    path with the loop left in it; a fully resolved path has no symlink components.
    """
    current = os.sep
    for part in path.split(os.sep):
        if not part:
            continue
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            return False  # the rest does not exist yet
        if stat.S_ISLNK(mode):
            return True
    return False


def _resolve_like_kernel(absolute: str, shown: str) -> str:
    """Resolve an absolute path one component at a time, as the kernel would.

    Symlinks are followed (a dangling one to its target, which is where a write would
    land); once a component is missing the rest is appended as is. Refuses symlink loops
    and ``..`` after a missing component or a file (the kernel fails those; a lexical
    ``..`` would silently pick another path). Uses only ``lstat``/``readlink``.
    """
    resolved = os.sep
    missing = False
    for part in absolute.split(os.sep):
        if part in ("", "."):
            continue
        if part == "..":
            if missing:
                raise InvalidPath(f"Path {shown!r} uses '..' after a part that does not exist or is not a directory.")
            resolved = os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, part)
        if missing:
            resolved = candidate
            continue
        try:
            mode = os.lstat(candidate).st_mode
        except OSError:
            resolved, missing = candidate, True
            continue
        if stat.S_ISLNK(mode):
            try:
                resolved = os.path.realpath(candidate, strict=True)
            except FileNotFoundError:
                resolved = os.path.realpath(candidate)  # dangling: where a write would go
                missing = True
            except OSError as exc:
                raise InvalidPath(f"Path {shown!r} goes through a symlink loop; it cannot be resolved.") from exc
            if _has_symlink_component(resolved):
                raise InvalidPath(f"Path {shown!r} goes through a symlink loop; it cannot be resolved.")
            missing = missing or not os.path.isdir(resolved)
        else:
            resolved = candidate
            missing = not stat.S_ISDIR(mode)
    return resolved


PSEUDO_FS_ROOTS = ("/proc", "/sys", "/dev")
"""Where Linux (and ``/dev`` on macOS) mount process and kernel state: ``/proc/*/environ``,
``/proc/self/mem``, devices. Never a project's files; refused even in a workspace that holds
them (started in ``/``). ``tools.beneath`` also refuses such a file system by its type."""


def _is_pseudo_fs_path(resolved: str) -> bool:
    return any(_is_within(resolved, root) for root in PSEUDO_FS_ROOTS)


class Workspace:
    """The root directory of a session plus any directories the user added."""

    def __init__(self, root: Path, extra_dirs: Sequence[Path] = ()) -> None:
        self.root = Path(os.path.realpath(os.path.expanduser(str(root))))
        self.extra_dirs: list[Path] = []
        for directory in extra_dirs:
            self.add_dir(directory)

    def __repr__(self) -> str:
        return f"Workspace(root={str(self.root)!r}, extra_dirs={[str(d) for d in self.extra_dirs]!r})"

    @property
    def dirs(self) -> list[Path]:
        """The root followed by every added directory."""
        return [self.root, *self.extra_dirs]

    def add_dir(self, directory: Path | str) -> Path:
        """Allow tools to touch ``directory`` (resolved) and everything under it."""
        resolved = Path(os.path.realpath(os.path.expanduser(str(directory))))
        if not resolved.is_dir():
            raise InvalidPath(f"Cannot add {directory}: it is not a directory.")
        if resolved not in self.dirs:
            self.extra_dirs.append(resolved)
        return resolved

    # ------------------------------------------------------------------ the jail

    def _container(self, resolved: str) -> Path | None:
        """The workspace directory holding ``resolved`` (the deepest one), if any."""
        best: Path | None = None
        for directory in self.dirs:
            if _is_within(resolved, str(directory)) and (best is None or len(str(directory)) > len(str(best))):
                best = directory
        return best

    def contains(self, path: Path | str) -> bool:
        """True when an already resolved absolute path lies in a workspace directory."""
        return self._container(str(path)) is not None

    def resolve(self, path: str | os.PathLike[str], *, must_exist: bool = False) -> Path:
        """Resolve a path a tool was given, refusing anything outside the workspace.

        Relative paths are taken from the root; ``~`` is the home directory. Symlinks are
        followed (also dangling ones, and for files that do not exist yet the nearest
        existing parent decides). Raises :class:`PathOutsideWorkspace` or
        :class:`InvalidPath` (both ``ToolFailed``) without opening any file, and
        ``ToolFailed`` when ``must_exist`` and nothing is there.
        """
        raw = os.fspath(path)
        if not isinstance(raw, str):
            raise InvalidPath("Paths must be text.")
        if "\x00" in raw:
            raise InvalidPath(f"Path {raw!r} contains a NUL byte; no file can have that name.")
        if not raw.strip():
            raise InvalidPath("The path is empty; give a file or directory path.")
        try:
            os.fsencode(raw)
        except UnicodeEncodeError:
            raise InvalidPath(f"Path {raw!r} has characters no file name can hold.") from None
        expanded = os.path.expanduser(raw) if raw.startswith("~") else raw
        absolute = expanded if os.path.isabs(expanded) else os.path.join(self.root, expanded)
        resolved = _resolve_like_kernel(absolute, raw)
        if self._container(resolved) is None:
            raise PathOutsideWorkspace(
                f"Path {raw!r} resolves to {resolved}, which is outside the workspace ({self.root}). "
                "Only the workspace and directories added with --add-dir (or /add-dir) can be used."
            )
        if _is_pseudo_fs_path(resolved):
            raise InvalidPath(
                f"Path {raw!r} is process or kernel state ({resolved}), which can hold keys; the file tools do not touch it."
            )
        result = Path(resolved)
        if must_exist and not os.path.lexists(resolved):
            raise ToolFailed(f"{self.relative(result)} does not exist.")
        return result

    def where(self, resolved: Path | str) -> tuple[str, str]:
        """(workspace directory, path relative to it) of a path :meth:`resolve` returned: what
        ``tools.beneath`` opens, in one step, beneath that directory."""
        text = os.fspath(resolved)
        container = self._container(text)
        if container is None:
            raise PathOutsideWorkspace(f"{text} is outside the workspace ({self.root}).")
        base = str(container)
        rel = "" if text == base else text[len(base.rstrip(os.sep)) + 1 :]
        return base, rel

    def relative(self, path: Path | str) -> str:
        """How to show a path: relative to the root when under it, else absolute."""
        text = os.fspath(path)
        root = str(self.root)
        if text == root:
            return "."
        if _is_within(text, root):
            return text[len(root.rstrip(os.sep)) + 1 :]
        return text

    # ---------------------------------------------------------------- the walker

    def walk(
        self,
        start: str | os.PathLike[str] = ".",
        *,
        include_hidden: bool = False,
        include_dirs: bool = False,
        max_depth: int | None = None,
        limit: int | None = None,
    ) -> Iterator[Path]:
        """Like :meth:`iter_paths`, yielding ``Path`` objects."""
        for text in self.iter_paths(
            start, include_hidden=include_hidden, include_dirs=include_dirs, max_depth=max_depth, limit=limit
        ):
            yield Path(text)

    def iter_paths(
        self,
        start: str | os.PathLike[str] = ".",
        *,
        include_hidden: bool = False,
        include_dirs: bool = False,
        max_depth: int | None = None,
        limit: int | None = None,
    ) -> Iterator[str]:
        """Yield absolute paths of files under ``start`` (jailed), honouring ignore files at every level.

        Directories are yielded too when ``include_dirs``; ``max_depth=1`` lists only the
        direct children of ``start``. An explicitly named ``start`` is walked even when
        it is itself ignored. Symlinks are yielded only when they point inside the
        workspace, and symlinked directories are never descended into. When ``start`` is
        itself ignored, the ignore files above it are not applied. Order is
        deterministic (sorted by name within each directory).
        """
        if limit is not None and limit <= 0:
            return
        start_path = self.resolve(start, must_exist=True)
        root, start_rel = self.where(start_path)
        found = beneath.lstat(root, start_rel)
        if found is None or not stat.S_ISDIR(found.st_mode):
            yield str(start_path)
            return
        rules = self._ancestor_rules(start_path)
        if rules and _is_ignored(rules, str(start_path), True):
            rules = ()  # an ignored directory named explicitly: its own ignore files only
        produced = 0
        base = root.rstrip(os.sep)
        stack: list[tuple[str, _Rules, int]] = [(str(start_path), rules, 0)]
        while stack:
            directory, rules, depth = stack.pop()
            rel = "" if directory == root else directory[len(base) + 1 :]
            listed = _list_beneath(root, rel, include_git_exclude=Path(directory) in self.dirs)
            if listed is None:
                continue
            local, entries = listed
            if local is not None:
                rules = (*rules, (directory, local))
            subdirs: list[tuple[str, _Rules, int]] = []
            for name, is_link, is_dir in entries:
                if name in ALWAYS_SKIPPED or (not include_hidden and name.startswith(".")):
                    continue
                path = os.path.join(directory, name)
                if is_link:
                    target = os.path.realpath(path)
                    if _has_symlink_component(target) or self._container(target) is None:
                        continue
                    is_dir = os.path.isdir(target)
                if rules and _is_ignored(rules, path, is_dir):
                    continue
                if is_dir:
                    if not is_link and (max_depth is None or depth + 1 < max_depth):
                        subdirs.append((path, rules, depth + 1))
                    if not include_dirs:
                        continue
                yield path
                produced += 1
                if limit is not None and produced >= limit:
                    return
            stack.extend(reversed(subdirs))

    def is_ignored(self, path: Path | str) -> bool:
        """Whether a resolved path inside the workspace is excluded by ignore files."""
        resolved = str(path)
        container = self._container(resolved)
        if container is None or resolved == str(container):
            return False
        parent = os.path.dirname(resolved)
        rules = self._ancestor_rules(Path(parent))
        local = _load_rules(parent, include_git_exclude=Path(parent) in self.dirs)
        if local is not None:
            rules = (*rules, (parent, local))
        return bool(rules) and _is_ignored(rules, resolved, os.path.isdir(resolved))

    def _ancestor_rules(self, directory: Path) -> _Rules:
        """Ignore rules of the directories between the workspace dir and ``directory``."""
        container = self._container(str(directory))
        if container is None or directory == container:
            return ()
        rules: list[tuple[str, GitIgnoreSpec]] = []
        current = container
        for part in directory.relative_to(container).parts:
            spec = _load_rules(str(current), include_git_exclude=current in self.dirs)
            if spec is not None:
                rules.append((str(current), spec))
            current = current / part
        return tuple(rules)


def _is_ignored(rules: _Rules, path: str, is_dir: bool) -> bool:
    """Deepest ignore file with a matching pattern decides; no match means kept."""
    for base, spec in reversed(rules):
        relative = path[len(base) + 1 :] if base != os.sep else path[1:]
        if is_dir:
            relative += "/"
        include = spec.check_file(relative).include
        if include is not None:
            return include
    return False


def compile_glob(pattern: str) -> re.Pattern[str]:
    """Compile a shell glob into a regex over ``/``-separated relative paths.

    ``*`` and ``?`` stay within one path segment, ``**`` spans segments (``**/`` may
    match nothing), ``[abc]``/``[!abc]`` are classes and ``{a,b}`` alternatives. A
    pattern without ``/`` is matched against the file name only (``*.py`` finds Python
    files at any depth), as in rg's ``--glob``.
    """
    body = pattern.lstrip("/") if "/" in pattern else pattern
    out: list[str] = []
    i, depth, n = 0, 0, len(body)
    while i < n:
        char = body[i]
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if body.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = body.find("]", i + 2)
            if end == -1:
                out.append(re.escape(char))
            else:
                inner = body[i + 1 : end]
                if inner.startswith("!"):
                    inner = "^" + inner[1:]
                out.append("[" + inner.replace("\\", "\\\\") + "]")
                i = end
        elif char == "{":
            depth += 1
            out.append("(?:")
        elif char == "}" and depth:
            depth -= 1
            out.append(")")
        elif char == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(char))
        i += 1
    out.append(")" * depth)
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def glob_matches(compiled: re.Pattern[str], pattern: str, relative_path: str) -> bool:
    """Match a relative path against a compiled glob (name-only when ``pattern`` has no ``/``)."""
    subject = relative_path.rsplit("/", 1)[-1] if "/" not in pattern else relative_path
    return compiled.match(subject) is not None

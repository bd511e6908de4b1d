"""The path jail and the gitignore-aware walker, on real trees in tmp_path."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.workspace import InvalidPath, PathOutsideWorkspace, Workspace, compile_glob, glob_matches

# --------------------------------------------------------------------------- audit

_AUDITED = {"open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.remove", "shutil.rmtree"}
_audit_log: list[tuple[str, tuple]] = []
_audit_on = [False]


def _audit(event: str, args: tuple) -> None:
    if _audit_on[0] and event in _AUDITED:
        _audit_log.append((event, args))


_hook_installed = [False]


def resolve_audited(workspace: Workspace, raw: str) -> tuple[Path | None, ToolFailed | None, list]:
    """Resolve with the audit hook recording every file-touching event during the call.

    Audit hooks cannot be removed, so one is installed on first use and stays idle
    (a flag check) outside these calls.
    """
    if not _hook_installed[0]:
        sys.addaudithook(_audit)
        _hook_installed[0] = True
    _audit_log.clear()
    _audit_on[0] = True
    try:
        return workspace.resolve(raw), None, list(_audit_log)
    except ToolFailed as exc:
        return None, exc, list(_audit_log)
    finally:
        _audit_on[0] = False


# --------------------------------------------------------------------------- tree


def build_tree(base: Path) -> tuple[Path, Path]:
    root = base / "root"
    outside = base / "outside"
    (root / "sub" / "deep").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "sub" / "file.txt").write_text("inside")
    (root / "ünï").mkdir()
    (root / "to_etc").symlink_to("/etc")
    (root / "to_passwd").symlink_to("/etc/passwd")
    (root / "to_outside").symlink_to(outside)
    (root / "to_sub").symlink_to(root / "sub")
    (root / "rel_up").symlink_to("../outside")
    (root / "dangling_out").symlink_to(outside / "not_yet.txt")
    (root / "dangling_in").symlink_to("sub/not_yet.txt")
    (root / "loop_a").symlink_to("loop_b")
    (root / "loop_b").symlink_to("loop_a")
    (root / "self_loop").symlink_to("self_loop")
    return root, outside


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Workspace, Path, Path]:
    root, outside = build_tree(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return Workspace(root), root, outside


SEGMENTS = [
    "..", ".", "", "sub", "deep", "file.txt", "to_etc", "to_passwd", "to_outside", "to_sub", "rel_up",
    "dangling_out", "dangling_in", "loop_a", "self_loop", "ünï", "日本語", "passwd", "outside",
    "secret.txt", "new.txt", "a\x00b", "root", "~",
]
PREFIXES = ["", "/", "~/", "~", "./", "/etc/", "ROOT/", "OUTSIDE/", "//"]


@st.composite
def raw_paths(draw: st.DrawFn) -> tuple[str, list[str]]:
    prefix = draw(st.sampled_from(PREFIXES))
    parts = draw(
        st.lists(
            st.one_of(st.sampled_from(SEGMENTS), st.text(st.characters(blacklist_characters="/\x00"), max_size=6)),
            max_size=7,
        )
    )
    return prefix, parts


def expected_inside(root: Path, raw: str) -> bool | None:
    """Independent oracle from the kernel: does raw name something inside root?

    None when the kernel could never use the path: a NUL, empty, characters no file name
    can hold (a lone surrogate), a symlink loop, or '..' after a part that does not exist.
    """
    if "\x00" in raw or not raw.strip():
        return None
    try:
        os.fsencode(raw)
    except UnicodeEncodeError:
        return None
    expanded = os.path.expanduser(raw) if raw.startswith("~") else raw
    parts = os.path.join(str(root), expanded).split("/")
    real = None
    for cut in range(len(parts), 0, -1):
        prefix = "/".join(parts[:cut]) or "/"
        try:
            os.stat(prefix)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return None
            if os.path.islink(prefix) and cut == len(parts):
                real = os.path.realpath(prefix)  # a dangling link: a write lands on its target
                break
            continue
        rest = [p for p in parts[cut:] if p not in ("", ".")]
        if ".." in rest:
            return None
        if rest and os.path.islink(os.path.join(prefix, rest[0])):
            target = os.path.realpath(os.path.join(prefix, rest[0]))
            if ".." in rest[1:]:
                return None
            real = os.path.join(target, *rest[1:])
        else:
            real = os.path.join(os.path.realpath(prefix, strict=True), *rest)
        break
    assert real is not None
    return real == str(root) or real.startswith(str(root) + os.sep)


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw_paths())
def test_jail_accepts_only_paths_inside_and_opens_nothing(tree, generated) -> None:
    workspace, root, outside = tree
    prefix, parts = generated
    prefix = prefix.replace("ROOT", str(root)).replace("OUTSIDE", str(outside))
    raw = prefix + "/".join(parts)

    result, error, events = resolve_audited(workspace, raw)

    assert events == [], f"resolve touched files for {raw!r}: {events}"
    oracle = expected_inside(root, raw)
    if result is not None:
        assert oracle is True, f"{raw!r} accepted as {result} but the kernel says otherwise"
        assert str(result) == str(root) or str(result).startswith(str(root) + os.sep)
        if os.path.exists(result):
            # What was checked is what the raw path names.
            absolute = os.path.join(str(root), os.path.expanduser(raw) if raw.startswith("~") else raw)
            assert os.stat(absolute).st_ino == os.stat(result).st_ino
    else:
        assert isinstance(error, (PathOutsideWorkspace, InvalidPath)), error
        assert oracle is not True or "\x00" in raw, f"{raw!r} refused but it is inside: {error}"


@pytest.mark.parametrize(
    "raw",
    ["../outside/secret.txt", "/etc/passwd", "to_etc/passwd", "to_passwd", "to_outside/secret.txt",
     "rel_up/secret.txt", "dangling_out", "sub/../../outside/secret.txt", "~/notes.txt", "/", "to_etc"],
)
def test_escapes_are_refused_with_a_message_naming_the_path(tree, raw: str) -> None:
    workspace, _, _ = tree
    result, error, events = resolve_audited(workspace, raw)
    assert result is None and events == []
    assert isinstance(error, PathOutsideWorkspace)
    assert isinstance(error, ToolFailed)
    assert repr(raw) in error.message and "outside the workspace" in error.message and "--add-dir" in error.message


@pytest.mark.parametrize("raw", ["loop_a", "loop_a/x.txt", "self_loop", "a\x00b", "", "   "])
def test_loops_nul_and_empty_are_invalid(tree, raw: str) -> None:
    workspace, _, _ = tree
    with pytest.raises(InvalidPath):
        workspace.resolve(raw)


def test_inside_paths_resolve_through_symlinks_and_to_new_files(tree) -> None:
    workspace, root, _ = tree
    assert workspace.resolve("to_sub/file.txt") == root / "sub" / "file.txt"
    assert workspace.resolve("dangling_in") == root / "sub" / "not_yet.txt"
    assert workspace.resolve("new/dir/file.py") == root / "new" / "dir" / "file.py"
    assert workspace.resolve(str(root / "ünï" / "日本.txt")) == root / "ünï" / "日本.txt"
    assert workspace.resolve("sub/deep/../../sub") == root / "sub"
    assert workspace.resolve(".") == root
    with pytest.raises(ToolFailed, match="does not exist"):
        workspace.resolve("missing.txt", must_exist=True)


def test_added_dir_is_allowed_and_shown_absolute(tree) -> None:
    workspace, root, outside = tree
    with pytest.raises(PathOutsideWorkspace):
        workspace.resolve(str(outside / "secret.txt"))
    workspace.add_dir(outside)
    assert workspace.resolve("to_outside/secret.txt") == outside / "secret.txt"
    assert workspace.relative(outside / "secret.txt") == str(outside / "secret.txt")
    assert workspace.relative(root / "sub" / "file.txt") == "sub/file.txt"
    assert workspace.relative(root) == "."


# -------------------------------------------------------------------------- walker


def write(path: Path, text: str = "x\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def walked(workspace: Workspace, start: str = ".", **kwargs) -> list[str]:
    return sorted(workspace.relative(p) for p in workspace.walk(start, **kwargs))


def test_walker_honours_gitignore_and_ignore_files_at_every_level(tmp_path: Path) -> None:
    for name in ["a.py", "a.pyc", "keep.pyc", "build/out.js", "src/m.py", "src/gen/g.py", "src/local.txt",
                 "src/lib/x.log", "docs/d.md", "docs/draft.md", "vendor/v.py", ".hidden/h.py", ".env",
                 ".git/config", ".git/HEAD", "nested/.git/x"]:
        write(tmp_path / name)
    write(tmp_path / ".gitignore", "*.pyc\n!keep.pyc\nbuild/\n# comment\n/vendor\n")
    write(tmp_path / "src" / ".gitignore", "gen/\n*.txt\n")
    write(tmp_path / "src" / "lib" / ".gitignore", "*.log\n")
    write(tmp_path / "docs" / ".gitignore", "draft.md\n")
    write(tmp_path / "docs" / ".ignore", "!draft.md\n")  # .ignore wins over .gitignore
    write(tmp_path / ".git" / "info" / "exclude", "a.py\n")
    workspace = Workspace(tmp_path)

    assert walked(workspace) == ["docs/d.md", "docs/draft.md", "keep.pyc", "src/m.py"]
    assert walked(workspace, include_hidden=True) == [
        ".env", ".gitignore", ".hidden/h.py", "docs/.gitignore", "docs/.ignore", "docs/d.md", "docs/draft.md",
        "keep.pyc", "src/.gitignore", "src/lib/.gitignore", "src/m.py",
    ]
    # Starting below the root still applies the ignore files above.
    assert walked(workspace, "src") == ["src/m.py"]
    # An explicitly named ignored directory is walked.
    assert walked(workspace, "build") == ["build/out.js"]


def test_is_ignored_answers_for_single_paths(tmp_path: Path) -> None:
    write(tmp_path / ".gitignore", "*.log\nbuild/\n")
    write(tmp_path / "src" / ".gitignore", "!keep.log\n")
    for name in ["a.log", "src/keep.log", "src/x.log", "build/out.js", "src/m.py"]:
        write(tmp_path / name)
    workspace = Workspace(tmp_path)
    verdicts = {name: workspace.is_ignored(tmp_path / name)
                for name in ["a.log", "src/keep.log", "src/x.log", "build", "src/m.py"]}
    assert verdicts == {"a.log": True, "src/keep.log": False, "src/x.log": True, "build": True, "src/m.py": False}


def test_walker_lists_dirs_by_depth_and_stops_at_limit(tmp_path: Path) -> None:
    for name in ["a/b/c.txt", "a/d.txt", "e.txt"]:
        write(tmp_path / name)
    workspace = Workspace(tmp_path)
    assert walked(workspace, include_dirs=True, max_depth=1) == ["a", "e.txt"]
    assert walked(workspace, include_dirs=True) == ["a", "a/b", "a/b/c.txt", "a/d.txt", "e.txt"]
    assert len(list(workspace.walk(limit=2))) == 2


def test_walker_skips_symlinks_leaving_the_workspace_and_never_descends_links(tmp_path: Path) -> None:
    root, outside = build_tree(tmp_path)
    workspace = Workspace(root)
    files = walked(workspace, include_dirs=True)
    assert "to_etc" not in files and "to_outside" not in files and "to_passwd" not in files
    assert "loop_a" not in files and "self_loop" not in files
    assert "to_sub" in files  # a link to a directory inside, listed but not descended
    assert not any(f.startswith("to_sub/") for f in files)
    assert "sub/file.txt" in files


def test_walker_prunes_ignored_directories_in_a_wide_tree(tmp_path: Path) -> None:
    for d in range(20):
        directory = tmp_path / f"d{d}"
        directory.mkdir()
        for f in range(60):
            (directory / f"f{f}.py").write_text("")
    write(tmp_path / ".gitignore", "d1*/\n")
    workspace = Workspace(tmp_path)
    assert sum(1 for _ in workspace.iter_paths()) == 9 * 60  # d0, d2..d9 (d1, d10..d19 ignored)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [("*.py", "a/b/x.py", True), ("**/*.py", "x.py", True), ("src/**/*.py", "src/a/b.py", True),
     ("src/*.py", "src/a/b.py", False), ("*.{ts,tsx}", "a/b.tsx", True), ("*.{ts,tsx}", "a/b.js", False),
     ("[!a]*.md", "b.md", True), ("[!a]*.md", "a.md", False), ("test_?.py", "test_1.py", True)],
)
def test_glob_patterns(pattern: str, path: str, expected: bool) -> None:
    assert glob_matches(compile_glob(pattern), pattern, path) is expected


def test_a_lone_surrogate_is_refused_as_an_invalid_path(tmp_path: Path) -> None:
    from ketch.tools.workspace import InvalidPath, Workspace

    with pytest.raises(InvalidPath, match="no file name can hold"):
        Workspace(tmp_path).resolve("src/\ud800.py")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_reading_git_exclude_of_a_folder_without_git_leaves_no_descriptor_open(tmp_path: Path) -> None:
    """A missing ``.git`` on the way to ``.git/info/exclude`` once left its dup open: two per
    session in the UI's file list, until a long test worker's pipes passed select()'s 1024."""
    from ketch.tools.walk_dir import list_beneath

    (tmp_path / "a.txt").write_text("x")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        assert list_beneath(str(tmp_path), "", include_git_exclude=True) is not None
    assert len(os.listdir("/proc/self/fd")) == before

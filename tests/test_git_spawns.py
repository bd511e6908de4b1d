"""Every git process ketch starts goes through ``tools/gitsafe.py``: the source is read (AST) for
every way Python starts a process, each one outside gitsafe must be a known site that never
starts git, and no argv literal beginning with ``git`` is built anywhere else. A new spawn
anywhere in ``src/ketch`` fails here until it is looked at."""

from __future__ import annotations

import ast
from pathlib import Path

import ketch

SRC = Path(ketch.__file__).parent

SPAWN_ATTRS = {
    "run", "Popen", "call", "check_call", "check_output", "getoutput", "getstatusoutput",  # subprocess.*
}
"""Spawning functions of the ``subprocess`` module (as ``subprocess.X``)."""
ANY_SPAWN_ATTRS = {
    "create_subprocess_exec", "create_subprocess_shell", "subprocess_exec", "subprocess_shell",
    "open_process", "run_process", "posix_spawn", "posix_spawnp",
    "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe",
    "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe",
}
"""Names that start a process whatever object they hang off (``os``, ``asyncio``, a loop, ``anyio``, ``pty``)."""
OS_ONLY_ATTRS = {"system", "popen", "fork", "forkpty", "spawn"}
"""Names that start a process as ``os.X`` or ``pty.X`` (elsewhere they mean other things: ``platform.system``)."""

ALLOWED: dict[tuple[str, str], str] = {
    ("tools/gitsafe.py", "launch"): "THE git launcher",
    ("extensions/hooks.py", "_run"): "a user hook: bash -c COMMAND",
    ("sandbox/landlock_exec.py", "main"): "fork, then exec of the command being confined",
    ("sandbox/bwrap.py", "version_of"): "bwrap --version",
    ("sandbox/bwrap.py", "probe"): "bwrap probe: does an unprivileged namespace start",
    ("tools/search.py", "_run_rg"): "ripgrep",
    ("tools/shell.py", "shell"): "the shell tool: the model's command, in the sandbox",
    ("tools/background.py", "start"): "a background command: the reaper launcher around the model's command, in the sandbox",
    ("tools/reaper_exec.py", "main"): "fork, then exec of the background command under the subreaper",
    ("lsp/client.py", "spawn"): "a language server the user configured or has on PATH, in the sandbox",
}
"""Every other place a process starts, with what it starts (never git)."""


def _spawn_sites() -> list[tuple[str, str, int, str]]:
    """(file, enclosing function, line, called name) of every process start in the source."""
    sites: list[tuple[str, str, int, str]] = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), rel)
        for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] + [tree]:
            for node in ast.walk(func):
                if not isinstance(node, ast.Call):
                    continue
                name = _spawn_name(node.func)
                if name is not None and _innermost(tree, node) is func:
                    sites.append((rel, getattr(func, "name", "<module>"), node.lineno, name))
    return sites


def _spawn_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        if func.attr in ANY_SPAWN_ATTRS:
            return func.attr
        if func.attr in SPAWN_ATTRS and isinstance(func.value, ast.Name) and func.value.id == "subprocess":
            return f"subprocess.{func.attr}"
        if func.attr in OS_ONLY_ATTRS and isinstance(func.value, ast.Name) and func.value.id in ("os", "pty"):
            return f"{func.value.id}.{func.attr}"
    if isinstance(func, ast.Name) and func.id in ANY_SPAWN_ATTRS | {"Popen", "check_output", "check_call"}:
        return func.id
    return None


def _innermost(tree: ast.AST, target: ast.AST) -> ast.AST:
    """The innermost function holding ``target`` (the module when none)."""
    found: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(n is target for n in ast.walk(node)):
            if found is tree or any(n is node for n in ast.walk(found)):
                found = node
    return found


def test_every_process_start_is_a_known_site() -> None:
    sites = _spawn_sites()
    unknown = [s for s in sites if (s[0], s[1]) not in ALLOWED]
    assert not unknown, (
        f"new process starts {unknown}: a git one must go through ketch.tools.gitsafe (run_git / run_own_store); "
        "any other belongs in ALLOWED with what it starts")
    stale = set(ALLOWED) - {(s[0], s[1]) for s in sites}
    assert not stale, f"ALLOWED names sites that no longer start a process: {stale}"
    git_sites = [s for s in sites if s[0] == "tools/gitsafe.py"]
    assert [s[1] for s in git_sites] == ["launch"], git_sites


def test_no_git_argv_is_built_outside_the_launcher() -> None:
    """``["git", ...]`` (or a tuple, or ``"git"`` as a call's first argument to a spawn) only in gitsafe."""
    found: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "tools/gitsafe.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
                first = node.elts[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.split("/")[-1] == "git":
                    found.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.Call) and _spawn_name(node.func) and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and first.value == "git":
                    found.append(f"{rel}:{node.lineno}")
    assert not found, f"git argv built outside ketch.tools.gitsafe: {found}"


def test_the_scan_sees_a_bypass(tmp_path: Path) -> None:
    """The scan is not blind: a direct ``subprocess.run(["git", ...])`` is seen as a site and as a git argv."""
    code = 'import subprocess\ndef sneaky():\n    return subprocess.run(["git", "status"])\n'
    tree = ast.parse(code)
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and _spawn_name(n.func))
    assert _spawn_name(call.func) == "subprocess.run"
    assert getattr(_innermost(tree, call), "name", None) == "sneaky"
    for name in ("asyncio.create_subprocess_exec", "loop.subprocess_exec", "os.execvp", "anyio.open_process", "os.posix_spawn",
                 "os.system", "pty.spawn", "subprocess.check_output"):
        expr = ast.parse(f"{name}('git')").body[0].value  # type: ignore[attr-defined]
        assert _spawn_name(expr.func), name

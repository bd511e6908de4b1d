"""Read-only carve-outs hold when a command renames or replaces one of their parents.

A bind mount (bubblewrap) or an inode rule (Landlock) pins the carve-out's directory, not its
path: ``mv .github x && mkdir -p .github/workflows`` would leave the old, read-only
directory under ``x`` and make a fresh, writable one where CI looks. Each case here runs one
such command through a real headless session (the shell allowed by a rule) and then reads
the carve-out's path on the host: the file there must still be the original bytes, reached
through real directories (no symlink planted on the way). The same command under
``--sandbox full-access`` must plant the file, which proves the command does what it says.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, tool_results
from kettle import adhoc, run_ketch

WIRE = "openai-chat"
ORIGINAL = "original-bytes-7f3a\n"
EVIL = "evil-bytes-c0de"

# (the carve-out, relative to the workspace; a file inside it, or the carve-out itself when a file)
CARVE_OUTS: list[tuple[str, str]] = [
    (".git", ".git/hooks/pre-commit"),
    (".ketch", ".ketch/hooks.toml"),
    (".github/workflows", ".github/workflows/ci.yml"),
    (".github/actions", ".github/actions/setup/action.yml"),
    (".envrc", ".envrc"),
    (".vscode", ".vscode/tasks.json"),
    ("sub/.gitattributes", "sub/.gitattributes"),
    ("pkg/deep/.envrc", "pkg/deep/.envrc"),
    ("vendor/lib/.git", "vendor/lib/.git/config"),
]


def _ancestors(carve: str) -> list[str]:
    """The carve-out and every directory above it inside the workspace (the ones a command
    could rename or replace to get a fresh path)."""
    parts = carve.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


CASES = [(carve, inner, parent) for carve, inner in CARVE_OUTS for parent in _ancestors(carve)]

# Each attack: a shell command that moves ``parent`` out of the way and plants EVIL at ``inner``.
Attack = Callable[[str, str], str]


def rename_parent(parent: str, inner: str) -> str:
    return f"mv {parent} {parent}.moved; mkdir -p $(dirname {inner}); printf {EVIL} > {inner}; echo done"


def remove_parent(parent: str, inner: str) -> str:
    return f"rm -rf {parent}; mkdir -p $(dirname {inner}); printf {EVIL} > {inner}; echo done"


def symlink_parent(parent: str, inner: str) -> str:
    """Replace the parent by a link to a prepared, writable tree holding the planted file."""
    rest = inner[len(parent):].lstrip("/")
    plant = f"planted/{rest}" if rest else "planted/it"
    target = "planted" if rest else "planted/it"
    return (f"mkdir -p $(dirname {plant}) && printf {EVIL} > {plant}; mv {parent} {parent}.moved; "
            f"rm -rf {parent}; ln -s $PWD/{target} {parent}; echo done")


def exchange_parent(parent: str, inner: str) -> str:
    """Swap the parent with a prepared directory in one ``renameat2(RENAME_EXCHANGE)``."""
    rest = inner[len(parent):].lstrip("/")
    plant = f"swap/{rest}" if rest else "swap"
    prep = f"mkdir -p $(dirname {plant}) && printf {EVIL} > {plant}" if rest else f"printf {EVIL} > swap"
    code = ("import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
            "r = libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2); "
            "print('EXCHANGED' if r == 0 else 'REFUSED', ctypes.get_errno())")
    return f'{prep}; python3 -c "{code}" swap {parent}; echo done'


ATTACKS: list[Attack] = [rename_parent, remove_parent, symlink_parent, exchange_parent]


def _setup(ws: Path, inner: str) -> None:
    (ws / "src").mkdir(parents=True, exist_ok=True)
    target = ws / inner
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(ORIGINAL)


def _user_config(extra: str) -> None:
    path = Path(os.environ["KETCH_CONFIG_DIR"]) / "config.toml"
    path.write_text(f'titles = false\ncheckpoints = false\n{extra}\n[permissions]\nshell = "allow"\n', encoding="utf-8")


def _held(ws: Path, inner: str) -> bool:
    """The carve-out's file on the host: the original bytes, through real directories only."""
    current = ws
    for part in Path(inner).parts:
        current = current / part
        if current.is_symlink():
            return False
    try:
        return (ws / inner).read_text() == ORIGINAL
    except OSError:
        return False


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.__name__)
@pytest.mark.parametrize(("carve", "inner", "parent"), CASES, ids=[f"{c[2]}" for c in CASES])
@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock", "full-access"])
def test_renaming_or_replacing_a_parent_does_not_reach_the_carve_out(
    tmp_path: Path, mechanism: str, carve: str, inner: str, parent: str, attack: Attack
) -> None:
    ws = tmp_path / "ws"
    _setup(ws, inner)
    flags: list[str] = []
    if mechanism == "full-access":
        _user_config("")
        flags = ["--sandbox", "full-access"]
    else:
        _user_config(f'[sandbox]\nmechanism = "{mechanism}"\n')
    command = attack(parent, inner)
    with FakeProvider([Turn(tool_calls=[ToolCall("shell", {"command": command})]), Turn(text="ok")]) as fake:
        run = run_ketch(["-p", "go", *flags, *adhoc(fake, WIRE)], ws)
    assert run.code == 0, run.stderr
    [(_, out)] = tool_results(fake.model_requests[1])
    assert "done" in out, out  # the command ran to its end
    if mechanism == "full-access":
        assert not _held(ws, inner), f"the attack did nothing even unconfined, so it proves nothing: {out}"
    else:
        assert _held(ws, inner), f"{carve} changed under {mechanism}: {out}"


@pytest.mark.parametrize("mechanism", ["bubblewrap", "landlock"])
def test_sandbox_check_says_how_carve_outs_hold(tmp_path: Path, mechanism: str) -> None:
    ws = tmp_path / "ws"
    _setup(ws, ".github/workflows/ci.yml")
    _user_config(f'[sandbox]\nmechanism = "{mechanism}"\n')
    run = run_ketch(["sandbox", "check"], ws)
    assert run.code == 0, run.stdout + run.stderr
    [line] = [x for x in run.stdout.splitlines() if x.startswith("read-only carve-outs hold")]
    assert ("mount point" in line) if mechanism == "bubblewrap" else ("entry by entry" in line)

"""bash as the oracle of what a command line runs: every program it would start is
recorded with its argv instead of being started.

PATH points at an empty directory, so every external program ends in bash's
``command_not_found_handle``, which records the argv it was given. The builtins the
generated commands use (``echo``, ``true``, ``eval``, ``command``, ``exec`` ...) are
shadowed by functions that record their argv and then do what the builtin does (``eval``
and ``source`` still run their text; ``command`` still looks its program up, which lands
in the handler). ``__KS`` is the exit status of every recorded program (``true`` and ``false`` included), so a run with 0
and a run with 1 together take both sides of ``&&``/``||``/``if``.

Many commands run in one bash process: each in its own ``$( … )`` subshell (which also
waits for a background job: the record channel is the substitution's pipe, held open by
every process the command starts), in its own empty directory (with a file ``in``), with
at most 2 s of CPU and 40 nested function calls (a generated line can loop), the text handed to
``eval``. ``eval`` and ``bash -c`` parse with the same routine; ``test_shell_parse_vs_bash``
checks that the batch gives what ``bash -c`` gives on a sample.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

REC = "\x1e"  # ends one recorded argv
SEP = "\x1f"  # ends one word of it
CASE = "\x1d"  # ends one command line's records
NL = "\x1c"  # a newline inside a word

PRELUDE = r"""
__kr() { local __r; builtin printf -v __r '%s\x1f' "$@"; builtin printf '%s\x1e' "${__r//$'\n'/$'\x1c'}" >&77; }
command_not_found_handle() { __kr "$@"; return "${__KS:-0}"; }
echo() { __kr echo "$@"; return "${__KS:-0}"; }
printf() { __kr printf "$@"; return "${__KS:-0}"; }
true() { __kr true "$@"; return "${__KS:-0}"; }
false() { __kr false "$@"; return "${__KS:-0}"; }
test() { __kr test "$@"; return "${__KS:-0}"; }
cd() { __kr cd "$@"; builtin cd "$@" 2>/dev/null; }
eval() { __kr eval "$@"; builtin eval "$@"; }
source() { __kr source "$@"; builtin source "$@"; }
command() { __kr command "$@"; builtin command "$@"; }
exec() { __kr exec "$@"; builtin exec "$@"; }
read() { __kr read "$@"; return 1; }
"""

RECORDED_BUILTINS = frozenset({"echo", "printf", "true", "false", "test", "cd", "eval", "source", "command", "exec", "read"})
"""Builtins whose runs the prelude records (any other builtin runs unrecorded)."""

_BATCH = (
    PRELUDE
    + r"""
__n=0
while IFS= builtin read -r -d '' __c; do
  __n=$((__n + 1))
  __d="$__root/$__n"
  __out=$({ ulimit -t 2; FUNCNEST=40; builtin cd "$__d" || builtin exit 0; builtin eval "$__c"; } 77>&1 >/dev/null 2>&1 </dev/null)
  builtin printf '%s\x1d' "$__out"
done
"""
)

_SINGLE = "exec 77>&1 >/dev/null 2>&1 </dev/null\n" + PRELUDE


def _env(status: int, empty_bin: Path, root: Path) -> dict[str, str]:
    return {"PATH": str(empty_bin), "HOME": "/home/oracle", "LANG": "C", "__KS": str(status), "__root": str(root), "V": "v1 v2", "E": "", "TMPDIR": str(root)}


def _scratch() -> str | None:
    """Where the oracle's directories go: memory (``/dev/shm``) where the machine has it.
    A batch makes one directory per command line, and on a disk file system (ext4 with
    ``discard`` here) making and removing thousands of them cost more CPU than bash spent
    running the lines (3,200: ~3.4 CPU-s and ~14 s against ~0.1 CPU-s in memory); bash's
    own here-document files follow (``TMPDIR``)."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def _parse(out: str) -> list[tuple[str, ...]]:
    # each record is its words, each followed by SEP, then REC; a newline travels as NL
    # (bash's output is line-buffered: a newline would split the record into two writes,
    # and the records of a pipeline's commands could interleave)
    return [tuple(w.replace(NL, "\n") for w in rec.split(SEP)[:-1]) for rec in out.split(REC)[:-1]]


def bash_runs(commands: list[str], status: int = 0) -> list[list[tuple[str, ...]]]:
    """For each command line, the argv of every program bash would run, in order."""
    with tempfile.TemporaryDirectory(prefix="oracle-", dir=_scratch()) as tmp:
        root = Path(tmp)
        (root / "bin").mkdir()
        script = root / "batch.sh"
        script.write_text(_BATCH)
        for n in range(1, len(commands) + 1):
            (root / str(n)).mkdir()
            (root / str(n) / "in").write_text("in\n")
        # the lines come from a file, not a pipe: ``read -d ''`` reads a pipe a byte per
        # system call (it may not read past the delimiter) and a file in blocks
        lines = root / "lines"
        lines.write_bytes("".join(c + "\0" for c in commands).encode("utf-8", "surrogateescape"))
        with lines.open("rb") as stdin:
            proc = subprocess.run(["/bin/bash", "--norc", "--noprofile", str(script)], stdin=stdin, capture_output=True, env=_env(status, root / "bin", root), timeout=600)
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        cases = proc.stdout.decode("utf-8", "surrogateescape").split(CASE)[:-1]
        assert len(cases) == len(commands), (len(cases), len(commands), proc.stderr[-2000:])
        return [_parse(c) for c in cases]


def bash_c_runs(command: str, status: int = 0) -> list[tuple[str, ...]]:
    """The same record for one command line run as ``bash -c`` (the way ketch runs it)."""
    with tempfile.TemporaryDirectory(prefix="oracle-", dir=_scratch()) as tmp:
        root = Path(tmp)
        (root / "bin").mkdir()
        (root / "prelude.sh").write_text(_SINGLE)
        (root / "w").mkdir()
        (root / "w" / "in").write_text("in\n")
        env = {**_env(status, root / "bin", root), "BASH_ENV": str(root / "prelude.sh")}
        proc = subprocess.run(["/bin/bash", "-c", command], cwd=root / "w", capture_output=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
        return _parse(proc.stdout.decode("utf-8", "surrogateescape"))


def have_bash() -> bool:
    return os.access("/bin/bash", os.X_OK)


def bash_builtins() -> frozenset[str]:
    """The names bash runs itself (builtins and reserved words): not recorded unless the
    prelude shadows them."""
    out = subprocess.run(["/bin/bash", "--norc", "--noprofile", "-c", "compgen -b; compgen -k"], capture_output=True, text=True, check=True).stdout
    return frozenset(out.split()) - RECORDED_BUILTINS

"""The parser against bash itself: bash prints back how it parsed a command (``declare -f``
of a function wrapping it, which runs nothing), and ketch's parse of the original must
find the same simple commands as its parse of bash's rendering, or refuse to judge.

This is how the grammar's habit of joining ``a | b | c<newline>d`` into one command was
found; it keeps looking for more such differences on generated command lines."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ketch.extensions.shell_parse import parse_command

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

_words = st.sampled_from(
    ["ls", "git", "status", "-la", "'a b'", '"c d"', "x\\ y", "$HOME", "f.txt", "*.py", "--", "a=b", "'a;b'", '"x|y"', "#c", "a#b", "`ls`", "\\;", "2", "{a,b}", "$'q\\n'", '"$(ls)"']
)
_ops = st.sampled_from([" ; ", " && ", " || ", " | ", "\n", " |& ", " &\n", ";\n", " |\n", " &&\n"])
_redirects = st.sampled_from(["", "", "", " > out", " 2>&1", " < in", " >> log", " 2>/dev/null"])


@st.composite
def _command(draw: st.DrawFn, depth: int = 0) -> str:
    words = draw(st.lists(_words, min_size=1, max_size=4))
    if depth < 1 and draw(st.integers(0, 5)) == 0:
        words.append("$(" + draw(_command(depth + 1)) + ")")
    if draw(st.integers(0, 6)) == 0:
        words.insert(1, "\\\n")
    shape = draw(st.integers(0, 9))
    text = " ".join(words) + draw(_redirects)
    if shape == 0:
        return f"({text})"
    if shape == 1:
        return f"{{ {text}; }}"
    if shape == 2:
        return f"V=1 {text}"
    if shape == 3:
        return f"cat <<E{draw(_redirects)}\n{' '.join(words)}\nE\n{text}"
    return text


@st.composite
def _line(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.tuples(_command(), _ops), min_size=0, max_size=4))
    return "".join(c + op for c, op in parts) + draw(_command())


def _bash_rendering(command: str) -> str | None:
    """How bash parsed ``command`` (None when bash rejects it)."""
    script = f"__ketch_probe() {{\n{command}\n}}\ndeclare -f __ketch_probe"
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True, text=True, timeout=10, env={"PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        return None
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("__ketch_probe") and lines[1].strip() == "{" and lines[-1] == "}", proc.stdout
    return "\n".join(lines[2:-1])


def _commands(command: str) -> Counter[tuple[str, ...]] | None:
    parsed = parse_command(command)
    if parsed.error:
        return None
    # a word bash expands is compared by kind only: bash renders its source text its own way.
    # Only the top-level commands: inside substitutions the grammar reads bash's rendering
    # of a here-doc body differently (``$((ls ))`` as ``$( (ls) )``), and those are hazards anyway.
    return Counter(tuple(w.text if w.static else "<expanded>" for w in c.words) for c in parsed.commands if not c.enclosed_by)


@settings(max_examples=250, deadline=None)
@given(_line())
def test_ketch_finds_the_commands_bash_finds_or_refuses_to_judge(command: str) -> None:
    ours = _commands(command)
    if ours is None:
        return  # not judged: asks, and guards refuse
    rendered = _bash_rendering(command)
    if rendered is None:
        return  # bash rejects it as well
    theirs = _commands(rendered)
    if theirs is None:
        return  # the grammar cannot read bash's rendering: no verdict from this oracle
    assert ours == theirs, (command, rendered)


@pytest.mark.parametrize("command", ["a | b | c\nd e && f", "ls -la\ngit status", "cat <<EOF\nx\nEOF\nls"])
def test_known_cases_agree_or_are_refused(command: str) -> None:
    ours = _commands(command)
    rendered = _bash_rendering(command)
    assert rendered is not None
    assert ours is None or ours == _commands(rendered)

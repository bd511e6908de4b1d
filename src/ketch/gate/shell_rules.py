"""Matching shell permission rules and command guards against a parsed command.

* An *allow* pattern covers a command line only when the parse is clean (no hazard: see
  ``shell_parse``) and every simple command in it, as written, matches an allow pattern.
* A *deny* or *ask* pattern, and a guard's ``command_prefix``, hit when any simple command
  matches, as written or as it really runs (``invocations``: wrappers and global options
  removed, ``sh -c``/``eval`` bodies parsed). A command whose program, or a word the
  pattern looks at, is only known at run time counts as a hit: it could be that program.
* An allow pattern never covers a command whose options write files, run commands or
  read configuration (``program_options``: ``find -exec``, ``sort -o``, ``git -c`` ...),
  and covers a wrapped program (``timeout 5 X``) only when ``X`` is covered too.
* A command the grammar cannot parse is allowed by no pattern, is refused by every
  guard (bash runs the lines before a syntax error, so nothing about it is proved), and
  hits every deny pattern whose program name occurs in it as a word (with quotes and
  backslashes taken out), or that holds a ``$`` or a backtick (it could build the name).

Patterns are text: a trailing ``*`` means "this prefix" (``ls *`` also covers a bare
``ls``), a ``*`` elsewhere matches any text, runs of whitespace count as one space.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from pathlib import Path

from ketch.gate.invocations import Invocation, invocations, invocations_of
from ketch.gate.program_options import effects, vouched
from ketch.gate.shell_parse import ParsedCommand, SimpleCommand, Word, parse_command


def collapse_whitespace(text: str) -> str:
    """Runs of whitespace become one space; the ends are trimmed."""
    return " ".join(text.split())


def wildcard_matches(pattern: str, value: str) -> bool:
    """``*`` matches any text (slashes included); everything else is literal."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), value, re.DOTALL) is not None


def command_pattern_matches(pattern: str, text: str) -> bool:
    """Match one simple command's text against a pattern (see the module doc)."""
    pattern, text = collapse_whitespace(pattern), collapse_whitespace(text)
    if pattern.endswith(" *") and text == pattern[:-2]:
        return True
    return wildcard_matches(pattern, text)


def written_text(command: SimpleCommand) -> str:
    """A simple command as written: its words with quotes resolved, re-quoted where needed."""
    return Invocation(command.words).text()


def _pattern_words(pattern: str) -> list[str]:
    try:
        return shlex.split(pattern)
    except ValueError:
        return pattern.split()


def _literal_prefix(pattern: str) -> list[str]:
    """The words a pattern fixes before its first ``*`` (the last one may be partial)."""
    head = collapse_whitespace(pattern).split("*", 1)[0]
    words = _pattern_words(head)
    if head.endswith(" ") and words:
        words.append("")  # "git push *": the next word is free
    return words


def prefix_could_match(prefix: list[str], invocation: Invocation) -> bool:
    """Whether the invocation starts with the words of ``prefix`` or could at run time.

    Words compare whole, except the last prefix word, which may be the start of a word;
    a program compares by name (``/usr/bin/git`` is ``git``). A word only known at run
    time matches whatever the prefix still asks for."""
    if not prefix:
        return True
    words = invocation.words
    for i, want in enumerate(prefix):
        if i >= len(words):
            return False
        word = words[i]
        if not word.fixed:
            return True
        have = word.text
        if i == 0:
            want = posixpath.basename(want) or want
        if i == len(prefix) - 1:
            return have.startswith(want)
        if have != want:
            return False
    return True


def pattern_hits(pattern: str, invocation: Invocation) -> bool:
    """A deny/ask pattern against one invocation: a text match when every word is fixed,
    else a match on the words the pattern fixes (an unknown word could be anything)."""
    if all(w.fixed for w in invocation.words):
        return command_pattern_matches(pattern, invocation.text())
    return prefix_could_match(_literal_prefix(pattern), invocation)


def normalized_prefix(prefix: str) -> list[str]:
    """A guard prefix as the words of what it runs (``sudo git push`` is ``git push``)."""
    found, error = invocations_of(prefix)
    if not error and len(found) == 1 and all(w.fixed for w in found[0].words):
        return [w.text for w in found[0].words]
    return _pattern_words(prefix)


def _mentions(command: str, program: str) -> bool:
    name = re.escape(posixpath.basename(program) or program)
    return re.search(rf"(?<![\w.-]){name}(?![\w.-])", command) is not None


def unquoted(command: str) -> str:
    """The text with quotes, backslashes and line continuations taken out (``r\\m``,
    ``r''m`` and ``r\\<newline>m`` all name ``rm``)."""
    return re.sub(r"\\\n|[\\'\"]", "", command)


def command_hits(pattern_or_prefix: str, command: str, *, prefix: bool) -> tuple[bool, str]:
    """Whether ``command`` hits a deny pattern (``prefix=False``) or a guard prefix, and
    when the hit is only a possibility, why (the program is only known at run time, the
    command cannot be parsed). Every simple command counts, as written and as it runs."""
    parsed = parse_command(command)
    words = normalized_prefix(pattern_or_prefix) if prefix else _literal_prefix(pattern_or_prefix)
    if parsed.error:
        # bash runs the lines before a syntax error, and where the grammar and bash see
        # the error can differ: a guard refuses what it cannot read; a deny rule hits when
        # its program is named (the command asks anyway, since no allow covers it)
        if prefix:
            return True, f"the command cannot be parsed ({parsed.error}), so the guard cannot rule out {' '.join(words)[:60]}"
        if not words or not words[0] or _mentions(command, words[0]) or _mentions(unquoted(command), words[0]) or re.search(r"[$`]", command):
            return True, f"the command cannot be parsed ({parsed.error}), so it may run {words[0] if words else 'anything'}"
        return False, ""
    forms = [Invocation(c.words) for c in parsed.commands if c.words] + invocations(parsed)
    for inv in forms:
        hit = prefix_could_match(words, inv) if prefix else pattern_hits(pattern_or_prefix, inv)
        if hit:
            return True, inv.why_unknown
        if prefix and len(words) >= 2 and _runs_in_arguments(words, inv):
            return True, f"its arguments hold {' '.join(words)[:60]} (a program that runs its arguments)"
    return False, ""


def _runs_in_arguments(prefix: list[str], invocation: Invocation) -> bool:
    """Whether the prefix's words stand in a row among the arguments, the way a program
    that runs its arguments (``strace -f git push``, ``chroot / git push``, ``runuser -u x
    -- git push``) would be given them. Only for prefixes of two or more words, since a
    lone program name is too common as an argument (``git rm``)."""
    program = posixpath.basename(prefix[0]) or prefix[0]
    words = invocation.words
    for k in range(1, len(words) - 1):
        word = words[k]
        if word.fixed and (posixpath.basename(word.text) or word.text) == program:
            if prefix_could_match(prefix, Invocation((Word(program), *words[k + 1 :]))):
                return True
    return False


def _leading_wildcard(word: Word) -> bool:
    name = posixpath.basename(word.text)
    return word.glob and bool(name) and name[0] in "*?[{"


def _glob_reaches_options(word: Word, root: Path | None) -> bool:
    """A glob whose last part starts with a wildcard can expand to a file named like an
    option (``--output=...``); true when such a file is there to expand to."""
    if not word.glob or root is None:
        return False
    directory, name = posixpath.split(word.text)
    if not name or name[0] not in "*?[{":
        return False
    try:
        base = Path(directory) if directory.startswith("/") else root / directory
        return any(entry.startswith("-") for entry in os.listdir(base))
    except (FileNotFoundError, NotADirectoryError):
        return False  # nothing to expand to: bash passes the word as it is
    except OSError:
        return True


def allow_blocker(parsed: ParsedCommand, root: Path | None = None) -> str:
    """Why no allow rule can cover this command line; empty when one may."""
    if parsed.error:
        return f"ketch cannot parse this command ({parsed.error}), so no rule can allow it"
    if parsed.hazards:
        return "no allow rule covers it, because it has " + "; ".join(parsed.hazards[:4])
    named = _effect_reasons(parsed)
    for inv in invocations(parsed):
        if not inv.program and inv.why_unknown not in named:
            return f"no allow rule covers it, because it runs a program only known at run time ({inv.why_unknown})"
    moves = any(c.words and c.words[0].text in ("cd", "pushd", "popd") for c in parsed.commands)
    for command in parsed.commands:
        if any(_leading_wildcard(w) if moves else _glob_reaches_options(w, root) for w in command.words[1:]):
            return "no allow rule covers it, because a glob in it can expand to a file named like an option"
    return ""


_KINDS = {"write": "it writes files", "exec": "it runs commands or code", "config": "it reads configuration that can run commands"}


def covering_allows(patterns: list[str], parsed: ParsedCommand) -> list[int] | None:
    """For a clean parse: the index of the allow pattern covering each simple command,
    as written and as it runs (the program a wrapper runs needs its own allow: one for
    ``timeout *`` is not one for ``timeout 5 rm -rf x``), or None when some is not covered."""
    chosen: list[int] = []
    named = _effect_reasons(parsed)  # unknown only through an effect a pattern must vouch for
    forms = [c.words for c in parsed.commands] + [inv.words for inv in invocations(parsed) if inv.program or inv.why_unknown not in named]
    for words in forms:
        if not words:
            return None
        text, done = Invocation(words).text(), effects(words)
        index = next((k for k, p in enumerate(patterns) if command_pattern_matches(p, text) and all(vouched(e, p) for e in done)), None)
        if index is None:
            return None
        chosen.append(index)
    return chosen or None


def _effect_reasons(parsed: ParsedCommand) -> set[str]:
    """What the effects of the command's programs say, to tell an invocation that is
    unknown because of one (``python3 -m pytest``) from one that is unknown outright."""
    forms = [c.words for c in parsed.commands] + [inv.words for inv in invocations(parsed) if inv.program]
    return {e.what for words in forms for e in effects(words)}


def effect_note(patterns: list[str], parsed: ParsedCommand) -> str:
    """Why the allow patterns did not cover a clean command: the first option or program
    that writes, runs or configures and that no matching pattern names."""
    forms = [c.words for c in parsed.commands] + [inv.words for inv in invocations(parsed)]
    for words in forms:
        text = Invocation(words).text()
        matching = [p for p in patterns if command_pattern_matches(p, text)]
        for effect in effects(words):
            if matching and not any(vouched(effect, p) for p in matching):
                return f"no allow rule covers it, because {effect.what} ({_KINDS[effect.kind]}), which the rule does not name"
    return ""

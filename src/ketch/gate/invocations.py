"""What each simple command of a parsed command line really invokes.

A command guard (``command_prefix`` in a plugin or the config) and a deny rule look at the
program that will run, not at how it was spelled: wrappers that only change *how* a command
runs (``env``, ``sudo``, ``nice``, ``timeout``, ``xargs`` ...) are removed, ``sh -c`` and
``eval`` bodies are parsed in turn, ``find -exec`` commands are looked at, a path-qualified
program is reduced to its name, and git's global options (``-C``, ``-c``, ``--git-dir`` ...)
are dropped so ``git -C x push`` reads ``git push``.

Where the program or its subcommand is only known when the command runs (a variable or
substitution in command position, a shell reading commands from its input, an
interpreter's inline code, ``xargs`` feeding a shell), the invocation is ``unknown`` from
that word on: every guard whose program it could be refuses it.

It is one thing at this length: one recursive walk from a simple command to what runs;
wrappers, shells, git and runners call back into it, so split they would recurse across
modules.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from ketch.gate.program_options import effects
from ketch.gate.shell_parse import INTERPRETERS, SHELLS, ParsedCommand, SimpleCommand, Word, parse_command

MAX_DEPTH = 6

ANY = Word("<determined at run time>", static=False)
"""Stands for words only known when the command runs."""

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=.*", re.DOTALL)

# wrapper: options that take a separate value (short letters, long names)
_WRAPPERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "env": ("uCSP", ("--unset", "--chdir", "--split-string", "--default-signal", "--ignore-signal", "--block-signal")),
    "command": ("", ()),
    "builtin": ("", ()),
    "exec": ("a", ()),
    "nice": ("n", ("--adjustment",)),
    "nohup": ("", ()),
    "timeout": ("sk", ("--signal", "--kill-after")),
    "time": ("fo", ("--format", "--output")),
    "sudo": ("ugCDhprtTU", ("--user", "--group", "--close-from", "--chdir", "--host", "--prompt", "--role", "--type", "--command-timeout", "--other-user")),
    "doas": ("uC", ()),
    "xargs": ("adEeIiLlnPs", ("--arg-file", "--delimiter", "--eof", "--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var")),
    "stdbuf": ("ioe", ("--input", "--output", "--error")),
    "ionice": ("cnp", ("--class", "--classdata", "--pid", "--pgid", "--uid")),
    "setsid": ("", ()),
    "nocorrect": ("", ()),
    "noglob": ("", ()),
    "chrt": ("", ()),
    "taskset": ("", ()),
    "unbuffer": ("", ()),
    "busybox": ("", ()),
    "caffeinate": ("", ()),
}
_TAKES_A_NUMBER_FIRST = frozenset({"timeout", "chrt", "taskset"})
"""Wrappers whose first operand (a duration, priority or CPU mask) precedes the command."""

_GIT_VALUED = ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--attr-source", "--exec-path", "--list-cmds")
_INLINE_CODE = {"python": ("-c",), "node": ("-e", "--eval", "-p", "--print"), "perl": ("-e", "-E"), "ruby": ("-e",), "php": ("-r",), "lua": ("-e",)}
_AWK = frozenset({"awk", "gawk", "mawk", "nawk", "busybox-awk"})


@dataclass(frozen=True)
class Invocation:
    """A program as it will run and its arguments; ``ANY`` marks the first word that
    is only known at run time (everything from it on could be anything)."""

    words: tuple[Word, ...]
    why_unknown: str = ""

    @property
    def program(self) -> str:
        return self.words[0].text if self.words and self.words[0].fixed else ""

    def text(self) -> str:
        """The invocation as one line: fixed words as they are, quoted when needed."""
        return " ".join(_show(w) for w in self.words)


def _show(word: Word) -> str:
    if not word.static:
        return word.text
    if word.text and not re.search(r"[\s'\"\\;&|<>()$`]", word.text):
        return word.text
    return "'" + word.text.replace("'", "'\\''") + "'"


def invocations(parsed: ParsedCommand, depth: int = 0) -> list[Invocation]:
    """Every invocation in a parsed command line (nested bodies included)."""
    found: list[Invocation] = []
    for command in parsed.commands:
        found += _resolve(command, depth)
    for reason in parsed.opaque:
        found += _unknown([], 0, reason)
    for assignment in parsed.assignments:
        if _code_later(assignment):
            found += _unknown([], 0, f"the variable assignment {assignment[:40]!r} can run code later")
    return found


_CODE_VARIABLES = frozenset(
    {"BASH_ENV", "ENV", "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "BASH_LOADABLES_PATH", "IFS", "PATH", "LD_PRELOAD", "LD_LIBRARY_PATH",
     "PAGER", "MANPAGER", "MANOPT", "EDITOR", "VISUAL", "LESSOPEN", "LESSCLOSE", "LESSKEY", "LESSKEYIN", "LESS", "BROWSER", "SSH_ASKPASS", "SUDO_ASKPASS",
     "PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "NODE_OPTIONS", "NODE_PATH", "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "RIPGREP_CONFIG_PATH", "TAR_OPTIONS",
     "CURL_HOME", "WGETRC", "npm_config_userconfig", "NPM_CONFIG_USERCONFIG", "XDG_CONFIG_HOME", "HOME", "MAKEFLAGS", "GNUMAKEFLAGS", "AWKPATH", "SHELL", "TMPDIR"}
)
"""Variables a program (or bash) reads code, configuration or programs from; any ``GIT_*``
variable counts too (git reads config, aliases, pagers and ssh commands from them)."""


def _code_later(assignment: str) -> bool:
    """An assignment bash or the programs it starts may run as code: a prompt, startup
    file or search path variable, or a value with a substitution in quotes (``PS4``,
    arithmetic on the variable and ``${x@P}`` evaluate it)."""
    name, _, value = assignment.partition("=")
    name = name.rstrip("+")
    return name in _CODE_VARIABLES or name.startswith("GIT_") or "$(" in value or "`" in value or "<(" in value


def invocations_of(source: str, depth: int = 0) -> tuple[list[Invocation], str]:
    """Parse ``source`` and return its invocations and the parse error (if any)."""
    parsed = parse_command(source)
    if parsed.error:
        return [], parsed.error
    return invocations(parsed, depth), ""


def _resolve(command: SimpleCommand, depth: int) -> list[Invocation]:
    words = list(command.words)
    if not words:
        return []
    risky = next((a for a in command.assignments if _code_later(a)), None)
    if risky is not None:
        return _unwrap(words, depth) + _unknown([], 0, f"the variable {risky.split('=', 1)[0]} set for the command can make it run other code")
    return _unwrap(words, depth)


def _unknown(words: list[Word], at: int, why: str) -> list[Invocation]:
    """The command runs code that is only known at run time: it could be any program
    (and the words before ``at`` stay visible as what was written)."""
    found = [Invocation((*words[:at], ANY), why)] if at else []
    return found + [Invocation((ANY,), why)]


def _unwrap(words: list[Word], depth: int) -> list[Invocation]:
    """Strip wrappers and global options; recurse into bodies."""
    if depth > MAX_DEPTH:
        return _unknown([], 0, "commands nested too deeply to follow")
    while words:
        head = words[0]
        if not head.fixed:
            return _unknown([], 0, f"the program name {head.text[:40]!r} is only known at run time")
        name = posixpath.basename(head.text.rstrip("/")) or head.text
        if name in _WRAPPERS:
            rest = _skip_options(name, words[1:])
            if rest is None:
                return _unknown([Word(name)], 1, f"{name} options ketch cannot follow")
            if name == "xargs":
                return _xargs(words[1:], rest, depth)
            if name == "env":
                split = _env_split_string(words[1:])
                if split is not None:
                    return _nested(split, depth, "env -S")
            if name in ("sudo", "doas") and any(w.fixed and w.text in ("-s", "-i", "--shell", "--login") for w in words[1 : len(words) - len(rest)]):
                if rest:
                    return _nested(" ".join(_show(w) for w in rest), depth, f"{name} -s")
            words = rest
            continue
        break
    if not words:
        return []
    name = posixpath.basename(words[0].text.rstrip("/")) or words[0].text
    words = [Word(name), *words[1:]]
    opaque = [e for e in effects(words) if e.opaque and e.kind in ("exec", "config")]
    found = _program(name, words, depth)
    if opaque and all(inv.program for inv in found):
        found += _unknown([], 0, opaque[0].what)
    return found


def _program(name: str, words: list[Word], depth: int) -> list[Invocation]:
    """One program's invocations, its wrappers already removed."""
    args = words[1:]
    if name in SHELLS:
        return _shell(words, depth)
    if name == "eval":
        if all(w.static for w in args):
            return [Invocation(tuple(words))] + _nested(" ".join(w.text for w in args), depth, "eval")
        return _unknown(words, 1, "eval of text only known at run time")
    if name in ("source", "."):
        return [Invocation(tuple(words))]
    if name == "trap" and args and args[0].fixed and not args[0].text.startswith("-"):
        return [Invocation(tuple(words))] + _nested(args[0].text, depth, "trap")
    if name in ("alias", "enable", "shopt") and args or name == "hash" and any(w.text.startswith("-") and "p" in w.text for w in args):
        return _unknown(words, 1, f"{name} changes what a later command name runs")
    if name == "git":
        return _git(words)
    if name in ("find", "fd", "fdfind"):
        return [Invocation(tuple(words))] + _exec_bodies(args, depth)
    if name in _AWK:
        if any(not w.static or re.search(r"system|\||getline", w.text) for w in args):
            return _unknown(words, 1, f"{name} code that can run commands")
        return [Invocation(tuple(words))]
    family = next((k for k in _INLINE_CODE if INTERPRETERS.fullmatch(name) and name.startswith(k)), "")
    if family and any(w.fixed and (w.text in _INLINE_CODE[family] or _combined(w.text, _INLINE_CODE[family])) for w in args):
        return _unknown(words, 1, f"{name} inline code")
    if name in _RUNNERS:
        return [Invocation(tuple(words))] + _runner_body(name, args, depth)
    return [Invocation(tuple(words))]


def _combined(text: str, flags: tuple[str, ...]) -> bool:
    """``-Ic`` style: a short flag cluster that contains one of ``flags``."""
    if not text.startswith("-") or text.startswith("--"):
        return False
    return any(len(f) == 2 and f[1] in text[1:] for f in flags)


def _skip_options(name: str, words: list[Word]) -> list[Word] | None:
    """The words after the wrapper's own options (None when an option is dynamic)."""
    short, long = _WRAPPERS[name]
    i = 0
    operand_left = name in _TAKES_A_NUMBER_FIRST
    while i < len(words):
        w = words[i]
        if not w.fixed:
            return None if w.text.startswith("-") or i == 0 and operand_left else words[i:]
        t = w.text
        if t == "--":
            i += 1
            break
        if name in ("env", "sudo") and _ASSIGNMENT.fullmatch(t):
            if _code_later(t):
                return None
            i += 1
            continue
        if name == "nice" and re.fullmatch(r"-\d+", t):
            i += 1
            continue
        if t.startswith("--"):
            key = t.split("=", 1)[0]
            i += 2 if key in long and "=" not in t else 1
            continue
        if t.startswith("-") and len(t) > 1:
            # a cluster like -un: a valued letter takes the rest, or the next word
            for k, letter in enumerate(t[1:], 1):
                if letter in short:
                    i += 1 if k < len(t) - 1 else 2
                    break
            else:
                i += 1
            continue
        break
    rest = words[i:]
    if operand_left and rest:
        rest = rest[1:]
    return rest


def _env_split_string(words: list[Word]) -> str | None:
    for i, w in enumerate(words):
        if w.fixed and (w.text in ("-S", "--split-string")) and i + 1 < len(words):
            return " ".join(_show(x) if not x.static else x.text for x in words[i + 1 :])
        if w.fixed and w.text.startswith("--split-string="):
            return " ".join([w.text.split("=", 1)[1], *(x.text for x in words[i + 1 :])])
        if w.fixed and w.text.startswith("-S") and len(w.text) > 2:
            return " ".join([w.text[2:], *(x.text for x in words[i + 1 :])])
    return None


def _nested(body: str, depth: int, what: str) -> list[Invocation]:
    found, error = invocations_of(body, depth + 1)
    if error:
        return _unknown([], 0, f"the body of {what} cannot be parsed: {error}")
    return found


def _shell(words: list[Word], depth: int) -> list[Invocation]:
    """``bash -c BODY``: the body parsed in turn; a shell reading its input is unknown."""
    i, command_flag, reads_stdin = 1, False, False
    while i < len(words):
        w = words[i]
        if not w.fixed:
            return _unknown(words, i, f"{words[0].text} options only known at run time")
        t = w.text
        if t == "--":
            i += 1
            break
        if t in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if t.startswith(("-", "+")) and len(t) > 1 and not t.startswith("--"):
            command_flag |= "c" in t[1:]
            reads_stdin |= "s" in t[1:] or "i" in t[1:]
            i += 1
            continue
        if t.startswith("--"):
            i += 1
            continue
        break
    operands = words[i:]
    if command_flag:
        if not operands:
            return _unknown(words, 1, f"{words[0].text} -c without a command")
        body = operands[0]
        if not body.static:
            return _unknown(words, 1, f"{words[0].text} -c with a command only known at run time")
        return [Invocation(tuple(words[:2]))] + _nested(body.text, depth, f"{words[0].text} -c")
    if reads_stdin or not operands:
        return _unknown(words, 1, f"{words[0].text} reading commands from its input")
    return [Invocation(tuple(words))]  # a script file: its content is beyond a command guard


def _xargs(options: list[Word], rest: list[Word], depth: int) -> list[Invocation]:
    """xargs runs ``rest`` (default ``echo``) with words read from its input."""
    if not rest:
        return [Invocation((Word("echo"), ANY))]
    replace = next((options[k + 1].text for k, w in enumerate(options[:-1]) if w.fixed and w.text in ("-I", "--replace")), None)
    if replace is None and any(w.fixed and w.text == "-i" for w in options):
        replace = "{}"
    marked = [ANY if replace and replace in w.text else w for w in rest]
    inner = _unwrap(marked + ([] if replace else [ANY]), depth + 1)
    return inner


def _git(words: list[Word]) -> list[Invocation]:
    """``git`` without its global options. An alias defined on the command line (which
    may be ``!any shell command``) or a global option only known at run time makes the
    command unknown."""
    i = 1
    while i < len(words):
        w = words[i]
        if not w.fixed:
            return _unknown([Word("git")], 1, "a git option only known at run time")
        t = w.text
        key = t.split("=", 1)[0]
        if key in _GIT_VALUED:
            value = t.split("=", 1)[1] if "=" in t else (words[i + 1].text if i + 1 < len(words) else "")
            if key in ("-c", "--config-env") and re.match(r"(?i)alias\.", value):
                return _unknown([Word("git")], 1, "a git alias defined on the command line")
            if key == "--exec-path" and "=" not in t:
                i += 1
                continue
            i += 1 if "=" in t or (key == "-C" and len(t) > 2) else 2
            continue
        if t.startswith("-C") and len(t) > 2 or t.startswith("-c") and len(t) > 2:
            i += 1
            continue
        if t.startswith("-"):
            i += 1
            continue
        break
    return [Invocation((Word("git"), *words[i:]))]


def _exec_bodies(args: list[Word], depth: int) -> list[Invocation]:
    """``find ... -exec CMD ... ;`` (and -execdir/-ok/-okdir, fd's -x/-X)."""
    found: list[Invocation] = []
    i = 0
    while i < len(args):
        w = args[i]
        if w.fixed and w.text in ("-exec", "-execdir", "-ok", "-okdir", "-x", "--exec", "-X", "--exec-batch"):
            j = i + 1
            while j < len(args) and not (args[j].fixed and args[j].text in (";", "+")):
                j += 1
            body = [ANY if "{}" in b.text else b for b in args[i + 1 : j]]
            if body:
                found += _unwrap(body, depth + 1)
            i = j
        i += 1
    return found


_RUNNERS: dict[str, tuple[str, tuple[str, ...], int]] = {
    # program: (short options with a value, long ones, operands before the command)
    "watch": ("n", ("--interval",), 0),
    "ssh": ("bcDEeFIiJLlmOoPpQRSWw", (), 1),
    "su": ("gGsw", ("--group", "--shell"), 0),
    "script": ("EIOT", ("--log-in", "--log-out", "--log-timing", "--echo"), 0),
    "flock": ("wEF", ("--timeout", "--conflict-exit-code"), 1),
}


def _runner_body(name: str, args: list[Word], depth: int) -> list[Invocation]:
    """Programs that run a command line of their own: ``watch CMD``, ``ssh HOST CMD``,
    ``su -c CMD``, ``script -c CMD``, ``flock FILE CMD`` / ``flock -c CMD``."""
    short, long, skip = _RUNNERS[name]
    for k, w in enumerate(args[:-1]):
        if w.fixed and w.text in ("-c", "--command"):
            body = args[k + 1]
            if not body.static:
                return _unknown([Word(name)], 1, f"{name} -c with a command only known at run time")
            return _nested(body.text, depth, f"{name} -c")
    if name in ("su", "script"):
        return []
    i = 0
    while i < len(args) and args[i].fixed and args[i].text.startswith("-") and args[i].text != "--":
        t = args[i].text
        valued = t.split("=", 1)[0] in long and "=" not in t or (not t.startswith("--") and t[-1] in short)
        i += 2 if valued else 1
    if i < len(args) and args[i].fixed and args[i].text == "--":
        i += 1
    operands = args[i + skip :]
    if not operands:
        return []
    if name == "flock":
        return _unwrap(list(operands), depth + 1)
    if not all(w.static for w in operands):
        return _unknown([Word(name)], 1, f"{name} running a command only known at run time")
    return _nested(" ".join(w.text for w in operands), depth, name)

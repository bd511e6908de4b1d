"""The permission rule "allow commands like this" proposes for a shell command.

Built from the parsed command (``shell_parse``), never from its text: one simple command,
nothing on the side (no redirection that writes, substitution, subshell, ...), its first
words fixed. The rule fixes the program and what says what it does, and leaves only the
remaining arguments free:

* an interpreter or a shell running a script: the script (``python3 src/app.py *``); with
  ``-m`` the module (``python3 -m pytest *``); code given inline (``-c``, ``-e``) gets none;
* a program with a subcommand (``npm test``, ``git status --short``): ``npm test *``;
* otherwise the program and its first argument (``ls -la *``); a program that deletes or
  overwrites (``rm``, ``mv``, ``dd`` ...) gets exactly the command as written (``rm -rf build``,
  never ``rm -rf *``).

A program named by a path (``./run.sh``, ``/usr/bin/python3``) gets none: a rule must match
the command both as written and as it runs (by the program's name), which one pattern
without a wildcard in the program cannot. The user sees the rule in full and may edit it before it is saved; ``None`` when no rule
can be proposed (then the prompt says why).
"""

from __future__ import annotations

import posixpath
import shlex

from ketch.gate.shell_parse import INTERPRETERS, SHELLS, parse_command

_WRAPPERS = frozenset({"sudo", "doas", "env", "xargs", "nohup", "time", "nice", "ionice", "timeout", "exec",
                       "command", "builtin", "stdbuf", "chroot", "unshare", "setsid", "watch", "su", "runuser"})
_INLINE_CODE = frozenset({"-c", "-e", "--eval", "-E", "-p", "--print", "-r"})
_DESTRUCTIVE = frozenset({"rm", "rmdir", "dd", "mkfs", "shred", "truncate", "chmod", "chown", "mv", "kill", "killall", "pkill"})


def propose(command: str) -> tuple[str | None, str]:
    """(the pattern of a ``shell(...)`` allow rule, '' ) or (None, why none is proposed)."""
    parsed = parse_command(command)
    if parsed.error:
        return None, f"the command could not be parsed ({parsed.error})"
    if parsed.hazards:
        return None, f"it has {parsed.hazards[0]}, which no rule allows"
    if len(parsed.commands) != 1:
        return None, "it runs more than one command; a rule covers one"
    words = parsed.commands[0].words
    if not words or not words[0].fixed:
        return None, "its program is only known when it runs"
    program = words[0].text
    name = posixpath.basename(program)
    if "/" in program:  # a rule must match the command as written and as it runs (``python3``)
        return None, f"its program is named by a path ({program}); a rule names a program by its name"
    if name in _WRAPPERS:
        return None, f"{name} runs another command"
    rest = list(words[1:])
    fixed: list[str] = [program]
    if INTERPRETERS.fullmatch(name) or name in SHELLS:
        if not rest or not rest[0].fixed:
            return None, f"{name} with no script runs whatever it reads"
        first = rest[0].text
        if first in _INLINE_CODE or (first.startswith("-") and first != "-m"):
            return None, f"{name} {first} runs code given on the command line"
        if first == "-m":
            if len(rest) < 2 or not rest[1].fixed:
                return None, f"{name} -m with no module"
            fixed += ["-m", rest[1].text]
        else:
            fixed.append(first)
    elif name in _DESTRUCTIVE:
        if not all(w.fixed for w in rest):
            return None, f"{name} with arguments only known when it runs"
        return " ".join(shlex.quote(w.text) for w in words), ""
    elif rest and rest[0].fixed:
        fixed.append(rest[0].text)
    return " ".join(shlex.quote(w) for w in fixed) + " *", ""

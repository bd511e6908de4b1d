"""Permission rules (allow / ask / deny) and the matching they need.

A rule names a tool and, optionally, a pattern on the tool's key argument:

* file tools: a glob with ``**`` matched against the workspace-relative path;
* the shell: a command pattern matched per *segment* of a compound command, where a
  trailing ``*`` means "this prefix";
* anything else (``url`` …): a wildcard pattern where ``*`` matches any text.

Compound shell commands are split on control operators, subshells and command
substitutions. An allow applies only when *every* segment is allowed; a deny or an ask
applies when *any* segment matches. Among matching rules deny beats ask beats allow.

The shell helpers here (``split_shell_command``, ``command_words``) are shared with the
refusal guards in ``plugins.py``.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

Action = Literal["allow", "deny", "ask"]
ACTIONS: tuple[Action, ...] = ("allow", "deny", "ask")
_STRENGTH = {"allow": 0, "ask": 1, "deny": 2}

_PATH_ARGS = frozenset({"path", "file_path", "paths", "dir", "directory", "cwd", "notebook_path"})


class RuleError(ValueError):
    """A permission rule in the configuration is malformed (message names it)."""


@dataclass(frozen=True)
class Rule:
    """One permission rule: ``tool`` (a name, ``*`` wildcards allowed), an optional
    ``pattern`` on the key argument, the ``action`` and where it came from."""

    tool: str
    pattern: str | None
    action: Action
    source: str = ""

    @classmethod
    def parse(cls, spec: str, action: str, source: str = "") -> Rule:
        """Build a rule from the string form ``tool`` or ``tool(pattern)``."""
        spec = spec.strip()
        m = re.fullmatch(r"([A-Za-z0-9_.*\-]+)(?:\((.*)\))?", spec, re.DOTALL)
        if not m or (m.group(2) is not None and not m.group(2).strip()):
            raise RuleError(f"permission rule {spec!r} is malformed: write 'tool' or 'tool(pattern)'")
        return cls(m.group(1), m.group(2).strip() if m.group(2) else None, _action(action, spec), source)


def _action(value: Any, where: str) -> Action:
    if value not in ACTIONS:
        raise RuleError(f"permission rule {where!r} has action {value!r}: use allow, ask or deny")
    return value


def rules_from_config(config: Mapping[str, Any], source: str = "config") -> list[Rule]:
    """Read rules from the configuration mapping.

    Accepted shapes: ``{"shell": {"git status*": "allow"}, "web_fetch": "ask"}`` and the
    string form under an action key: ``{"allow": ["shell(git status*)", "read_file"]}``.
    """
    rules: list[Rule] = []
    for key, value in config.items():
        if key in ACTIONS and isinstance(value, (list, tuple)):
            for spec in value:
                if not isinstance(spec, str):
                    raise RuleError(f"permission rules under {key!r} must be strings, got {spec!r}")
                rules.append(Rule.parse(spec, key, source))
        elif isinstance(value, str):
            rules.append(Rule(key, None, _action(value, key), source))
        elif isinstance(value, Mapping):
            for pattern, action in value.items():
                rules.append(Rule(key, str(pattern), _action(action, f"{key}({pattern})"), source))
        else:
            raise RuleError(f"permission rule for {key!r} must be an action or a mapping of patterns to actions")
    return rules


# ---------------------------------------------------------------- globs and wildcards


@lru_cache(maxsize=1024)
def glob_to_regex(glob: str) -> re.Pattern[str]:
    """Compile a path glob: ``**`` spans directories, ``*`` and ``?`` stay within one,
    ``[...]`` is a character class. Matching is against the whole path."""
    out, i, n = [], 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (j := glob.find("]", i + 2)) != -1:
            body = glob[i + 1 : j].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def normalize_path(value: str) -> str:
    """Forward slashes, no ``.``/``..`` detours, no trailing slash."""
    value = value.replace("\\", "/")
    return posixpath.normpath(value) if value else value


def path_forms(value: str, root: Path | None) -> list[str]:
    """The forms a path argument is matched in: relative to ``root`` when it lies under
    it, absolute (resolved against ``root``), and as given (normalized)."""
    norm = normalize_path(value)
    if root is None:
        return [norm]
    absolute = norm if norm.startswith("/") else normalize_path(f"{root.as_posix()}/{norm}")
    forms = [absolute, norm]
    try:
        forms.insert(0, Path(absolute).relative_to(root).as_posix())
    except ValueError:
        pass
    return list(dict.fromkeys(forms))


def path_glob_matches(glob: str, value: str, root: Path | None = None, *, inside_only: bool = False) -> bool:
    """Whether a path argument matches a glob (see ``glob_to_regex``).

    With ``inside_only`` (used for allow rules) a relative glob only sees the path
    relative to the workspace, so ``**`` never covers ``/etc/passwd`` or ``../x``."""
    norm_glob = normalize_path(glob)
    rx = glob_to_regex(norm_glob)
    forms = path_forms(value, root)
    if inside_only and not norm_glob.startswith("/"):
        forms = [f for f in forms if not f.startswith("/") and f != ".." and not f.startswith("../")]
    return any(rx.fullmatch(form) for form in forms)


def wildcard_matches(pattern: str, value: str) -> bool:
    """``*`` matches any text (slashes included); everything else is literal."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), value, re.DOTALL) is not None


# ---------------------------------------------------------------- shell commands

_OPERATOR_CHARS = set(";&|\n()")


@dataclass
class _Frame:
    """One nesting level while splitting: the top level, ``$(...)`` or backticks."""

    kind: Literal["top", "sub", "bt"]
    resume_in_quotes: bool = False
    """Whether the enclosing text was inside double quotes when this level opened."""
    parens: int = 0
    buffer: list[str] = field(default_factory=list)


def split_shell_command(command: str) -> list[str]:
    """Split a shell command into the simple commands it would run.

    Splits on ``;`` ``&&`` ``||`` ``|`` ``&`` newlines and parentheses outside quotes;
    the bodies of ``$(...)`` and backticks (also inside double quotes) become segments
    of their own and are cut out of the command around them. Single quotes are literal.
    ``2>&1`` and ``&>`` are redirections, not separators. Parsing errs towards more
    segments, never fewer: every piece the shell could run shows up somewhere.
    """
    segments: list[str] = []
    stack = [_Frame("top")]

    def cut() -> None:
        text = "".join(stack[-1].buffer).strip()
        if text:
            segments.append(text)
        stack[-1].buffer.clear()

    def close() -> bool:
        cut()
        return stack.pop().resume_in_quotes

    in_quotes = False
    i, n = 0, len(command)
    while i < n:
        c, frame = command[i], stack[-1]
        buf = frame.buffer
        step = 1
        if c == "\\" and i + 1 < n:
            buf.append(" " if command[i + 1] == "\n" else command[i : i + 2])
            step = 2
        elif command.startswith("$(", i) and not command.startswith("$((", i):
            stack.append(_Frame("sub", in_quotes))
            in_quotes, step = False, 2
        elif c == "`":
            if frame.kind == "bt":
                in_quotes = close()
            else:
                stack.append(_Frame("bt", in_quotes))
                in_quotes = False
        elif in_quotes:
            buf.append(c)
            in_quotes = c != '"'
        elif c == "'":
            j = command.find("'", i + 1)
            j = n - 1 if j == -1 else j
            buf.append(command[i : j + 1])
            step = j + 1 - i
        elif c == '"':
            in_quotes = True
            buf.append(c)
        elif c == "&" and (buf and buf[-1] in "<>" or command.startswith("&>", i)):
            buf.append(c)  # a redirection (2>&1, &>file), not a separator
        elif c in _OPERATOR_CHARS:
            if frame.kind == "sub" and c == ")" and frame.parens == 0:
                in_quotes = close()
            else:
                if frame.kind == "sub" and c in "()":
                    frame.parens += 1 if c == "(" else -1
                cut()
        else:
            buf.append(c)
        i += step
    while stack:
        close()
    return segments


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=.*", re.DOTALL)
_RESERVED = frozenset({"!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time"})
_WRAPPERS = frozenset({"sudo", "doas", "env", "nohup", "command", "builtin", "exec", "nice", "xargs", "stdbuf", "ionice", "timeout"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, comments=False, posix=True)
    except ValueError:
        return segment.split()


def command_words(segment: str) -> list[str]:
    """The words of one simple command as the shell would run it: quotes removed,
    leading reserved words, ``NAME=value`` assignments and wrappers such as ``sudo`` or
    ``env`` (with their options) dropped, and the program reduced to its basename."""
    words = _words(segment)
    while words:
        head = words[0]
        if head in _RESERVED or _ASSIGNMENT.fullmatch(head):
            words = words[1:]
        elif posixpath.basename(head) in _WRAPPERS:
            words = words[1:]
            while words and (words[0].startswith("-") or _ASSIGNMENT.fullmatch(words[0]) or re.fullmatch(r"[\d.]+[smhd]?", words[0])):
                words = words[1:]
        else:
            break
    if words:
        words[0] = posixpath.basename(words[0].lstrip("\\")) or words[0]
    return words


def expanded_commands(command: str, _depth: int = 0) -> list[str]:
    """Every simple command in ``command`` in normalized form (see ``command_words``),
    looking inside ``bash -c '...'`` and ``eval ...`` as well."""
    found: list[str] = []
    for segment in split_shell_command(command):
        words = command_words(segment)
        if not words:
            continue
        found.append(" ".join(words))
        if _depth < 4 and words[0] in _SHELLS:
            for k, w in enumerate(words[1:], 1):
                if w.startswith("-") and "c" in w.lstrip("-") and not w.startswith("--") and k + 1 < len(words):
                    found += expanded_commands(words[k + 1], _depth + 1)
                    break
        elif _depth < 4 and words[0] == "eval":
            found += expanded_commands(" ".join(words[1:]), _depth + 1)
    return found


def collapse_whitespace(text: str) -> str:
    """Runs of whitespace become one space; the ends are trimmed."""
    return " ".join(text.split())


def command_pattern_matches(pattern: str, segment: str) -> bool:
    """Match one command segment against a pattern: a trailing ``*`` means prefix
    (``ls *`` also matches a bare ``ls``), a ``*`` elsewhere matches any text, and
    otherwise the whole segment must be equal. Whitespace runs count as one space."""
    pattern, segment = collapse_whitespace(pattern), collapse_whitespace(segment)
    if pattern.endswith(" *") and segment == pattern[:-2]:
        return True
    return wildcard_matches(pattern, segment)


_REDIRECT_OUT = re.compile(r"(?<![<>&\d])\d*>>?\|?\s*(?!&\d|&-|/dev/null\b)(\S+)|&>>?\s*(?!/dev/null\b)\S+")


def writes_by_redirect(segment: str) -> bool:
    """Whether a segment sends output to a file (``> f``, ``>> f``, ``&> f``), which
    an allow rule on the command does not cover. ``2>&1`` and ``>/dev/null`` are fine."""
    unquoted = re.sub(r"'[^']*'|\"(?:\\.|[^\"\\])*\"", "''", segment)
    return _REDIRECT_OUT.search(unquoted) is not None


# ---------------------------------------------------------------- the rule set


class RuleSet:
    """An ordered collection of rules answering "what does the configuration say about
    this call?". ``root`` (the workspace) lets absolute paths match relative globs."""

    def __init__(self, rules: Iterable[Rule] = (), root: Path | None = None) -> None:
        self.rules: list[Rule] = list(rules)
        self.root = root

    def add(self, rule: Rule) -> None:
        """Add a rule (e.g. "allow for this session")."""
        self.rules.append(rule)

    def decide(self, tool_name: str, args: Mapping[str, Any], key_arg: str) -> tuple[Action, Rule] | None:
        """The strongest matching rule (deny > ask > allow) and its action, or None."""
        candidates = [r for r in self.rules if fnmatch.fnmatchcase(tool_name, r.tool)]
        if not candidates:
            return None
        value = args.get(key_arg) if key_arg else None
        if key_arg == "command" and isinstance(value, str):
            hits = self._shell_hits(candidates, value)
        else:
            hits = [r for r in candidates if r.pattern is None or self._value_matches(r, key_arg, value)]
        if not hits:
            return None
        best = max(hits, key=lambda r: _STRENGTH[r.action])
        return best.action, best

    def _value_matches(self, rule: Rule, key_arg: str, value: Any) -> bool:
        pattern = rule.pattern or ""
        values = value if isinstance(value, (list, tuple)) else [value]
        strings = [v for v in values if isinstance(v, str)]
        if not strings or len(strings) != len(values):
            return False
        if key_arg in _PATH_ARGS or key_arg.endswith("path"):
            inside = rule.action == "allow"
            return all(path_glob_matches(pattern, v, self.root, inside_only=inside) for v in strings)
        return all(wildcard_matches(pattern, v) for v in strings)

    def _shell_hits(self, candidates: list[Rule], command: str) -> list[Rule]:
        segments = split_shell_command(command)
        normalized = expanded_commands(command)
        hits: list[Rule] = []
        for rule in candidates:
            if rule.pattern is None:
                hits.append(rule)
            elif rule.action != "allow" and any(
                command_pattern_matches(rule.pattern, s) for s in segments + normalized
            ):
                hits.append(rule)
        allows = [r for r in candidates if r.action == "allow" and r.pattern is not None]
        if allows and segments:
            covering: list[Rule] = []
            for segment in segments:
                rule = next((r for r in allows if command_pattern_matches(r.pattern or "", segment)), None)
                if rule is None or writes_by_redirect(segment):
                    break
                covering.append(rule)
            else:
                hits.append(covering[0])
        return hits

    @staticmethod
    def describe(rule: Rule) -> str:
        """One line for the user: ``allow shell(git status*) from project config``."""
        target = rule.tool if rule.pattern is None else f"{rule.tool}({rule.pattern})"
        return f"{rule.action} {target}" + (f" from {rule.source}" if rule.source else "")

"""Permission rules (allow / ask / deny) and the matching they need.

A rule names a tool and, optionally, a pattern on the tool's key argument:

* file tools: a glob with ``**`` matched against the workspace-relative path;
* the shell: a command pattern matched against the parsed command (``shell_rules``): an
  allow covers a command line only when every simple command in it is allowed and nothing
  in it writes or runs code on the side; a deny or an ask hits when any simple command
  matches, as written or as it really runs;
* anything else (``url`` …): a wildcard pattern where ``*`` matches any text.

A deny or ask rule on a file tool's path also hits a shell command that names a matching
path, as an operand or inside an option's value (``program_options.option_paths``).

A path is matched both as written (normalized) and as resolved (symlinks and ``..``
followed the way the workspace jail follows them): a deny or an ask on either form hits,
an allow needs both. Among matching rules deny beats ask beats allow.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from ketch.gate.invocations import invocations
from ketch.gate.program_options import option_paths
from ketch.gate.shell_parse import Word, parse_command
from ketch.gate.shell_rules import allow_blocker, command_hits, covering_allows, effect_note, unquoted, wildcard_matches
from ketch.sandbox.run_later import is_run_later

Action = Literal["allow", "deny", "ask"]
ACTIONS: tuple[Action, ...] = ("allow", "deny", "ask")
_STRENGTH = {"allow": 0, "ask": 1, "deny": 2}

FILE_TOOLS = ("read_file", "write_file", "edit_file", "list_dir", "git_diff", "git_log", "git_blame")
"""Tools whose key argument is a path: their deny and ask rules hold for shell commands too."""
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
    """The forms a path is matched in *as written*: relative to ``root`` when it lies
    under it, absolute (joined to ``root``), and as given, all normalized lexically."""
    norm = normalize_path(value)
    if root is None:
        return [norm]
    absolute = norm if norm.startswith("/") else normalize_path(f"{root.as_posix()}/{norm}")
    return _with_relative([absolute, norm], absolute, root)


def _with_relative(forms: list[str], absolute: str, root: Path) -> list[str]:
    try:
        forms.insert(0, Path(absolute).relative_to(root).as_posix())
    except ValueError:
        pass
    return list(dict.fromkeys(forms))


def resolved_forms(value: str, root: Path | None) -> list[str] | None:
    """The forms of the path a tool would really open: symlinks and ``..`` followed the
    way the workspace jail follows them. None when it cannot be resolved (a loop)."""
    if root is None:
        return None
    from ketch.tools.workspace import InvalidPath, _resolve_like_kernel  # the jail's own resolution

    expanded = os.path.expanduser(value) if value.startswith("~") else value
    absolute = expanded if expanded.startswith("/") else f"{root.as_posix()}/{expanded}"
    try:
        resolved = _resolve_like_kernel(absolute, value)
    except (InvalidPath, ValueError, OSError):  # a loop, '..' after a missing part, a NUL
        return None
    return _with_relative([resolved], resolved, Path(os.path.realpath(root)))


def _glob_hits(glob: str, forms: list[str], *, inside_only: bool) -> bool:
    norm_glob = normalize_path(glob)
    if inside_only and not norm_glob.startswith("/"):
        forms = [f for f in forms if not f.startswith("/") and f != ".." and not f.startswith("../")]
    rx = glob_to_regex(norm_glob)
    return any(rx.fullmatch(form) for form in forms)


def path_glob_matches(glob: str, value: str, root: Path | None = None, *, inside_only: bool = False) -> bool:
    """Whether a path *as written* matches a glob (see ``glob_to_regex``).

    With ``inside_only`` (used for allow rules) a relative glob only sees the path
    relative to the workspace, so ``**`` never covers ``/etc/passwd`` or ``../x``."""
    return _glob_hits(glob, path_forms(value, root), inside_only=inside_only)


def path_rule_matches(glob: str, value: str, root: Path | None, *, allow: bool) -> bool:
    """A path rule against a path argument. An allow needs the written *and* the
    resolved path to match (inside the workspace); a deny, an ask or a guard hits on
    either form (the raw text as written counts too)."""
    written = path_forms(value, root)
    resolved = resolved_forms(value, root)
    if allow:
        if root is not None and resolved is None:
            return False
        return _glob_hits(glob, written, inside_only=True) and (resolved is None or _glob_hits(glob, resolved, inside_only=True))
    raw = [value.replace("\\", "/")]
    return _glob_hits(glob, written + raw + (resolved or []), inside_only=False)


def run_later_path(value: str, root: Path | None) -> str:
    """The form of a path (written or resolved) that makes the repository run code
    later (see ``sandbox.run_later``), or an empty string."""
    forms = path_forms(value, root) + (resolved_forms(value, root) or [])
    for form in forms:
        if not form.startswith("/"):
            if is_run_later(form):
                return form
            continue
        parts = [p for p in form.split("/") if p]
        for k in range(len(parts)):  # an absolute path: any place in it counts
            if is_run_later("/".join(parts[k:])):
                return form
    return ""


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
        value = args.get(key_arg) if key_arg else None
        if not candidates and not (key_arg == "command" and isinstance(value, str)):
            return None
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
            allow = rule.action == "allow"
            test = all if allow else any
            return test(path_rule_matches(pattern, v, self.root, allow=allow) for v in strings)
        return all(wildcard_matches(pattern, v) for v in strings)

    def _shell_hits(self, candidates: list[Rule], command: str) -> list[Rule]:
        hits = [r for r in candidates if r.pattern is None]
        hits += self._path_hits(command)
        hits += [r for r in candidates if r.pattern is not None and r.action != "allow" and command_hits(r.pattern, command, prefix=False)[0]]
        allows = [r for r in candidates if r.action == "allow" and r.pattern is not None]
        parsed = parse_command(command)
        if allows and not allow_blocker(parsed, self.root):
            chosen = covering_allows([r.pattern or "" for r in allows], parsed)
            if chosen is not None:
                hits.append(allows[chosen[0]])
        return hits

    def _path_hits(self, command: str) -> list[Rule]:
        """Deny and ask rules on file tools' paths, against the paths a shell command
        names (operands and option values: ``--file=F``, ``-fF``, ``@F``): a rule that
        keeps ``read_file`` off ``.env`` keeps ``cat .env`` and ``curl -d @.env`` off it.
        An unparsed command is matched on every word of its text."""
        rules = [r for r in self.rules if r.pattern is not None and r.action != "allow" and any(fnmatch.fnmatchcase(t, r.tool) for t in FILE_TOOLS)]
        if not rules:
            return []
        parsed = parse_command(command)
        if parsed.error:
            paths = [p for w in unquoted(command).split() for p in option_paths([Word("x"), Word(w)])]
        else:
            forms = [c.words for c in parsed.commands if c.words] + [inv.words for inv in invocations(parsed)]
            paths = list(dict.fromkeys(p for words in forms for p in option_paths(words)))
        return [r for r in rules if any(path_rule_matches(r.pattern or "", p, self.root, allow=False) for p in paths)]

    def shell_note(self, command: str) -> str:
        """Why an allow rule for the shell did not cover ``command`` (empty when there
        is no such rule or nothing stood in its way): the gate shows it with the prompt
        and, headless, in the denial the model reads."""
        if not any(r.action == "allow" and r.pattern is not None and fnmatch.fnmatchcase("shell", r.tool) for r in self.rules):
            parsed = parse_command(command)
            return allow_blocker(parsed, self.root) if parsed.error else ""
        parsed = parse_command(command)
        blocker = allow_blocker(parsed, self.root)
        if blocker:
            return blocker
        allows = [r.pattern or "" for r in self.rules if r.action == "allow" and r.pattern is not None and fnmatch.fnmatchcase("shell", r.tool)]
        return effect_note(allows, parsed)

    @staticmethod
    def describe(rule: Rule) -> str:
        """One line for the user: ``allow shell(git status*) from project config``."""
        target = rule.tool if rule.pattern is None else f"{rule.tool}({rule.pattern})"
        return f"{rule.action} {target}" + (f" from {rule.source}" if rule.source else "")

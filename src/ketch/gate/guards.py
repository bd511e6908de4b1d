"""Guards: the refusal rules of plugins and the configuration, judging one tool call.

The first step of the gate (``approval``); nothing bypasses it, not even ``--yolo``. A rule is
validated where it is written (``extensions/plugins.py`` for manifests and the config's
``guards``); here it only judges: a ``tool`` rule refuses every call of a tool, an ``arg`` rule
a glob or regex on an argument (a path as written and as resolved, symlinks followed; either
refuses), a ``command_prefix`` rule a prefix in every simple command of the parsed command
line as it really runs (``shell_rules.command_hits``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ketch.gate.rules import path_forms, path_rule_matches, resolved_forms
from ketch.gate.shell_rules import command_hits


@dataclass(frozen=True)
class GuardRule:
    """One validated refusal rule."""

    kind: str
    reason: str
    tool: str = "*"
    arg: str = ""
    glob: str = ""
    regex: re.Pattern[str] | None = None
    prefix: str = ""

    def to_dict(self) -> dict[str, str]:
        """The manifest form of the rule (for writing and display)."""
        out = {"kind": self.kind}
        if self.kind != "command_prefix" or self.tool != "shell":
            out["tool"] = self.tool
        if self.arg:
            out["arg"] = self.arg
        if self.glob:
            out["glob"] = self.glob
        if self.regex is not None:
            out["regex"] = self.regex.pattern
        if self.prefix:
            out["prefix"] = self.prefix
        out["reason"] = self.reason
        return out

    def describe(self) -> str:
        """A readable line: what the rule refuses and why."""
        if self.kind == "tool":
            what = f"refuse every call to {self.tool}"
        elif self.kind == "arg":
            test = f"matches glob {self.glob}" if self.glob else f"matches regex {self.regex.pattern if self.regex else ''}"
            what = f"refuse {self.tool} when {self.arg} {test}"
        else:
            what = f"refuse {self.tool} commands starting with {self.prefix!r}"
        return f"{what} — {self.reason}"


@dataclass(frozen=True)
class Refusal:
    """Why a call is refused and which plugin rule said so."""

    reason: str
    source: str


def _arg_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def _prefix_hit(prefix: str, command: str) -> tuple[bool, str]:
    """Whether ``command`` runs (or could run) something starting with ``prefix``, and
    why when it is only a possibility."""
    return command_hits(prefix, command, prefix=True)


_PATH_ARG = frozenset({"path", "file_path", "paths", "dir", "directory", "cwd", "notebook_path"})


@dataclass
class Guard:
    """The compiled refusal rules of every plugin plus the configuration's own."""

    rules: list[tuple[GuardRule, str]] = field(default_factory=list)
    root: Path | None = None

    def check(self, tool_name: str, args: Mapping[str, Any]) -> Refusal | None:
        """The first rule refusing this call, or None when the call may proceed."""
        for rule, source in self.rules:
            if not fnmatch.fnmatchcase(tool_name, rule.tool):
                continue
            if rule.kind == "tool":
                return Refusal(rule.reason, source)
            if rule.kind == "command_prefix":
                for command in _arg_strings(args.get("command")):
                    hit, why = _prefix_hit(rule.prefix, command)
                    if hit:
                        return Refusal(f"{rule.reason} ({why})" if why else rule.reason, source)
                continue
            for value in _arg_strings(args.get(rule.arg)):
                if rule.glob and self._glob_refuses(rule, value):
                    return Refusal(rule.reason, source)
                if rule.regex is not None and any(rule.regex.search(form) for form in self._forms(rule, value)):
                    return Refusal(rule.reason, source)
        return None

    def _forms(self, rule: GuardRule, value: str) -> list[str]:
        """A path argument as written and as resolved (symlinks followed); other
        arguments as they are."""
        if rule.arg in _PATH_ARG or rule.arg.endswith("path"):
            return [value, *path_forms(value, self.root), *(resolved_forms(value, self.root) or [])]
        return [value]

    def _glob_refuses(self, rule: GuardRule, value: str) -> bool:
        if rule.arg in _PATH_ARG or rule.arg.endswith("path"):
            return path_rule_matches(rule.glob, value, self.root, allow=False)
        return path_rule_matches(rule.glob, value, None, allow=False)

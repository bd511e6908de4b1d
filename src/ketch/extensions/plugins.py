"""Plugins: JSON manifests of refusal rules, validated and compiled into one guard (the guard
that judges a call is the gate's, ``gate/guards.py``).

A plugin is data, never code. Its manifest lists rules; the guard that evaluates them is
the same compiled code for every plugin, so installing a plugin (from disk or from the
registry) cannot make anything execute. A refusal is final: the approval gate consults
the guard before ``--yolo``, permission rules or the user.

Manifest shape::

    {"name": "no-secrets", "version": "1.0", "description": "...",
     "rules": [{"kind": "tool", "tool": "shell", "reason": "..."},
               {"kind": "arg", "tool": "write_file", "arg": "path", "glob": "**/.env*", "reason": "..."},
               {"kind": "arg", "tool": "*", "arg": "url", "regex": "...", "reason": "..."},
               {"kind": "command_prefix", "prefix": "rm -rf", "reason": "..."}]}

``tool`` accepts ``*`` wildcards. ``command_prefix`` rules look at the ``command``
argument of the ``shell`` tool (or of ``tool`` when given) and catch the prefix in every
simple command of the parsed command line, as written and as it really runs: after
wrappers such as ``sudo``/``env``/``timeout``, inside ``sh -c`` and ``eval`` bodies, with
git's global options removed (``shell_rules.command_hits``). A command whose program is
only known at run time is refused by every prefix it could match. ``arg`` globs on a path
argument match the path as written and as resolved (symlinks followed); either refuses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ketch.gate.guards import Guard, GuardRule
from ketch.gate.shell_rules import collapse_whitespace

SAFE_NAME = re.compile(r"[a-z0-9][a-z0-9\-_]{0,63}")
"""Names of plugins, skills and registry entries: no slashes, dots or upper case."""

MAX_MANIFEST_BYTES = 256 * 1024
MAX_RULES = 500
MAX_TEXT = 2000
MAX_REGEX = 1000
RULE_KINDS = ("tool", "arg", "command_prefix")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

_RULE_KEYS: dict[str, tuple[set[str], set[str]]] = {
    # kind: (required keys, optional keys) besides "kind" and "reason"
    "tool": ({"tool"}, set()),
    "arg": ({"tool", "arg"}, {"glob", "regex"}),
    "command_prefix": ({"prefix"}, {"tool"}),
}
_MANIFEST_KEYS = {"name", "version", "description", "rules"}


class ManifestError(ValueError):
    """A plugin manifest (or a config refusal rule) is invalid; the message says where."""


def check_text(value: Any, what: str, limit: int = MAX_TEXT, *, required: bool = True) -> str:
    """A string without control characters (they could rewrite the terminal when the
    text is shown) and at most ``limit`` characters."""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ManifestError(f"{what} must be a non-empty string")
    if len(value) > limit:
        raise ManifestError(f"{what} is longer than {limit} characters")
    if _CONTROL.search(value):
        raise ManifestError(f"{what} contains control characters")
    return value


def check_name(value: Any, what: str) -> str:
    """A safe name (see ``SAFE_NAME``)."""
    if not isinstance(value, str) or not SAFE_NAME.fullmatch(value):
        raise ManifestError(
            f"{what} {value!r} is not allowed: use 1-64 lowercase letters, digits, '-' or '_', "
            "starting with a letter or digit (no '/', '\\', '..' or leading dot)"
        )
    return value


def validate_rule(data: Any, where: str) -> GuardRule:
    """Validate one rule mapping (manifest or config) and compile it."""
    if not isinstance(data, Mapping):
        raise ManifestError(f"{where} must be an object")
    kind = data.get("kind")
    if kind not in _RULE_KEYS:
        raise ManifestError(f"{where} has unknown kind {kind!r}: expected one of {', '.join(RULE_KINDS)}")
    required, optional = _RULE_KEYS[kind]
    unknown = set(data) - required - optional - {"kind", "reason"}
    if unknown:
        raise ManifestError(f"{where} ({kind}) has unknown field(s): {', '.join(sorted(map(str, unknown)))}")
    missing = (required | {"reason"}) - set(data)
    if missing:
        raise ManifestError(f"{where} ({kind}) is missing: {', '.join(sorted(missing))}")
    reason = check_text(data["reason"], f"{where} reason")
    tool = check_text(data.get("tool", "shell" if kind == "command_prefix" else "*"), f"{where} tool", 200)
    if kind == "tool":
        return GuardRule(kind, reason, tool)
    if kind == "command_prefix":
        prefix = collapse_whitespace(check_text(data["prefix"], f"{where} prefix", 500))
        return GuardRule(kind, reason, tool, prefix=prefix)
    arg = check_text(data["arg"], f"{where} arg", 200)
    if ("glob" in data) == ("regex" in data):
        raise ManifestError(f"{where} (arg) needs exactly one of 'glob' or 'regex'")
    if "glob" in data:
        return GuardRule(kind, reason, tool, arg=arg, glob=check_text(data["glob"], f"{where} glob", 500))
    pattern = check_text(data["regex"], f"{where} regex", MAX_REGEX)
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ManifestError(f"{where} regex {pattern!r} does not compile: {exc}") from exc
    return GuardRule(kind, reason, tool, arg=arg, regex=compiled)


@dataclass(frozen=True)
class Manifest:
    """A validated plugin manifest."""

    name: str
    rules: tuple[GuardRule, ...]
    version: str = ""
    description: str = ""
    path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON form (what gets written on install)."""
        out: dict[str, Any] = {"name": self.name}
        if self.version:
            out["version"] = self.version
        if self.description:
            out["description"] = self.description
        out["rules"] = [r.to_dict() for r in self.rules]
        return out

    def render(self) -> str:
        """Every rule as a readable line, for review before install."""
        head = f"plugin {self.name}" + (f" {self.version}" if self.version else "")
        lines = [head] + ([self.description] if self.description else [])
        lines += [f"  {i}. {r.describe()}" for i, r in enumerate(self.rules, 1)]
        return "\n".join(lines)


def validate_manifest(data: Any, origin: str = "manifest") -> Manifest:
    """Validate a parsed manifest strictly; raise ``ManifestError`` naming ``origin``."""
    if not isinstance(data, Mapping):
        raise ManifestError(f"{origin}: a plugin manifest must be a JSON object")
    unknown = set(data) - _MANIFEST_KEYS
    if unknown:
        raise ManifestError(f"{origin}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    name = check_name(data.get("name"), f"{origin}: plugin name")
    version = check_text(data.get("version", ""), f"{origin}: version", 64, required=False)
    description = check_text(data.get("description", ""), f"{origin}: description", required=False)
    rules = data.get("rules")
    if not isinstance(rules, list) or not rules:
        raise ManifestError(f"{origin}: 'rules' must be a non-empty list")
    if len(rules) > MAX_RULES:
        raise ManifestError(f"{origin}: more than {MAX_RULES} rules")
    compiled = tuple(validate_rule(r, f"{origin}: rule {i}") for i, r in enumerate(rules, 1))
    return Manifest(name, compiled, version, description)


def load_manifest(path: Path) -> Manifest:
    """Read and validate one manifest file."""
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise ManifestError(f"{path}: larger than {MAX_MANIFEST_BYTES // 1024} KB")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read plugin manifest: {exc}") from exc
    manifest = validate_manifest(data, str(path))
    return Manifest(manifest.name, manifest.rules, manifest.version, manifest.description, path)


def plugin_dirs(config_dir: Path | None, project_dir: Path | None) -> list[Path]:
    """Where installed manifests live: ``<config>/plugins`` and ``<project>/.ketch/plugins``."""
    dirs = []
    if config_dir is not None:
        dirs.append(config_dir / "plugins")
    if project_dir is not None:
        dirs.append(project_dir / ".ketch" / "plugins")
    return dirs


def load_installed(
    config_dir: Path | None, project_dir: Path | None, warn: Callable[[str], None] = lambda _m: None
) -> list[Manifest]:
    """Load every installed manifest; a bad file is skipped and reported via ``warn``."""
    manifests: list[Manifest] = []
    for directory in plugin_dirs(config_dir, project_dir):
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.json")):
            try:
                manifests.append(load_manifest(path))
            except ManifestError as exc:
                warn(f"skipped plugin {path}: {exc}")
    return manifests


def config_rules(items: Sequence[Any], origin: str = "config") -> list[GuardRule]:
    """Validate refusal rules written directly in the configuration."""
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise ManifestError(f"{origin}: refusal rules must be a list")
    return [validate_rule(r, f"{origin}: refusal rule {i}") for i, r in enumerate(items, 1)]


def compile_guard(
    manifests: Iterable[Manifest], extra_rules: Iterable[GuardRule] = (), root: Path | None = None
) -> Guard:
    """One guard over all manifests' rules and ``extra_rules`` (from the configuration).
    The source of each refusal reads ``plugin-name rule N (kind)`` or ``config rule N``."""
    compiled: list[tuple[GuardRule, str]] = []
    for manifest in manifests:
        compiled += [(r, f"{manifest.name} rule {i} ({r.kind})") for i, r in enumerate(manifest.rules, 1)]
    compiled += [(r, f"config rule {i} ({r.kind})") for i, r in enumerate(extra_rules, 1)]
    return Guard(compiled, root)

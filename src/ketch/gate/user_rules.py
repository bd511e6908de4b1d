"""Rules the user teaches from the approval prompt, and what the prompt says about the sandbox.

``add_session_rule`` turns the pattern the user accepted (or edited) into a ``shell(...)`` allow
rule of the session's rule set, after checking that it is a valid rule and that it covers the
command being approved (a rule that would not even allow this call is a typo, refused).
``save_user_rule`` adds it to ``[permissions] allow`` of the user's own config file: the file is
read, changed as text, parsed again and checked to hold the rule before it replaces the old one
(written to a temporary file and renamed); a layout it cannot change safely is an error the
user sees, never a file half-written.
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from ketch.config.dirs import user_config_dir


def sandbox_note(sandbox: Any) -> str:
    """One line for the approval prompt: what the sandbox would let this command do."""
    if sandbox is None:
        return ""
    if getattr(sandbox, "fail_closed", False):
        return "no sandbox works here: it would run unconfined, able to change anything you can"
    if not getattr(sandbox, "confines", False):
        return "full access (no sandbox): it may change anything you can, and use the network"
    policy = sandbox.current_policy()
    roots = [str(r) for r in policy.roots_for_writes()]
    writes = ("writes only to " + ", ".join(roots) + " and the session's /tmp") if roots else "writes nothing but the session's /tmp"
    net = "network on" if policy.network else "no network"
    return f"sandboxed ({sandbox.mechanism.name}): {writes}; .git and other run-later files read-only; {net}"


def add_session_rule(gate: Any, pattern: str, args: dict[str, Any]) -> Any:
    """Add ``shell(pattern) = allow`` to the gate's rules for this session; the rule."""
    from ketch.gate.rules import Rule, RuleSet

    pattern = " ".join(pattern.split())
    if not pattern or pattern in ("*", "* *"):
        raise ValueError("an empty pattern, or one that allows every command, is not a rule ketch adds from a prompt")
    rule = Rule.parse(f"shell({pattern})", "allow", "this session")
    probe = RuleSet([rule], root=getattr(gate, "root", None))
    if probe.decide("shell", args, "command") is None:
        raise ValueError(f"shell({pattern}) does not cover the command being approved")
    if gate.rules is None:
        gate.rules = RuleSet([], root=getattr(gate, "root", None))
    gate.rules.add(rule)
    return rule


def save_user_rule(rule: Any, config_file: Path | None = None) -> str:
    """Append the rule to ``[permissions] allow`` of the user's config; where it went."""
    path = config_file or (user_config_dir() / "config.toml")
    spec = f"shell({rule.pattern})"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    table = tomllib.loads(text).get("permissions") if text else None
    line = "allow = [" + _toml_string(spec) + "]\n"
    if table is None:
        new = text + ("" if not text or text.endswith("\n") else "\n") + "\n[permissions]\n" + line
    elif not isinstance(table, dict) or "allow" in table:
        existing = table.get("allow") if isinstance(table, dict) else None
        if isinstance(existing, list) and spec in existing:
            return str(path)
        raise ValueError(f"{path} already has a [permissions] allow list; add {spec!r} to it yourself")
    else:
        lines = text.splitlines(keepends=True)
        at = next((i for i, ln in enumerate(lines) if ln.strip() == "[permissions]"), None)
        if at is None:
            raise ValueError(f"{path} defines [permissions] in a form ketch does not edit; add {spec!r} under allow yourself")
        new = "".join(lines[: at + 1]) + line + "".join(lines[at + 1:])
    parsed = tomllib.loads(new).get("permissions", {})
    if spec not in parsed.get("allow", []):
        raise ValueError(f"could not add {spec!r} to {path} safely")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".config.", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(new)
        if path.exists():
            os.chmod(temp, path.stat().st_mode & 0o777)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return str(path)


def _toml_string(value: str) -> str:
    """A TOML basic string."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    escaped = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in escaped)
    return f'"{escaped}"'

"""A repository's ``.ketch/config.toml`` split into what narrows and what widens.

What narrows (deny and ask rules, guards, disabled tools, a smaller step limit, settings that
change nothing about what runs or where data goes) always applies. What widens (allow rules,
hooks, MCP servers, agents, added directories, connection changes, a larger step limit,
turning web search on, another registry) applies only in a folder the user trusts
(``config/trust.py``). The widening part has a digest: the trust answer is stored with it, and a
changed digest is asked about again.

Nothing here merges a repository value *over* a user value where that could weaken it: rules
and guards are appended (deny beats ask beats allow among matching rules), disabled tools are
united, enabled tools intersected. Keys only the user may set (``tools.keep_env``) are
dropped from a repository's file whatever the trust.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ketch.protocol import strict_json

USER_ONLY_KEYS: tuple[tuple[str, str], ...] = (("tools", "keep_env"),)
"""Keys a repository's config can never set (the user's own decisions)."""
USER_ONLY_TABLES = frozenset({"telemetry"})
"""Top-level tables read from the user's own file only (``core.telemetry``): dropped here too."""
NEUTRAL_KEYS = frozenset({"model", "think", "agent", "titles", "models", "compaction", "sandbox", "approval"})
"""Top-level keys that change nothing about what runs or where data goes (``sandbox`` and
``approval`` arrive here already cut to what narrows, by ``sandbox.limit_project_layer``). A
key that is neither here nor handled below counts as widening until someone decides otherwise."""

_RULE_ACTIONS = ("allow", "ask", "deny")
_CONNECTION_ROUTE_FIELDS = ("preset", "base_url", "wire", "api_key_env")
"""What decides where a connection's requests (and its key) go."""
DEFAULT_MAX_STEPS = 100


@dataclass(frozen=True)
class Addition:
    """One thing the repository's config would add, as the trust prompt shows it."""

    key: str
    """The config key, dotted (``permissions``, ``hooks.before_tool``, ``mcp.servers.x``)."""
    text: str
    """What it does, in one line (the rule, the hook's command, the server's command line)."""
    marked: bool = False
    """A change to where one of the user's keys is sent: shown with a warning mark."""


@dataclass(frozen=True)
class ProjectSplit:
    """The project config in its two parts, with what the widening part would add."""

    path: Path
    narrowing: dict[str, Any] = field(default_factory=dict)
    widening: dict[str, Any] = field(default_factory=dict)
    additions: tuple[Addition, ...] = ()
    dropped: tuple[str, ...] = ()
    """User-only keys the repository tried to set (always ignored)."""

    @property
    def widens(self) -> bool:
        return bool(self.widening)

    @property
    def digest(self) -> str:
        return widening_digest(self.widening)


def widening_digest(widening: Mapping[str, Any]) -> str:
    """A stable digest of the widening part (canonical JSON, SHA-256)."""
    text = strict_json.dumps(widening, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def split_project(
    project: Mapping[str, Any], user: Mapping[str, Any], path: Path, *, has_user_key: Any = lambda name, env: bool(env)
) -> ProjectSplit:
    """Split a validated project config (``project``) against the user's own (``user``).

    ``has_user_key(connection_name, key_env)`` says whether a connection would use one of the
    user's keys (a key variable, or a stored key for that name)."""
    narrow: dict[str, Any] = {}
    wide: dict[str, Any] = {}
    adds: list[Addition] = []
    dropped: list[str] = []
    for key, value in project.items():
        if key in USER_ONLY_TABLES:
            dropped.append(key)
            continue
        handler = _HANDLERS.get(key, _neutral if key in NEUTRAL_KEYS else _widening(f"setting {key}"))
        handler(key, value, user, narrow, wide, adds, has_user_key)
    for section, name in USER_ONLY_KEYS:
        sect = narrow.get(section)
        if isinstance(sect, dict) and name in sect:
            del sect[name]
            dropped.append(f"{section}.{name}")
            if not sect:
                del narrow[section]
    _follow_references(project, narrow, wide, adds)
    return ProjectSplit(path, narrow, wide, tuple(adds), tuple(dropped))


# ---------------------------------------------------------------- one handler per key


def _neutral(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, _k: Any) -> None:
    narrow[key] = copy.deepcopy(value)


def _widening(label: str):
    def handle(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, _k: Any) -> None:
        wide[key] = copy.deepcopy(value)
        adds.append(Addition(key, f"{label}: {_short(value)}"))

    return handle


def _max_steps(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, _k: Any) -> None:
    limit = user.get("max_steps", DEFAULT_MAX_STEPS)
    if int(value) <= int(limit):
        narrow[key] = value
    else:
        wide[key] = value
        adds.append(Addition(key, f"step limit raised from {limit} to {value}"))


def _privacy(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, _k: Any) -> None:
    if value or not user.get("privacy", False):
        narrow[key] = value
    else:
        wide[key] = value
        adds.append(Addition(key, "privacy mode turned off"))


def _permissions(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, _k: Any) -> None:
    for action, spec in _rule_specs(value):
        part = wide if action == "allow" else narrow
        part.setdefault("permissions", {}).setdefault(action, []).append(spec)
        if action == "allow":
            adds.append(Addition("permissions", f"allow {spec}"))


class ProjectConfigError(ValueError):
    """A value in the project's config that cannot be split (the message names it)."""


def _rule_specs(table: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every rule of a permissions table as ``(action, "tool(pattern)")`` (the list form)."""
    specs: list[tuple[str, str]] = []
    for tool, value in table.items():
        if tool in _RULE_ACTIONS and isinstance(value, list):
            if not all(isinstance(s, str) for s in value):
                raise ProjectConfigError(f"permission rules under '{tool}' must be strings like \"shell(git status*)\"")
            specs += [(tool, s) for s in value]
        elif isinstance(value, str):
            specs.append((_checked_action(value, tool), tool))
        elif isinstance(value, Mapping):
            specs += [(_checked_action(action, f"{tool}({pattern})"), f"{tool}({pattern})") for pattern, action in value.items()]
        else:
            raise ProjectConfigError(f"permission rule for '{tool}' must be allow, ask or deny, or a table of patterns to those")
    return specs


def _checked_action(action: Any, where: str) -> str:
    if action not in _RULE_ACTIONS:
        raise ProjectConfigError(f"permission rule '{where}' has action {action!r}: use allow, ask or deny")
    return str(action)


def _tools(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, _k: Any) -> None:
    narrow[key] = copy.deepcopy(value)  # enabled / disabled / keep_env: merged by merge_narrowing


def _guards(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, _k: Any) -> None:
    narrow[key] = copy.deepcopy(value)


def _connections(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, has_key: Any) -> None:
    from ketch.config.presets import PRESETS

    user_conns = user.get("connections") or {}
    for name, entry in (value or {}).items():
        route = {f: entry[f] for f in _CONNECTION_ROUTE_FIELDS if f in entry}
        rest = {f: v for f, v in entry.items() if f not in _CONNECTION_ROUTE_FIELDS}
        if rest:
            if name not in user_conns and name in PRESETS and "preset" not in route:
                rest = {"preset": name, **rest}  # what a bare preset name means (resolve_connection)
            narrow.setdefault("connections", {})[name] = rest
        if not route:
            continue
        wide.setdefault("connections", {})[name] = route
        mine = user_conns.get(name) or {}
        preset = PRESETS.get(route.get("preset") or mine.get("preset") or name)
        key_env = route.get("api_key_env") or mine.get("api_key_env") or (preset.key_env if preset else "") or ""
        uses_key = bool(has_key(name, key_env))
        where = route.get("base_url") or (preset.base_url if preset else "") or "?"
        change = ", ".join(f"{f} = {route[f]!r}" for f in route)
        text = f"connection {name}: {change}"
        if uses_key:
            text += f" (sends your key {key_env or '(stored)'} to {where})"
        adds.append(Addition(f"connections.{name}", text, marked=uses_key))


def _mcp(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, _k: Any) -> None:
    wide[key] = copy.deepcopy(value)
    for name, spec in ((value or {}).get("servers") or {}).items():
        spec = spec if isinstance(spec, Mapping) else {}
        if spec.get("url"):
            headers = ", ".join(sorted(map(str, spec.get("headers") or {})))
            text = f"MCP server {name}: connects to {spec['url']}" + (f" with headers {headers}" if headers else "")
        else:
            import shlex

            argv = [str(spec.get("command", "")), *(str(a) for a in spec.get("args") or [])]
            env = ", ".join(sorted(map(str, spec.get("env") or {})))
            text = f"MCP server {name}: runs {shlex.join(argv)}" + (f" with env {env}" if env else "")
        adds.append(Addition(f"mcp.servers.{name}", text))
    if not (value or {}).get("servers"):
        adds.append(Addition("mcp", f"MCP settings: {_short(value)}"))


def _hooks(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, _k: Any) -> None:
    wide[key] = copy.deepcopy(value)
    for event, entries in (value or {}).items():
        for entry in entries if isinstance(entries, list) else [entries]:
            command = entry.get("command", "") if isinstance(entry, Mapping) else entry
            matcher = entry.get("matcher") if isinstance(entry, Mapping) else None
            on = f" (for {matcher})" if matcher else ""
            adds.append(Addition(f"hooks.{event}", f"hook {event}{on}: runs {command}"))


def _agents(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, _k: Any) -> None:
    wide[key] = copy.deepcopy(value)
    for name, spec in (value or {}).items():
        tools = spec.get("tools") if isinstance(spec, Mapping) else None
        which = f"tools {', '.join(tools)}" if tools is not None else "every tool"
        adds.append(Addition(f"agents.{name}", f"agent {name} with {which} and its own instructions"))


def _web_search(key: str, value: Any, user: Mapping[str, Any], narrow: dict, wide: dict, adds: list, _k: Any) -> None:
    for name, setting in (value or {}).items():
        if name == "enabled" and not setting:
            narrow.setdefault(key, {})[name] = setting
            continue
        wide.setdefault(key, {})[name] = setting
        marked = name == "tavily_base_url"
        extra = " (sends your Tavily key there)" if marked else ""
        adds.append(Addition(f"{key}.{name}", f"web search {name} = {setting!r}{extra}", marked=marked))


_HANDLERS = {
    "max_steps": _max_steps,
    "privacy": _privacy,
    "permissions": _permissions,
    "tools": _tools,
    "guards": _guards,
    "connections": _connections,
    "mcp": _mcp,
    "hooks": _hooks,
    "agents": _agents,
    "web_search": _web_search,
    "registry_url": _widening("registry index"),
    "added_dirs": _widening("file tools may also touch"),
}


def _follow_references(project: Mapping[str, Any], narrow: dict, wide: dict, adds: list) -> None:
    """A ``model`` naming a connection the repository routes, or an ``agent`` it defines,
    belongs with what it names: it goes where the named thing went."""
    model = narrow.get("model")
    if isinstance(model, str) and model.partition(":")[0] in (wide.get("connections") or {}):
        wide["model"] = narrow.pop("model")
        adds.append(Addition("model", f"model {model}"))
    elif isinstance(model, str) and "online" in model.partition(":")[2].split(":")[1:]:
        wide["model"] = narrow.pop("model")  # OpenRouter's :online variant turns web search on
        adds.append(Addition("model", f"model {model} (searches the web on every request)"))
    agent = narrow.get("agent")
    if isinstance(agent, str) and agent in (wide.get("agents") or {}):
        wide["agent"] = narrow.pop("agent")
        adds.append(Addition("agent", f"start in agent {agent}"))


def _short(value: Any, limit: int = 200) -> str:
    text = strict_json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------- merging


def merge_layer(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with a repository layer (narrowing or widening) added without weakening it.

    Rules and guards are appended, disabled tools united, enabled tools intersected; any
    other table merges key by key, the layer winning (the split let through only values
    that may win)."""
    out = dict(base)
    for key, value in layer.items():
        if key == "permissions":
            out[key] = _append_rules(out.get(key) or {}, value)
        elif key == "guards":
            out[key] = [*(out.get(key) or []), *copy.deepcopy(value)]
        elif key == "tools":
            out[key] = _merge_tools(out.get(key) or {}, value)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge_tables(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_tables(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Tables merged key by key at every depth, ``top`` winning (the plain layering)."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge_tables(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _append_rules(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for action, specs in layer.items():
        existing = out.get(action)
        out[action] = [*(existing if isinstance(existing, list) else []), *specs]
    return out


def _merge_tools(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    if "disabled" in layer:
        out["disabled"] = sorted({*(out.get("disabled") or []), *layer["disabled"]})
    if layer.get("enabled") is not None:
        mine = out.get("enabled")
        out["enabled"] = list(layer["enabled"]) if mine is None else [t for t in mine if t in set(layer["enabled"])]
    return out

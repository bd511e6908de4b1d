"""Logging in from an editor (``ketch acp``): the ways each configured connection gets its
key, offered as ACP authentication methods, and ``authenticate`` checking that one now works.

A connection's key comes from its environment variable (set where the editor starts ketch), or
from ``ketch auth login NAME`` (stored, read again on every check, so logging in from a
terminal while the editor waits works); a local server needs none. A session that needs a key
that is missing is refused with "authentication required", never an invalid-params error.
"""

from __future__ import annotations

from typing import Any

ENV, LOGIN, NONE = "env", "login", "none"


def _connections(config: Any, args: Any) -> dict[str, Any]:
    """Each configured connection (and the ad-hoc one of ``--base-url``): name -> key variable ("" = none)."""
    from ketch.config.settings import PRESETS, ConnectionConfig

    out: dict[str, str] = {}
    if getattr(args, "base_url", None):
        out["adhoc"] = getattr(args, "api_key_env", None) or ""
    names = list(config.connections)
    model = config.model or ""
    if ":" in model and model.split(":", 1)[0] not in names:
        names.append(model.split(":", 1)[0])
    for name in names:
        conn_cfg = config.connections.get(name) or ConnectionConfig(preset=name)
        preset = PRESETS.get(conn_cfg.preset)
        if preset is not None:
            out[name] = conn_cfg.api_key_env or preset.key_env or ""
    return out


def auth_methods(config: Any, args: Any) -> list[Any]:
    from acp.schema import AuthMethodAgent

    methods = []
    for name, key_env in _connections(config, args).items():
        if not key_env:
            methods.append(AuthMethodAgent(id=f"{NONE}:{name}", name=f"{name}: no key needed",
                                           description=f"connection '{name}' (a local server, say) takes no API key"))
            continue
        methods.append(AuthMethodAgent(id=f"{ENV}:{name}", name=f"{name}: {key_env}",
                                       description=f"set {key_env} in the environment the editor starts ketch with"))
        if name != "adhoc":
            methods.append(AuthMethodAgent(id=f"{LOGIN}:{name}", name=f"{name}: ketch auth login",
                                           description=f"run 'ketch auth login {name}' in a terminal, then choose this"))
    return methods


def check(method_id: str, config: Any, args: Any) -> None:
    """Nothing when the method's connection has what it needs now; else "authentication required"."""
    from acp import RequestError

    from ketch.config.settings import resolve_connection
    from ketch.protocol.exceptions import ConfigError

    kind, _, name = method_id.partition(":")
    known = _connections(config, args)
    if kind not in (ENV, LOGIN, NONE) or name not in known:
        raise RequestError.invalid_params({"message": f"no authentication method {method_id!r}"})
    try:
        if name == "adhoc":
            resolve_connection(config, getattr(args, "model", None), base_url=args.base_url, wire=getattr(args, "wire", None),
                               api_key_env=getattr(args, "api_key_env", None))
        else:
            resolve_connection(config, f"{name}:?")
    except ConfigError as exc:
        raise RequestError.auth_required({"message": str(exc), "authMethods": [m.id for m in auth_methods(config, args)
                                                                               if m.id.endswith(f":{name}")]}) from None

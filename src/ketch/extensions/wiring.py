"""What the user's extensions add to a session: the guard (plugins and ``guards``), the
permission rules, the hooks, and the MCP servers with their tools' kinds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ketch.config.settings import Config, user_config_dir
from ketch.protocol.exceptions import ConfigError


def gate_parts(config: Config, root: Path, cwd: Path, warnings: list[str], sandbox: Any = None) -> tuple[Any, Any, Any]:
    """The guard, the rule set and the hook runner the configuration describes."""
    from ketch.extensions.hooks import HookRunner
    from ketch.extensions.plugins import ManifestError, compile_guard, config_rules, load_installed
    from ketch.gate.rules import RuleError, RuleSet, rules_from_config

    manifests = load_installed(user_config_dir(), root, warnings.append)
    try:
        guard = compile_guard(manifests, config_rules(config.guards), root=root)
        rules = RuleSet(rules_from_config(config.permissions), root=root)
        hooks = HookRunner(config.hooks, cwd, sandbox=sandbox) if config.hooks else None
    except (ManifestError, RuleError, ValueError) as exc:
        raise ConfigError(f"configuration: {exc}") from None
    return guard, rules, hooks


async def start_mcp(
    config: Config, descriptions: dict[str, str], warnings: list[str], sandbox: Any = None, *, child_env: Any = None
) -> tuple[Any, dict[str, str]]:
    """Start the configured MCP servers: the hub (or None) and the kind of each tool they offer.
    A server that fails to start is a warning; its tools' descriptions go into ``descriptions``."""
    from ketch.extensions.mcp_approval import approved_mcp

    mcp, held = approved_mcp(config)
    for approval in held:  # a project server not approved for its exact command is never spawned
        warnings.append(f"MCP server '{approval.name}' {approval.refusal()}")
    if not mcp.get("servers"):
        return None, {}
    from ketch.extensions.mcp import start_mcp_servers

    hub = await start_mcp_servers(mcp, sandbox=sandbox, child_env=child_env)
    kinds: dict[str, str] = {}
    for status in hub.status():
        if status.state == "failed":
            warnings.append(f"MCP server '{status.name}' failed to start: {status.error}")
        for tool in status.tools:
            kinds[tool] = "mcp"
            descriptions[tool] = f"MCP tool from server {status.name}"
    return hub, kinds

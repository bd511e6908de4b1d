"""What users and repositories add: MCP servers (and their approval), plugins and the guards
they declare, hooks, the registry, user commands, and the checks of the config tables they own.
The gate (``gate``) judges with the guards and hooks loaded here; the permission rules are its own.

May import: protocol, config, sandbox, tools, gate.
"""

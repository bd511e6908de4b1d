"""What users and repositories add: MCP servers (and their approval), plugins and guards,
permission rules, hooks, the registry, skills, user commands and their front matter, and the
checks of the config tables they own.

May import: protocol, config, sandbox, tools.
"""

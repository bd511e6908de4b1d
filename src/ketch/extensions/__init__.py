"""What users and repositories add: MCP servers, plugins and guards, permission rules,
hooks, the registry, skills, user commands and their front matter.

May import: core.config/errors/exceptions, tools. Never frontends or ui.
"""

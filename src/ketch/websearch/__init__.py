"""Web search: which connection/model pairs have hosted search, routing and wiring,
and the client-side search tool.

May import: protocol, config, providers, tools.
"""

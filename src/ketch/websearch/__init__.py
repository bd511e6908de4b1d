"""Web search: which connection/model pairs have hosted search, routing and wiring; the
client-side ``web_search`` tool it routes to is ``tools.web_search``.

May import: protocol, config, providers, tools.
"""

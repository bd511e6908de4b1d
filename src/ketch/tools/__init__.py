"""Every tool ketch defines and what they stand on: the workspace jail, the network guard, memory,
the task list and skills with their storage, the client-side ``web_search``. The list the model
sees is ``frontends.builtin_tools``; MCP tools come from ``extensions``, ``task`` from ``core``.

May import: protocol, config, lsp, sandbox, state.
And the SDK's tool types.
"""

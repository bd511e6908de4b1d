"""The built-in tools and what they stand on: the workspace jail, the network guard, memory and
the task list with their storage. The list the model sees is ``frontends.builtin_tools``.

May import: protocol, config, lsp, sandbox, state.
And the SDK's tool types.
"""

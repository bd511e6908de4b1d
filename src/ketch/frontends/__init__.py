"""Front ends over the event seam: argument parsing, wiring a Session (the composition root,
the built-in tool list), the headless printer, the interactive wiring, ACP, subcommands, slash actions.

May import: protocol, config, wire, lsp, sandbox, context, state, tools, gate, extensions, providers, websearch, checkpoints, core, ui.
The UI (ketch.ui) only lazily, from the interactive front end.
"""

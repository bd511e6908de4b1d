"""Language servers: the LSP client over stdio that ketch speaks to the servers the user has
installed, the per-language pool the file tools ask for a file's diagnostics after an edit,
and the report that turns diagnostics into bounded text for a tool result.

May import: protocol.
How a server is launched (the sandbox's argv, the key-free environment) is handed in by the
wiring, so nothing here imports tools, sandbox or frontends; nothing is started before the first edit.
"""

"""What outlives a process: the SQLite store, export, resume, repair, titles, and redaction
of the keys ketch holds from what is stored and shown.

May import: protocol, config, context.
"""

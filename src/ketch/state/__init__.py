"""What outlives a process: the SQLite store, export, memory, the task list, titles.

May import: context (the codec), core.events/errors/exceptions. Never frontends or ui.
"""

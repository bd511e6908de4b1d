"""What the model sees of the history: the token budget, the pruning ladder, compaction,
and the history codec between messages and stored rows.

May import: the SDK's message types, core.events/errors/exceptions. Never frontends or ui.
"""

"""What the model sees of the history: the token budget, the pruning ladder, compaction,
and the history codec between messages and stored rows.

May import: protocol, wire.
And the SDK's message types. The session it works in is typed as ``session_view.SessionView``,
never imported from core.
"""

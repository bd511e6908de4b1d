"""Checkpoints and rewind: snapshots of the workspace taken around every turn, and putting
the files, the conversation, or both back as they were before a prompt.

A snapshot covers every tracked and untracked, not-ignored file, whoever changed it (ketch's
file tools, a shell command, the user). It lives in a private git object store under the
user data dir (``shadow``); the user's own ``.git`` is never read for writing, committed to,
stashed or re-indexed. ``log`` keeps which snapshot belongs to which session, prompt and
step; ``rewind`` plans and applies a restore.

May import: protocol, config, context, state, tools.
(the data dir; the history repairs; the store, for conversation rewind; the jail and git's
allowlisted environment).
"""

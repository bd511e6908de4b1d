"""The OS sandbox every command ketch runs goes through: the policy (what may be written,
whether the network is on), the mechanisms that enforce it (bubblewrap, Landlock with a
seccomp filter, Seatbelt on macOS), their detection, and the one wrapping function the
launch sites call; plus the approval modes' view of it (escalation, the /sandbox panel).

May import: tools.run_later (the shared list of run-later paths), core.exceptions,
core.events (a warning notice), pydantic (the config model) and the SDK's ``ToolFailed``. Never frontends or ui; nothing here is
imported by ``ketch --version``/``--help``.
"""

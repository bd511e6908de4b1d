"""The OS sandbox every command ketch runs goes through: the policy (what may be written,
whether the network is on), the mechanisms that enforce it (bubblewrap, Landlock with a
seccomp filter, Seatbelt on macOS), their detection, the run-later paths, and the one wrapping
function the launch sites call; plus the approval modes' view of it (escalation, the /sandbox panel).

May import: protocol, config.
And the SDK's ``ToolFailed``; nothing here is imported by ``ketch --version``/``--help``.
"""

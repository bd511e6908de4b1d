"""A tap on an ACP agent's pipes: runs the agent command given after ``--`` and copies every
line that crosses its stdin and stdout into a log (``> `` client to agent, ``< `` agent to
client), so a test can validate each message against the protocol's schema.

``acp_wire.py LOG --preloaded SOCKET -- python -m ketch ARGS``: the agent is not a new
interpreter but a ketch process forked from the test's preloaded one
(``ketch_processes.fork_over_socket``) on the same pipes, with this process's environment and cwd."""

from __future__ import annotations

import os
import subprocess
import sys
import threading


class _Forked:
    """The agent as a preloaded fork on two pipes, with what ``main`` uses of a ``Popen``."""

    def __init__(self, socket_path: str, argv: list[str]) -> None:
        from ketch_processes import fork_over_socket

        to_agent_r, to_agent_w = os.pipe()
        from_agent_r, from_agent_w = os.pipe()
        try:
            _, self.wait = fork_over_socket(socket_path, argv, to_agent_r, from_agent_w, 2)
        finally:
            os.close(to_agent_r)
            os.close(from_agent_w)
        self.stdin, self.stdout = os.fdopen(to_agent_w, "wb"), os.fdopen(from_agent_r, "rb")


def main() -> int:
    log_path, command = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
    options = sys.argv[2:sys.argv.index("--")]
    if options:
        assert options[0] == "--preloaded" and command[1:3] == ["-m", "ketch"], sys.argv
        child = _Forked(options[1], command[3:])
    else:
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    lock = threading.Lock()
    log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - open for the process's life

    def note(mark: bytes, line: bytes) -> None:
        with lock:
            log.write(mark + line if line.endswith(b"\n") else mark + line + b"\n")

    def to_agent() -> None:
        assert child.stdin is not None
        for line in sys.stdin.buffer:
            note(b"> ", line)
            child.stdin.write(line)
            child.stdin.flush()
        child.stdin.close()

    threading.Thread(target=to_agent, daemon=True).start()
    assert child.stdout is not None
    for line in child.stdout:
        note(b"< ", line)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())

"""A tap on an ACP agent's pipes: runs the agent command given after ``--`` and copies every
line that crosses its stdin and stdout into a log (``> `` client to agent, ``< `` agent to
client), so a test can validate each message against the protocol's schema."""

from __future__ import annotations

import subprocess
import sys
import threading


def main() -> int:
    log_path, command = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
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

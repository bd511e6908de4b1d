"""Time from launch to what a user waits for, on a pseudo-terminal: the app's first frame
(it takes keys and draws) and the session ready to send (the model in the status line).

Runs the real entry ``python -m ketch --base-url … --model fake-model`` against the fake
provider of tests/fakeprovider.py (isolated config and data dirs), or with ``--demo``
``python -m ketch.ui.demo`` (a fake session), in a child on a pty, and reads the
master side until the prompt marker appears. Then it types a key and times its echo
(keys typed while the UI still imports are echoed by ``ketch.ui.typeahead`` and replayed
into the app's input), the app's first frame, and (real entry) the session being ready.
The child's CPU time (user+sys, from /proc) at that point is printed too: under load it is the steadier number.
Targets: the app's first frame < 0.3 s, the session ready < 1.0 s (medians; the prompt
glyph drawn before the UI imports is reported, not judged).
``--wire WIRE`` starts the real entry on that wire instead of Chat Completions.
Usage: .venv/bin/python bench/startup.py [--demo] [--runs N] [--wire WIRE]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import statistics
import struct
import sys
import termios
import time

PROMPT = "›".encode()
SYNC_FRAME = b"\x1b[?2026h"
"""The app wraps every frame in synchronized output; the early prompt line does not."""
STATUS = b"demo-model"
FIRST_FRAME_TARGET_S = 0.3
READY_TARGET_S = 1.0
"""The wire of the real entry (``--wire``)."""


class PtyChild:
    """A command running on a fresh pty of a fixed size; the master side is readable."""

    def __init__(self, argv: list[str], columns: int = 120, rows: int = 40) -> None:
        self.started = time.perf_counter()
        pid, fd = pty.fork()
        if pid == 0:
            os.environ.setdefault("TERM", "xterm-256color")
            os.execvp(argv[0], argv)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.output = bytearray()

    def read(self, timeout: float) -> bytes:
        """Whatever arrives within ``timeout`` seconds (b'' if nothing)."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return b""
        try:
            data = os.read(self.fd, 65536)
        except OSError:
            return b""
        self.output += data
        return data

    def read_until(self, marker: bytes, timeout: float, start: int = 0) -> float:
        """Read until ``marker`` shows up after offset ``start``; returns the time it did."""
        deadline = time.perf_counter() + timeout
        while marker not in self.output[start:]:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{marker!r} did not appear within {timeout}s")
            self.read(0.05)
        return time.perf_counter()

    def cpu(self) -> float:
        """The child's CPU time so far (user + system, seconds; its own children not counted)."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def close(self) -> None:
        """End the child (ctrl-c twice, then a signal if needed) and reap it."""
        try:
            self.send(b"\x15\x03")
            time.sleep(0.1)
            self.send(b"\x03")
        except OSError:
            pass
        deadline = time.perf_counter() + 3
        while time.perf_counter() < deadline:
            self.read(0.05)
            done, _ = os.waitpid(self.pid, os.WNOHANG)
            if done:
                break
        else:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


def demo_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "ketch.ui.demo", *extra]


def real_command(base_url: str, wire: str = "openai-chat") -> list[str]:
    """The real entry on ``wire`` (the Anthropic and Gemini base URLs are the server root, without ``/v1``)."""
    if wire in ("anthropic-messages", "gemini"):
        base_url = base_url.removesuffix("/v1")
    return [sys.executable, "-m", "ketch", "--base-url", base_url, "--wire", wire, "--model", "fake-model"]


def isolate() -> None:
    """Run the children in a fresh project with their own config and data dirs."""
    import tempfile

    home = tempfile.mkdtemp(prefix="ketch-bench-")
    os.environ.update(KETCH_CONFIG_DIR=f"{home}/config", KETCH_DATA_DIR=f"{home}/data", PYDANTIC_AI_NO_BANNER="1")
    os.makedirs(f"{home}/project/.git")
    os.chdir(f"{home}/project")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--real", action="store_true", help="the real ketch entry (the default)")
    parser.add_argument("--demo", action="store_true", help="python -m ketch.ui.demo (a fake session) instead")
    parser.add_argument("--wire", default="openai-chat", help="the wire of the real entry's session")
    args = parser.parse_args()
    marks: list[float] = []
    frames: list[float] = []
    echoes: list[float] = []
    apps: list[float] = []
    cpus: list[float] = []
    fake = None
    if not args.demo:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
        from fakeprovider import FakeProvider

        fake = FakeProvider().start()
        isolate()
        os.environ.setdefault("GEMINI_API_KEY", "bench")
    argv = real_command(fake.base_url, args.wire) if fake is not None else demo_command()
    status = b"fake-model" if fake is not None else STATUS
    for _ in range(args.runs):
        child = PtyChild(argv)
        marks.append(child.read_until(PROMPT, timeout=30) - child.started)
        mark_at = len(child.output)
        child.send(b"Q")  # typed before the app runs: must not be lost or echoed raw
        echoes.append(child.read_until(b"Q", timeout=30, start=mark_at) - child.started)
        apps.append(child.read_until(SYNC_FRAME, timeout=30) - child.started)
        frames.append(child.read_until(status, timeout=30) - child.started)
        cpus.append(child.cpu())
        child.close()
    if fake is not None:
        fake.stop(check=False)
    ready = f"session ready on {args.wire} (model in the status line)" if fake is not None else "first full frame (status line)"
    for label, values in (("prompt marker drawn", marks),
                          ("key typed at the marker echoed on the prompt line", echoes),
                          ("first frame of the app (typed keys replayed into its input)", apps),
                          (ready, frames),
                          ("child's CPU (user+sys) when " + ("ready" if fake is not None else "drawn"), cpus)):
        print(f"{label}: median {statistics.median(values):.3f} s, min {min(values):.3f} s, "
              f"max {max(values):.3f} s over {args.runs} runs")
    for label, values, target in (("app's first frame", apps, FIRST_FRAME_TARGET_S),
                                  ("session ready to send", frames, READY_TARGET_S)):
        median = statistics.median(values)
        verdict = "ok" if median < target else "OVER"
        print(f"target: {label} < {target:.1f} s: median {median:.3f} s — {verdict}")
    print(f"load average at the time: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

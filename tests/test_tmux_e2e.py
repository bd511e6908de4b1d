"""The real ``ketch`` binary in a real terminal (tmux, 120x40) against the fake provider:
ask, approve an edit, quit, read the scrollback, resume with the printed command.

Skipped when tmux is not installed. The tmux server runs on its own socket and is killed
at the end; the pane's shell gets the test's isolated config and data dirs.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, user_texts
from isolation import reserved_port

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

BIN = Path(sys.executable).parent


class Tmux:
    """One detached tmux session on a private socket."""

    def __init__(self, socket: str) -> None:
        self.socket = socket

    def run(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10)
        return done.stdout

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "k", *keys)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "k")

    def everything(self) -> str:
        """Scrollback and screen, as a user scrolling back would read them."""
        return self.run("capture-pane", "-p", "-t", "k", "-S", "-")

    def wait(self, pattern: str, timeout: float = 60.0, *, whole: bool = False) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.everything() if whole else self.screen()
            if re.search(pattern, text, re.MULTILINE):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{pattern!r} did not appear; the pane shows:\n{self.everything()}")
            time.sleep(0.1)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    term = Tmux(f"ketch-e2e-{os.getpid()}-{tmp_path.name}")
    env = {
        "HOME": os.environ["HOME"], "KETCH_CONFIG_DIR": os.environ["KETCH_CONFIG_DIR"],
        "KETCH_DATA_DIR": os.environ["KETCH_DATA_DIR"], "PYDANTIC_AI_NO_BANNER": "1",
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", "TERM": "xterm-256color", "PS1": "$ ",
    }
    shell = "env -i " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " bash --norc --noprofile"
    term.run("new-session", "-d", "-s", "k", "-x", "120", "-y", "40", "-c", str(tmp_path), shell)
    try:
        term.wait(r"^\$", timeout=10)
        yield term
    finally:
        term.run("kill-server")


def test_ask_approve_quit_scroll_back_and_resume(tmp_path: Path, tmux: Tmux) -> None:
    (tmp_path / ".git").mkdir()
    script = [
        Turn(text="I'll create it.", tool_calls=[ToolCall("write_file", {"path": "hello.py", "content": "print('hi')\n"})]),
        Turn(text="Created hello.py for you."),
        Turn(text="Yes: hello.py prints hi."),
    ]
    with FakeProvider(script) as fake:
        flags = f"--base-url {fake.base_url} --wire openai-chat --model fake-model"
        tmux.keys(f"ketch {flags}", "Enter")
        tmux.wait("adhoc:fake-model · think off")
        tmux.keys("create hello.py", "Enter")
        tmux.wait("Allow write_file")
        assert "+print('hi')" in tmux.screen()
        time.sleep(0.5)  # keys within the approval grace period (0.3 s) are ignored on purpose
        tmux.keys("y")
        tmux.wait("Created hello.py for you.")
        assert (tmp_path / "hello.py").read_text() == "print('hi')\n"
        tmux.keys("/quit", "Enter")
        text = tmux.wait(r"Resume with: (.+ --resume \w+)\n", whole=True)
        resume = re.search(r"Resume with: (.+ --resume \w+)\n", text)
        assert resume is not None

        # the scrollback holds the conversation once, in order, and no live-region debris
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        start = next(i for i, line in enumerate(lines) if line.startswith("› create hello.py"))
        convo = lines[start:]
        assert convo[0] == "› create hello.py"
        assert convo.index("I'll create it.") < convo.index("Created hello.py for you.")
        assert sum("Created hello.py for you." in line for line in convo) == 1
        assert not any("Allow write_file" in line or "loading model" in line for line in convo)

        tmux.keys(resume.group(1), "Enter")
        tmux.wait("Resumed session")
        tmux.wait("adhoc:fake-model · think off")
        tmux.keys("does it still exist?", "Enter")
        tmux.wait("Yes: hello.py prints hi.")
        tmux.keys("C-c")
        tmux.keys("C-c")
        tmux.wait(r"Resume with: .+\n(.|\n)*Resume with: ", whole=True)
    assert user_texts(fake.model_requests[-1]) == ["create hello.py", "does it still exist?"]


def test_narrowing_the_window_mid_stream_leaves_each_word_once(tmp_path: Path, tmux: Tmux) -> None:
    """The live region is re-wrapped by tmux when the pane narrows; the erase that
    follows must start at its real top, or its first rows end up in the scrollback
    twice. (The stream pauses between words so no frame is in flight at the resize.)"""
    (tmp_path / ".git").mkdir()
    words = [f"w{i:03d}x" for i in range(180)]
    pieces = [" ".join(words[:150]) + " "] + [w + " " for w in words[150:]] + ["\n\nThe end.\n"]
    script = [Turn(text="".join(pieces), text_pieces=pieces, chunk_delay=0.3)]
    with FakeProvider(script) as fake:
        tmux.keys("seq 50", "Enter")  # a full screen, as after some work
        tmux.keys(f"ketch --base-url {fake.base_url} --wire openai-chat --model fake-model", "Enter")
        tmux.wait("adhoc:fake-model · think off")
        tmux.keys("go", "Enter")
        tmux.wait("w151x")
        tmux.run("resize-window", "-t", "k", "-x", "70")
        tmux.wait("The end.", timeout=30)
        time.sleep(0.3)
        text = tmux.run("capture-pane", "-p", "-J", "-t", "k", "-S", "-")
    found = re.findall(r"w\d{3}x", text)
    doubled = sorted({w for w in found if found.count(w) > 1})
    assert doubled == [], f"{len(doubled)} words twice in the scrollback:\n{text}"
    assert set(found) == set(words)


@pytest.mark.parametrize(("delay", "tail"), [(0.25, 20), (0.02, 260)], ids=["paused", "frames-in-flight"])
def test_narrowing_three_times_during_a_paragraph_taller_than_half_the_screen_leaves_each_word_once(
        tmp_path: Path, tmux: Tmux, delay: float, tail: int) -> None:
    """A paragraph longer than the screen streams while the pane narrows 120 → 100 → 80 → 60.
    Each narrowing re-wraps the live region; it must stay on the screen (it shows at most
    about half the screen of the open paragraph, and keeps its rows after a narrowing so the
    next one still has room), and erasing it from the screen's top must not copy the screen
    into the scrollback (tmux does that for an erase sent from the top-left cell), and a
    row shortened by erasing its end still re-wraps as wide as it was (tmux keeps those
    cells). Once with the stream pausing between words, once at 20 ms a word, so frames
    are drawn while the pane narrows; then the pane widens back."""
    (tmp_path / ".git").mkdir()
    words = [f"v{i:03d}x" for i in range(400 + tail)]
    pieces = [" ".join(words[:400]) + " "] + [w + " " for w in words[400:]] + ["\n\nThe end.\n"]
    script = [Turn(text="".join(pieces), text_pieces=pieces, chunk_delay=delay)]
    with FakeProvider(script) as fake:
        tmux.keys("seq 50", "Enter")
        tmux.keys(f"ketch --base-url {fake.base_url} --wire openai-chat --model fake-model", "Enter")
        tmux.wait("adhoc:fake-model · think off")
        tmux.keys("go", "Enter")
        tmux.wait("v401x")
        for columns in ("100", "80", "60"):
            tmux.run("resize-window", "-t", "k", "-x", columns)
            time.sleep(0.9)
        tmux.run("resize-window", "-t", "k", "-x", "120")
        tmux.wait("The end.", timeout=30)
        time.sleep(0.3)
        text = tmux.run("capture-pane", "-p", "-J", "-t", "k", "-S", "-")
    found = re.findall(r"v\d{3}x", text)
    doubled = sorted({w for w in found if found.count(w) > 1})
    assert doubled == [], f"{len(doubled)} words twice in the scrollback:\n{text}"
    assert set(found) == set(words)


README = Path(__file__).resolve().parents[1] / "README.md"
README_PORT, README_SESSION, README_DIR = "8765", "19a6c0ffee01234", "/tmp/kdemo/myproject"
CAPTURE_INTRO = "The whole scrollback afterwards"


def readme_block(after: str) -> tuple[int, int, str]:
    """(start, end, text) of the first fenced block after the line containing ``after``."""
    text = README.read_text(encoding="utf-8")
    at = text.index(after)
    start = text.index("```\n", at) + 4
    end = text.index("\n```\n", start) + 1
    return start, end, text[start:end]


def _region(screen: str, first: str) -> str:
    """The live region of a screen capture: from the last line starting with ``first``."""
    lines = [line.rstrip() for line in screen.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    start = max(i for i, line in enumerate(lines) if line.startswith(first))
    return "\n".join(lines[start:]) + "\n"


def test_the_readme_walkthrough_reproduces_its_capture(tmp_path: Path, tmux: Tmux) -> None:
    """Every step of README's "What it looks like", typed into tmux against
    ``tests/fakeprovider_server.py demo --port N``; the scrollback must equal the capture
    in README (port, session id and directory normalised). ``KETCH_RECAPTURE=1`` rewrites it."""
    project = tmp_path / "myproject"
    (project / ".git").mkdir(parents=True)
    with reserved_port() as port:  # held until the server has it: nothing else can take it
        server = subprocess.Popen([sys.executable, str(Path(__file__).parent / "fakeprovider_server.py"), "demo",
                                   "--port", str(port)], stdout=subprocess.PIPE, text=True)
        url = server.stdout.readline().strip()  # type: ignore[union-attr]
    try:
        assert url == f"http://127.0.0.1:{port}/v1"
        tmux.keys(f"cd {shlex.quote(str(project))} && clear", "Enter")
        time.sleep(0.3)
        tmux.run("clear-history", "-t", "k")
        tmux.keys(f"ketch --base-url {url} --wire openai-chat --model fake-model", "Enter")
        tmux.wait("adhoc:fake-model · think off")
        tmux.keys("create hello.py that prints a greeting", "Enter")
        snapshots = {"An edit asks first": _region(tmux.wait("Allow write_file"), "● write_file")}
        time.sleep(0.5)  # the approval grace period
        tmux.keys("y")
        tmux.wait("working")
        tmux.keys("now run the long check", "Enter")
        snapshots["shows the queue"] = _region(tmux.wait("⧗ queued: now run the long check"), "● write_file")
        tmux.wait("Allow shell", timeout=30)
        time.sleep(0.5)
        tmux.keys("y")
        tmux.wait("│|● shell  sleep 30")
        time.sleep(0.5)
        tmux.keys("C-c")
        tmux.wait("Nothing else ran")
        tmux.keys("/quit", "Enter")
        text = tmux.wait(r"Resume with: (.+ --resume \w+)\n\$", whole=True)  # the shell is back
        resume = re.search(r"Resume with: (.+ --resume (\w+))\n", text)
        assert resume is not None
        session_id = resume.group(2)
        tmux.keys(resume.group(1), "Enter")
        tmux.wait("Resumed session")
        tmux.wait("adhoc:fake-model · think off")
        tmux.keys("what did we do so far?", "Enter")
        tmux.wait("You said: what did we do so far?")
        tmux.keys("/quit", "Enter")
        everything = tmux.wait(r"Resume with: .+\n(.|\n)*Resume with: .+\n\$", whole=True)
    finally:
        server.terminate()
        server.wait(5)
    lines = [line.rstrip() for line in everything.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    first = next(i for i, line in enumerate(lines) if line.startswith("$ ketch"))
    capture = "\n".join(lines[first:]) + "\n"
    capture = capture.replace(f"127.0.0.1:{port}", f"127.0.0.1:{README_PORT}").replace(session_id, README_SESSION)
    capture = capture.replace(str(project), README_DIR)
    start, end, documented = readme_block(CAPTURE_INTRO)
    if os.environ.get("KETCH_RECAPTURE"):
        text = README.read_text(encoding="utf-8")
        README.write_text(text[:start] + capture + text[end:], encoding="utf-8")
        documented = capture
        for intro, screen in snapshots.items():  # live-region moments: re-captured, not compared
            at, to, _ = readme_block(intro)
            text = README.read_text(encoding="utf-8")
            README.write_text(text[:at] + screen.replace(str(project), README_DIR) + text[to:], encoding="utf-8")
    assert capture == documented
    assert (project / "hello.py").read_text() == 'print("hello from ketch")\n'

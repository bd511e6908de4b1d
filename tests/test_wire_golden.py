"""Golden request bodies: every wire sends today's bytes, so replacing the wire code is provable.

One recorded session per wire (through ``ketch -p`` in this process, against the fake provider):
a task list, a file write, a shell output, an image read, thinking, enough tool output to make
the loop prune in a small window, a streamed answer cut by a cancel, a resume with an image, and
a summary (``--compact``). These runs do not opt in to search, so no hosted tool is offered (only
Anthropic's fake plays the resume's search result unasked, which its history then replays). The routes (``ROUTES``) are the four wires, the Chat dialects on ketch's own
Chat model (OpenRouter, Groq, Z.AI) and Mistral's Conversations. Hosted search is only offered
to a headless run that opts in, so each route that searches also records a searching session
(``--web-search``: the search, a follow-up that replays it, ``--compact``) in ``<route>-search``.
Every request body the provider received is compared, as the bytes that
arrived, with the file under ``tests/golden/wire/``, after replacing what differs between runs
by name (the working directory, the session id, the date, the
kernel release). A change of the bytes a wire sends
fails here; a change another issue asks for is made by regenerating the files
(``KETCH_UPDATE_GOLDEN=1 pytest tests/test_wire_golden.py``) and naming it in CHANGES below.

CHANGES (intended differences since the files were recorded):
- issue 30: reminders lose their lead sentence; the task list a todo_write result shows is not
  repeated as a reminder; git status and memory moved by the model's own work wait for the next
  turn's start (one sentence of the system prompt says so).
- issue 37: the diagnostics, shell_output and shell_kill tools (definitions and their lines in
  the system prompt) and the shell tool's ``background`` argument.
- the task list follows the history: a resumed session holds the list its last todo_write wrote,
  so the resume no longer tells the model the list is empty (``# Task list\n(none)``).
- issue 35: a ``[compaction] context_window`` reserves a quarter of the window for the answer, as
  every other window does (it was half): ``max_completion_tokens``/``max_output_tokens``/
  ``max_tokens``/``maxOutputTokens`` 10000 instead of 20000, and with the room that frees, the
  pruning in the small window of this session cuts later and keeps more (reasoning included).
- issue 30 (Anthropic): after a compaction, a fourth ``cache_control`` on the newest placeholdered
  tool result (or the summary), the end of the settled history the next compaction reads back.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, Hold, NativeSearch, RecordedRequest, ToolCall, Turn
from kettle import run_ketch, write_project_config

GOLDEN = Path(__file__).parent / "golden" / "wire"


@dataclass(frozen=True)
class Route:
    """One recorded session's connection: the preset, the wire named in the config (None: the
    preset's own), the path after the fake's address, the model, and whether it searches hosted."""

    preset: str
    wire: str | None
    path: str
    model: str = "fake-model"
    hosted_search: bool = True
    mid_stream_hold: bool = True
    """Whether the fake can hold this route's stream after a piece of text (else before the answer)."""


ROUTES = {
    "openai-chat": Route("openai", "openai-chat", "/v1", hosted_search=False),  # OpenAI's Chat searches through Responses
    "openai-responses": Route("openai", "openai-responses", "/v1"),
    "anthropic-messages": Route("anthropic", "anthropic-messages", ""),
    "gemini": Route("gemini", "gemini", "", mid_stream_hold=False),
    # the Chat dialects on ketch's own Chat model, and Mistral's Conversations (its hosted search's wire)
    "openai-chat-openrouter": Route("openrouter", None, "/v1", model="anthropic/claude-sonnet-4.5"),
    "openai-chat-groq": Route("groq", None, "/openai/v1", model="openai/gpt-oss-120b", hosted_search=False),
    "openai-chat-zai": Route("zai", None, "/v1", model="glm-4.7"),
    "openai-chat-deepseek": Route("deepseek", None, "", model="deepseek-reasoner", hosted_search=False),
    "openai-chat-llamacpp": Route("llamacpp", None, "/v1", hosted_search=False),  # a local server
    "mistral-conversations": Route("mistral", None, "/v1", model="mistral-medium-latest", mid_stream_hold=False),
}
"""Hosted search is not recorded on OpenAI's Chat (a searching session runs on Responses), on Groq
(only its compound systems search, and they take no function tools), nor where there is none
(DeepSeek, local servers)."""
SOURCES = [{"title": "Ketch docs", "url": "https://docs.example.org/ketch", "snippet": "A terminal agent."}]
KEYS = {"OPENAI_API_KEY": "sk-golden", "ANTHROPIC_API_KEY": "sk-golden", "GEMINI_API_KEY": "golden",
        "OPENROUTER_API_KEY": "sk-golden", "GROQ_API_KEY": "golden", "ZAI_API_KEY": "golden", "MISTRAL_API_KEY": "golden",
        "DEEPSEEK_API_KEY": "golden"}


def png(width: int = 2, height: int = 2) -> bytes:
    """A valid RGB PNG (the read_file tool sends it to the model as an image)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    rows = b"".join(b"\x00" + b"\x10\x80\xf0" * width for _ in range(height))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def first_turn() -> list[Turn]:
    todos = [{"content": "Survey the files", "status": "in_progress"}, {"content": "Report", "status": "pending"}]
    steps = [
        Turn(tool_calls=[ToolCall("todo_write", {"todos": todos}, id="call_todo")], reasoning="Plan the survey first."),
        Turn(tool_calls=[ToolCall("write_file", {"path": "notes.txt", "content": "note\n" * 40}, id="call_write")]),
        Turn(text="Running a command.", tool_calls=[ToolCall("shell", {"command": "seq 1 300"}, id="call_shell")]),
        Turn(tool_calls=[ToolCall("read_file", {"path": "dot.png"}, id="call_png")]),
    ]
    # parallel reads of large files: the loop must prune old results to stay in the window
    for n in range(0, 8, 2):
        steps.append(Turn(tool_calls=[ToolCall("read_file", {"path": f"big{n}.txt"}, id=f"call_big{n}"),
                                      ToolCall("read_file", {"path": f"big{n + 1}.txt"}, id=f"call_big{n + 1}")],
                          reasoning=f"Reading pair {n}."))
    steps.append(Turn(text="Surveyed: notes, numbers, an image and eight big files.", reasoning="Done reading."))
    return steps


def workspace(root: Path) -> None:
    (root / "dot.png").write_bytes(png())
    for n in range(8):
        (root / f"big{n}.txt").write_text("".join(f"line {n}.{i} of a big file\n" for i in range(400)))


def config(root: Path, fake: FakeProvider, route: Route) -> None:
    base = fake.base_url.removesuffix("/v1") + route.path
    wire = f'wire = "{route.wire}"\n' if route.wire else ""
    write_project_config(
        root,
        f'model = "c:{route.model}"\n'
        'think = "high"\n'
        "[compaction]\ncontext_window = 40000\n"
        f'[connections.c]\npreset = "{route.preset}"\n{wire}base_url = "{base}"\nmax_retries = 0\n'
        + (f'[models."c:{route.model}"]\ncapabilities = {{ web_search = true }}\n[web_search]\nenabled = true\n'
           if route.hosted_search else ""),
    )


DATE = re.compile(r"(?<!\d)20\d\d-\d\d-\d\d(?!\d)")  # after a JSON "\\n" too


def session_ids() -> list[str]:
    from ketch.state.store import Store

    with Store.open() as store:
        return [row.id for row in store.list_sessions()]


def normalized(raw: bytes, root: Path, sessions: list[str]) -> str:
    """The body as it arrived, with the run's own names replaced (each by a fixed token)."""
    text = raw.decode("utf-8")
    for n, sid in enumerate(sorted(sessions, key=len, reverse=True)):
        text = text.replace(sid, f"<SESSION{n}>")
    for path, token in ((str(root.resolve()), "<ROOT>"), (str(root), "<ROOT>")):
        text = text.replace(path, token).replace(json.dumps(path)[1:-1], token)
    text = text.replace(platform.release(), "<OS-RELEASE>")  # the system prompt names the kernel
    return DATE.sub("<DATE>", text)


class Answers:
    """The scripted steps in order; a summary request (one offering no tools) gets a summary."""

    def __init__(self, steps: list[Turn]) -> None:
        self.queue = list(steps)
        self.summaries = 0

    def __call__(self, request: RecordedRequest) -> Turn:
        body = request.body or {}
        if not body.get("tools"):
            self.summaries += 1
            return Turn(text=f"Summary {self.summaries}: the user surveyed files; notes.txt holds 40 notes.")
        return self.queue.pop(0)


async def cancelled_turn(root: Path, hold: Hold, *, after_pieces: bool) -> None:
    """Resume the stored session and cancel its answer at the fake's hold (after six streamed
    pieces, or before anything where the fake cannot hold mid-stream), so what was shown is the
    same on every run; then ask again in the same session."""
    from ketch.protocol import events as ev
    from ketch.frontends.assemble import build_session

    args = argparse.Namespace(cwd=str(root), model=None, yolo=True, continue_=True)
    session = await build_session(args, interactive=False)

    async def cancel_at_hold() -> None:
        assert await asyncio.to_thread(hold.wait_reached, 60)
        if not after_pieces:
            session.cancel_turn()
            hold.release()

    try:
        shown = ""
        watcher = asyncio.create_task(cancel_at_hold())
        async for event in session.run_turn("tell me more"):
            if isinstance(event, ev.TextDelta):
                shown += event.text
                if after_pieces and "word5 " in shown:
                    session.cancel_turn()
                    hold.release()
        await watcher
        async for _ in session.run_turn("and now"):
            pass
    finally:
        await session.aclose()


def record(route: Route, root: Path) -> list[str]:
    """Run the golden session on ``route``; the normalized bodies of every model request."""
    workspace(root)
    hold = Hold("cut")
    mid_stream = route.mid_stream_hold
    pieces = [f"word{i} " for i in range(20)]
    answers = Answers([
        *first_turn(),
        # cancelled at the hold
        Turn(text="".join(pieces), text_pieces=pieces, hold_after_piece=(6, hold)) if mid_stream
        else Turn(text="".join(pieces), text_pieces=pieces, hold=hold),
        Turn(text="After the cancel."),
        Turn(text="Resumed answer [1].", native_search=NativeSearch("ketch image", SOURCES)),
        Turn(text="Answer after the summary."),
    ])
    with FakeProvider([answers] * 60) as fake:
        config(root, fake, route)
        first = run_ketch(["-p", "survey the files", "--yolo"], root, env=KEYS)
        assert first.code == 0, first.stderr
        asyncio.run(cancelled_turn(root, hold, after_pieces=mid_stream))
        second = run_ketch(["--continue", "-p", "resume please and look at @dot.png", "--yolo"], root, env=KEYS)
        assert second.code == 0, second.stderr
        third = run_ketch(["--continue", "--compact", "-p", "go on", "--yolo"], root, env=KEYS)
        assert third.code == 0, third.stderr
        assert not fake.rejections, fake.rejections
        assert not answers.queue and not fake.exhausted, "the session did not take the scripted steps"
        sessions = session_ids()
        bodies = [normalized(r.raw, root, sessions) for r in fake.model_requests]
    return bodies


@pytest.mark.parametrize("wire", list(ROUTES))
def test_each_wire_sends_the_recorded_bytes(wire: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "work"
    root.mkdir()
    compare(record(ROUTES[wire], root), GOLDEN / f"{wire}.jsonl")


SEARCH_ROUTES = {name: route for name, route in ROUTES.items() if route.hosted_search}
"""Groq's compound systems are not recorded: they take no function tools, which is how ``Answers``
tells a summary request."""


def record_search(route: Route, root: Path) -> list[str]:
    """A session that searches hosted (``--web-search``): the search and its answer, a follow-up
    whose history replays them, then a summary (``--compact``) over them and the next answer."""
    answers = Answers([
        Turn(text="Ketch is a terminal agent [1].", native_search=NativeSearch("what is ketch", SOURCES),
             reasoning="Search for it."),
        Turn(text="It runs in a terminal, as the source says."),
        Turn(text="Answer after the summary."),
    ])
    with FakeProvider([answers] * 20) as fake:
        config(root, fake, route)
        for flags, prompt in (([], "what is ketch?"), (["--continue"], "where does it run?"),
                              (["--continue", "--compact"], "go on")):
            run = run_ketch([*flags, "-p", prompt, "--yolo", "--web-search"], root, env=KEYS)
            assert run.code == 0, run.stderr
        assert not fake.rejections, fake.rejections
        assert not answers.queue and not fake.exhausted, "the session did not take the scripted steps"
        sessions = session_ids()
        return [normalized(r.raw, root, sessions) for r in fake.model_requests]


@pytest.mark.parametrize("wire", list(SEARCH_ROUTES))
def test_each_wire_sends_the_recorded_bytes_of_a_searching_session(wire: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    root = tmp_path / "work"
    root.mkdir()
    compare(record_search(SEARCH_ROUTES[wire], root), GOLDEN / f"{wire}-search.jsonl")


def compare(bodies: list[str], path: Path) -> None:
    """The bodies against the recorded file (which ``KETCH_UPDATE_GOLDEN=1`` writes first)."""
    if os.environ.get("KETCH_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(body + "\n" for body in bodies), encoding="utf-8")
    recorded = path.read_text(encoding="utf-8").splitlines()
    assert len(bodies) == len(recorded), f"{len(bodies)} requests, {len(recorded)} recorded"
    for n, (sent, golden) in enumerate(zip(bodies, recorded), 1):
        assert sent == golden, f"request {n} of {len(bodies)} differs from {path.name}:\n{first_difference(sent, golden)}"


def first_difference(sent: str, golden: str) -> str:
    at = next((i for i, (a, b) in enumerate(zip(sent, golden)) if a != b), min(len(sent), len(golden)))
    return f"at byte {at}:\n  sent:   {sent[max(0, at - 120):at + 200]!r}\n  golden: {golden[max(0, at - 120):at + 200]!r}"

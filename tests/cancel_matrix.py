"""One scripted turn whose every event boundary a real front end can be stopped at, on purpose.

The turn has three steps (the shape of ``durable_session.scripted_turn``): a short text and a
shell call; a shell call and a ``read_file`` call run in parallel; an answer streamed in
pieces. Nothing in it is timed. Each boundary is a place where the turn waits for the test:

* a model request waits on a ``fakeprovider.Hold`` (before its answer, or right after the
  n-th piece of its text went out);
* a shell command waits for a gate file: it first leaves ``<id>.running`` holding its pid (so
  the test knows the command runs, and can tell it was stopped), then waits until ``<id>`` exists, then prints ``finished-<id>``;
* the user's ``prompt_submitted`` hook (``HOOKS``, in the user's config) waits the same way
  while ``hook.armed`` exists, and does nothing otherwise; its ``turn_stopped`` hook likewise
  with ``stop.armed`` (``stop.running``, ``stop.go``).

``Round(tag, boundary)`` builds the script of one turn with only the wait of its boundary
armed (every other point passes freely), and says what must be stored afterwards.

The real front ends reach these boundaries; the in-process matrix
(``test_cancel_keeps_the_conversation.boundaries``) numbers the events of
``scripted_turn``: 0 TurnStarted, 1 the step's text, 2 its Usage, 3 ToolCallStarted,
4 ApprovalResolved, 5 ToolCallFinished, 6 step 2's Usage, 7-8 its two ToolCallStarted, 9-10
their approvals, 11-12 their ToolCallFinished, 13 the answer's text, 14 its Usage. In a real
process nothing waits between a response's end and its tools' start (2-4, 6-10): the first
place there a user can stop it is the running command, so those indices map onto the
"running" boundaries below.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable_session import no_two_responses_in_a_row, stored_messages, stored_prompts
from fakeprovider import FakeProvider, Hold, RecordedRequest, ToolCall, Turn, tool_results, user_texts
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from ketch.core.turn_record import CANCELLED_MARKER

GATES = ".gates"
"""The gate files' folder, inside the work dir (the command's cwd)."""

BOUNDARIES: dict[str, str] = {
    "a prompt hook running": "0: TurnStarted; the user's prompt_submitted hook runs (before any request)",
    "turn start": "0: TurnStarted; the first request is held before its answer",
    "text of step 1": "1: step 1's text delta shown; its stream is held right after it",
    "a command running": "2-4: step 1's response ended, its shell call runs (waits on its gate)",
    "between steps 1 and 2": "5-6: the call finished; the second request is held before its answer",
    "one parallel call done, one running": "7-11: the read_file call finished, the shell call of the same step runs",
    "between steps 2 and 3": "12: both calls finished; the third request is held before its answer",
    "the answer streaming": "13: five pieces of the answer shown; its stream is held",
    "the whole answer shown": "13-14: every piece of the answer shown; the stream's end is held",
}
RUNNING = ("a command running", "one parallel call done, one running")
"""The boundaries where a shell command runs (SIGINT headless stops the command, not the turn)."""
WAITING = ("a prompt hook running", *RUNNING)
"""The boundaries where a program of the user's or the model's runs (its marker file says so)."""


HOOKS = f"""
[[hooks.prompt_submitted]]
command = "[ -e {GATES}/hook.armed ] || exit 0; echo $$ > {GATES}/hook.running; until [ -e {GATES}/hook.go ]; do sleep 0.01; done"
[[hooks.turn_stopped]]
command = "[ -e {GATES}/stop.armed ] || exit 0; echo $$ > {GATES}/stop.running; until [ -e {GATES}/stop.go ]; do sleep 0.01; done"
"""


def install_hooks(config_dir: Path, *, checkpoints: bool = False) -> None:
    """Add ``HOOKS`` to the user's config (the ``isolated_home`` one); ``checkpoints`` turns on
    what is on by default for a user (the suite's config turns it off)."""
    config = config_dir / "config.toml"
    text = config.read_text()
    if checkpoints:
        text = text.replace("checkpoints = false", "checkpoints = true")
    config.write_text(text + HOOKS)


def answer_pieces(tag: str) -> list[str]:
    return [f"{tag}w{i} " for i in range(12)]


def gated_command(call_id: str) -> str:
    gate = f"{GATES}/{call_id}"
    return f"echo $$ > {gate}.running && until [ -e {gate} ]; do sleep 0.01; done && echo finished-{call_id}"


@dataclass
class Round:
    """One turn of the script (its ids and texts carry ``tag``) with ``boundary`` armed."""

    tag: str
    boundary: str
    cwd: Path
    holds: dict[str, Hold] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.boundary in BOUNDARIES, self.boundary
        self.ids = [f"{self.tag}_1", f"{self.tag}_2", f"{self.tag}_3"]
        gates = self.cwd / GATES
        gates.mkdir(exist_ok=True)
        for call_id in (self.ids[0], self.ids[1]):  # the commands run through, but the one at the boundary
            if not (self.boundary == "a command running" and call_id == self.ids[0]) and not (
                self.boundary == "one parallel call done, one running" and call_id == self.ids[1]
            ):
                (gates / call_id).touch()
        if self.boundary == "a prompt hook running":
            (gates / "hook.armed").touch()

    def hold(self, name: str) -> Hold:
        return self.holds.setdefault(name, Hold(f"{self.tag}: {name}"))

    @property
    def first_text(self) -> str:
        return f"Reading ({self.tag})."

    @property
    def answer(self) -> str:
        return "".join(answer_pieces(self.tag)) + self.tag

    def turns(self, *, after_running: bool = False) -> list[Turn]:
        """The three responses. With ``after_running`` the request that follows a running
        boundary is held too (headless: the first SIGINT stops the command, the second the turn)."""
        b = self.boundary
        first = Turn(text=self.first_text, text_pieces=[self.first_text],
                     tool_calls=[ToolCall("shell", {"command": gated_command(self.ids[0])}, id=self.ids[0])])
        second = Turn(tool_calls=[ToolCall("shell", {"command": gated_command(self.ids[1])}, id=self.ids[1]),
                                  ToolCall("read_file", {"path": "a.txt"}, id=self.ids[2])])
        pieces = [*answer_pieces(self.tag), self.tag]
        third = Turn(text=self.answer, text_pieces=pieces)
        if b == "turn start":
            first.hold = self.hold(b)
        elif b == "text of step 1":
            first.hold_after_piece = (1, self.hold(b))
        elif b == "between steps 1 and 2" or (b == "a command running" and after_running):
            second.hold = self.hold("between steps 1 and 2")
        elif b == "between steps 2 and 3" or (b == "one parallel call done, one running" and after_running):
            third.hold = self.hold("between steps 2 and 3")
        elif b == "the answer streaming":
            third.hold_after_piece = (5, self.hold(b))
        elif b == "the whole answer shown":
            third.hold_after_piece = (len(pieces), self.hold(b))
        return [first, second, third]

    def running_marker(self) -> Path:
        """The file the program at this (waiting) boundary leaves once it runs, holding its pid."""
        if self.boundary == "a prompt hook running":
            return self.cwd / GATES / "hook.running"
        call_id = self.ids[0] if self.boundary == "a command running" else self.ids[1]
        return self.cwd / GATES / f"{call_id}.running"

    def assert_stopped(self, timeout: float = 10) -> None:
        """The program that ran at this boundary (a command, the hook) is gone: ketch stopped it."""
        pid = int(self.running_marker().read_text())
        deadline = time.monotonic() + timeout
        while _running(pid):
            assert time.monotonic() < deadline, f"{self.boundary}: pid {pid} still runs"
            time.sleep(0.01)

    def release_all(self) -> None:
        for hold in self.holds.values():
            hold.release()
        for call_id in self.ids[:2]:
            (self.cwd / GATES / call_id).touch()
        for name in ("hook.armed", "hook.running"):
            (self.cwd / GATES / name).unlink(missing_ok=True)

    def shown_before(self) -> str:
        """The text of the response streaming when the cancel comes (what the user saw of it)."""
        b = self.boundary
        if b == "text of step 1":
            return self.first_text
        if b == "the answer streaming":
            return "".join(answer_pieces(self.tag)[:5]).strip()
        if b == "the whole answer shown":
            return self.answer
        return ""

    def finished_calls(self) -> list[str]:
        """Calls whose real result exists when the cancel comes."""
        order = list(BOUNDARIES)
        at = order.index(self.boundary)
        done = []
        if at > order.index("a command running"):
            done.append(self.ids[0])
        if at >= order.index("one parallel call done, one running"):
            done.append(self.ids[2])
        if at > order.index("one parallel call done, one running"):
            done.append(self.ids[1])
        return done

    def cut_call(self) -> str | None:
        """The call that runs when the cancel comes."""
        if self.boundary == "a command running":
            return self.ids[0]
        if self.boundary == "one parallel call done, one running":
            return self.ids[1]
        return None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


# ---------------------------------------------------------------- what a stopped round leaves


def segment(messages: list[Any], prompt: str) -> list[Any]:
    """The stored messages of the turn that ``prompt`` started (up to the next prompt)."""
    from ketch.context.reminders import is_reminder

    starts = [n for n, m in enumerate(messages) if isinstance(m, ModelRequest)
              and any(isinstance(p, UserPromptPart) and not is_reminder(p) for p in m.parts)]
    mine = [n for n in starts if any(isinstance(p, UserPromptPart) and p.content == prompt for p in messages[n].parts)]
    assert mine, (prompt, stored_prompts(messages))
    later = [n for n in starts if n > mine[0]]
    return messages[mine[0]: later[0] if later else len(messages)]


def request_with_prompt(fake: FakeProvider, prompt: str) -> RecordedRequest:
    """The first model request whose newest user message ends with ``prompt`` (Anthropic merges a
    prompt that was never answered, after a crash, into the next one's message)."""
    found = [r for r in fake.model_requests if user_texts(r) and user_texts(r)[-1].endswith(prompt)]
    assert found, [(r.body or {}).get("messages") or (r.body or {}).get("input") for r in fake.model_requests[-2:]]
    return found[0]


def check_round(r: Round, prompt: str, *, prompts: list[str], followed_by: RecordedRequest, cut_note: str,
                cancelled: bool = True) -> None:
    """What one stopped round left, in the store and in ``followed_by`` (the next request): every
    prompt in order, no two responses in a row; a cancelled turn's last response marked and
    holding the text shown before the cancel (``cancelled``; a killed process stores no text
    that was still streaming); finished calls with their real results, the running one with
    ``cut_note``, and no result for a call the model had not made yet."""
    messages = stored_messages()
    assert stored_prompts(messages) == prompts, r.boundary
    assert no_two_responses_in_a_row(messages), r.boundary
    turn = segment(messages, prompt)
    said = "\n".join(p.content for m in turn if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, TextPart))
    if cancelled:
        last = turn[-1]
        assert isinstance(last, ModelResponse) and isinstance(last.parts[-1], TextPart), (r.boundary, turn)
        assert last.parts[-1].content.endswith(CANCELLED_MARKER), (r.boundary, last)
        assert r.shown_before() in last.parts[-1].content, (r.boundary, r.shown_before(), last)
    if list(BOUNDARIES).index(r.boundary) > list(BOUNDARIES).index("text of step 1"):
        assert r.first_text in said, (r.boundary, said)  # step 1's response was whole
    results = dict(tool_results(followed_by))
    for call_id in r.finished_calls():
        assert f"finished-{call_id}" in results[call_id] or "alpha" in results[call_id], (r.boundary, results)
    if (cut := r.cut_call()) is not None:
        assert cut_note in results[cut], (r.boundary, results[cut])
    assert {c for c in results if c.startswith(f"{r.tag}_")} == {*r.finished_calls(), *([cut] if cut else [])}


def _text_since_last_call(events: list[dict[str, Any]]) -> str:
    tail: list[str] = []
    for event in events:
        if event["type"] in ("tool_call_started", "tool_call_finished"):
            tail.clear()
        elif event["type"] == "text_delta":
            tail.append(event["text"])
    return "".join(tail)


def headless_shows(r: Round, events: list[dict[str, Any]]) -> bool:
    """The stream-json ``events`` so far show the boundary's event (and the turn waits there)."""
    b, (one, two, three) = r.boundary, r.ids
    finished = {e["call_id"] for e in events if e["type"] == "tool_call_finished"}
    started = {e["call_id"] for e in events if e["type"] == "tool_call_started"}
    if b == "a prompt hook running":
        return r.running_marker().exists() and any(e["type"] == "turn_started" for e in events)
    if b in RUNNING:
        return r.running_marker().exists() and r.cut_call() in started and (b == "a command running" or three in finished)
    if not r.holds[next(iter(r.holds))].reached.is_set():
        return False
    if b == "turn start":
        return any(e["type"] == "turn_started" for e in events)
    if b == "between steps 1 and 2":
        return one in finished
    if b == "between steps 2 and 3":
        return {one, two, three} <= finished
    return r.shown_before() in _text_since_last_call(events)

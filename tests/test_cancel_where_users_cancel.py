"""A cancel the way a user sends it, at every event boundary of a turn, on every wire, loses
nothing: Esc in the interactive UI, SIGINT (to the process group, as Ctrl-C) to a headless
``ketch -p --output-format stream-json`` process.

The scripted turn and its boundaries are ``cancel_matrix``: nothing is timed; at each
boundary the turn waits for the test (the fake provider holds a request or its stream, or a
shell command waits for its gate file), the test waits until the front end has shown the
boundary's event (the screen; the stream-json lines), and only then cancels. How these
boundaries map onto the event indices of the in-process matrix
(``test_cancel_keeps_the_conversation``, events 0-14 of ``scripted_turn``):

===================================  ==============  ==========================================
boundary (``cancel_matrix``)         in-process k    the turn waits on
===================================  ==============  ==========================================
a prompt hook running                0               the user's prompt_submitted hook (a command)
turn start                           0               the first request, held before its answer
text of step 1                       1               step 1's stream, held after its text
a command running                    2, 3, 4         step 1's shell command (its gate file)
between steps 1 and 2                5, 6            the second request, held before its answer
one parallel call done, one running  7 to 11         step 2's shell call (read_file has finished)
between steps 2 and 3                12              the third request, held before its answer
the answer streaming                 13 (inside)     the answer's stream, after five pieces
the whole answer shown               13 (end), 14    the answer's stream, before its end
===================================  ==============  ==========================================

(2-4 and 6-10 are instants in a real process: nothing waits between a response's end and its
tools' start, so the first place a user can stop there is the running command.)

After each cancel two more prompts follow, then the next boundary's turn on the same session
(headless: the next process runs with ``--continue``, a resume each time), and a last resume
at the end. Checked after every round: every prompt is stored, in order; the turn's stored
answer is marked cancelled and holds the text shown before the cancel; each call that had
finished has its real result and the one running has the note that it was stopped; at the end
every request the provider received passes the strict history rules of its wire and the
Responses item rules.

Headless, SIGINT while a command runs stops the command and the turn goes on (README); there
the test sends a second SIGINT once the next request is held, which ends the turn. The user's
hooks (``cancel_matrix.HOOKS``) are configured throughout; checkpoints, on by default for a
user and off in the suite, are on for one wire of each front end.

Each headless boundary is its own process. On each wire one of them is ``python -m ketch``
itself; the others are forked from an interpreter that has already imported ketch and the
SDKs (``ketch_processes.Preloaded``), which saves about 3 s of CPU per process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from cancel_matrix import (
    BOUNDARIES,
    GATES,
    RUNNING,
    WAITING,
    Round,
    check_round,
    headless_shows,
    install_hooks,
    request_with_prompt,
)
from durable_session import WIRES, open_session, run, stored_messages, stored_prompts, workdir
from fakeprovider import FakeProvider, Turn, user_texts
from kettle import adhoc, ketch_env, run_ketch
from ketch_processes import Preloaded, start_exec
from wire_rules import assert_valid

from ketch.core.turn_record import CUT_OFF_BY_USER
from ketch.tools.shell import INTERRUPTED_MESSAGE


# ---------------------------------------------------------------- Esc in the UI


def _screen(h: Any) -> str:
    return "\n".join(h.sink.all_lines())


async def _until(condition: Any, what: str, h: Any, timeout: float = 15) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"never: {what}; screen:\n{h.sink.text()}"
        await asyncio.sleep(0.01)


def _ui_shows(r: Round, h: Any) -> bool:
    """The screen shows the boundary's event (and the turn waits there)."""
    screen = _screen(h).split(f"› cancelled at {r.tag}")
    if len(screen) < 2:
        return False
    now = screen[-1]  # what this round's turn drew
    b, (one, two, _) = r.boundary, r.ids
    if b == "a prompt hook running":
        return r.running_marker().exists()
    if b in RUNNING:
        read_done = "● read_file  a.txt" in now and "(1 line)" in now
        return r.running_marker().exists() and f"{GATES}/{r.cut_call()}.running" in now and (
            b == "a command running" or read_done)
    if not r.holds[next(iter(r.holds))].reached.is_set():
        return False
    if b == "turn start":
        return True
    if b == "text of step 1":
        return r.first_text in now
    if b == "between steps 1 and 2":
        return f"finished-{one}" in now
    if b == "between steps 2 and 3":
        return f"finished-{two}" in now and "(1 line)" in now
    return r.shown_before() in " ".join(now.split())


@pytest.mark.parametrize("wire", WIRES)
async def test_esc_in_the_ui_at_every_boundary_keeps_every_prompt_and_the_text_shown(
    tmp_path: Path, wire: str, isolated_home: Path
) -> None:
    from uifakes import Harness, app_config_fields

    from ketch.frontends.cli import _main_parser
    from ketch.frontends.interactive import Interactive

    cwd = workdir(tmp_path)
    install_hooks(isolated_home / "config", checkpoints=wire == "openai-chat")  # (on by default for users)
    prompts: list[str] = []
    with FakeProvider() as fake:
        runtime = Interactive(_main_parser().parse_args([*adhoc(fake, wire), "--yolo", "--cwd", str(cwd)]), cwd)
        config = runtime.app_config()
        fields = app_config_fields(config)
        try:
            async with Harness(None, columns=200, rows=40, **fields) as h:
                await h.wait_text("adhoc:fake-model", timeout=10)
                for n, boundary in enumerate(BOUNDARIES):
                    r = Round(f"u{n}", boundary, cwd)
                    fake.add(*r.turns())
                    prompt = f"cancelled at {r.tag}"
                    await h.type(prompt + "\r")
                    await _until(lambda: _ui_shows(r, h), boundary, h)
                    await h.type("\x1b", pause=0.1)
                    await h.idle()
                    if boundary in WAITING:
                        r.assert_stopped()
                    r.release_all()
                    fake.script.clear()  # what the cancelled turn did not ask for
                    fake.add(Turn(text=f"answer {n} one"), Turn(text=f"answer {n} two"))
                    for which in ("one", "two"):
                        await h.type(f"next {n} {which}\r")
                        await h.wait_text(f"answer {n} {which}", timeout=10)
                        await h.idle()
                    prompts += [prompt, f"next {n} one", f"next {n} two"]
                    check_round(r, prompt, cut_note=CUT_OFF_BY_USER, prompts=prompts,
                                followed_by=request_with_prompt(fake, f"next {n} one"))
                await h.type("/quit\r")
                await asyncio.wait_for(h.task, 10)
        finally:
            await runtime.close()
        fake.add(Turn(text="resumed"))
        session = await open_session(fake, wire, cwd, resume=True)
        assert (await run(session, "after the resume"))[-1].reason == "done"
        await session.aclose()
    assert user_texts(fake.model_requests[-1]) == [*prompts, "after the resume"]
    assert stored_prompts(stored_messages()) == [*prompts, "after the resume"]
    assert_valid(fake.model_requests)
    assert not fake.rejections, fake.rejections


# ---------------------------------------------------------------- SIGINT, headless


_REAL_EXEC = {"openai-chat": "the answer streaming", "openai-responses": "a command running",
              "anthropic-messages": "turn start"}
"""The boundary that runs ``python -m ketch`` itself on each wire (the others: a preloaded fork)."""


@pytest.mark.parametrize("wire", WIRES)
def test_sigint_headless_at_every_boundary_keeps_every_prompt_and_the_text_shown(
    tmp_path: Path, wire: str, preloaded_ketch: Preloaded, isolated_home: Path
) -> None:
    cwd = workdir(tmp_path)
    install_hooks(isolated_home / "config", checkpoints=wire == "anthropic-messages")  # (on by default for users)
    prompts: list[str] = []
    with FakeProvider() as fake:
        for n, boundary in enumerate(BOUNDARIES):
            r = Round(f"h{n}", boundary, cwd)
            fake.add(*r.turns(after_running=True))
            prompt = f"cancelled at {r.tag}"
            argv = [*(["--continue"] if n else []), "-p", prompt, "--output-format", "stream-json", "--yolo",
                    *adhoc(fake, wire)]
            out = tmp_path / f"run{n}"
            out.mkdir()
            start = start_exec if _REAL_EXEC[wire] == boundary else preloaded_ketch.start
            proc = start(argv, cwd, ketch_env(), out)
            try:
                proc.wait_for(lambda: headless_shows(r, proc.events()), boundary)
                proc.interrupt()
                if boundary in RUNNING:  # the first Ctrl-C stopped the command; the turn went on
                    cut = r.cut_call()
                    proc.wait_for(lambda: any(e["type"] == "tool_call_finished" and e["call_id"] == cut
                                              for e in proc.events()), "the stopped command's end")
                    proc.wait_for(lambda: r.holds["between steps 1 and 2" if cut == r.ids[0]
                                                  else "between steps 2 and 3"].reached.is_set(), "the next request")
                    proc.interrupt()
                code = proc.wait()
                if boundary in WAITING:
                    r.assert_stopped()
            finally:
                r.release_all()
                if proc.code is None:
                    proc.wait(5)
            events = proc.events()
            assert code == 130, (boundary, code, proc.stderr())
            assert events[-1]["type"] == "turn_finished" and events[-1]["reason"] == "cancelled", (boundary, events[-1])
            assert "Traceback" not in proc.stderr(), proc.stderr()
            fake.script.clear()
            for which in ("one", "two"):
                fake.add(Turn(text=f"answer {n} {which}"))
                done = run_ketch(["--continue", "-p", f"next {n} {which}", "--yolo", *adhoc(fake, wire)], cwd)
                assert done.code == 0 and done.stdout.strip() == f"answer {n} {which}", done.stderr
            prompts += [prompt, f"next {n} one", f"next {n} two"]
            check_round(r, prompt, cut_note=INTERRUPTED_MESSAGE, prompts=prompts,
                        followed_by=request_with_prompt(fake, f"next {n} one"))
        fake.add(Turn(text="resumed"))
        done = run_ketch(["--continue", "-p", "after the resume", *adhoc(fake, wire)], cwd)
        assert done.code == 0, done.stderr
    assert user_texts(fake.model_requests[-1]) == [*prompts, "after the resume"]
    assert stored_prompts(stored_messages()) == [*prompts, "after the resume"]
    assert_valid(fake.model_requests)
    assert not fake.rejections, fake.rejections


# ---------------------------------------------------------------- a second cancel while the stop hook runs


async def test_esc_twice_while_the_turn_stopped_hook_runs_ends_the_turn(tmp_path: Path, isolated_home: Path) -> None:
    """The first Esc cancels the turn, whose ``turn_stopped`` hook then runs; a second Esc meanwhile
    must not cut the turn's end (it used to leave the UI busy for good, the cancel unstored)."""
    from uifakes import Harness, app_config_fields

    from ketch.frontends.cli import _main_parser
    from ketch.frontends.interactive import Interactive

    cwd = workdir(tmp_path)
    install_hooks(isolated_home / "config")
    wire = "anthropic-messages"
    r = Round("s", "the answer streaming", cwd)
    (cwd / GATES / "stop.armed").touch()
    with FakeProvider(r.turns()) as fake:
        runtime = Interactive(_main_parser().parse_args([*adhoc(fake, wire), "--yolo", "--cwd", str(cwd)]), cwd)
        config = runtime.app_config()
        fields = app_config_fields(config)
        try:
            async with Harness(None, columns=200, rows=40, **fields) as h:
                await h.wait_text("adhoc:fake-model", timeout=10)
                await h.type("cancelled at s\r")
                await _until(lambda: _ui_shows(r, h), r.boundary, h)
                await h.type("\x1b", pause=0.1)
                await _until((cwd / GATES / "stop.running").exists, "the turn_stopped hook runs", h)
                turn = h.app.session._turn.task
                assert not turn.done() and turn.cancelling() == 1
                await h.type("\x1b", pause=0.1)
                await _until(lambda: turn.cancelling() == 2, "the second Esc reaches the session", h)
                (cwd / GATES / "stop.armed").unlink()
                (cwd / GATES / "stop.go").touch()
                await h.wait_text("stopped by the user", timeout=10)
                await h.idle()
                r.release_all()
                fake.script.clear()
                fake.add(Turn(text="answer one"), Turn(text="answer two"))
                for which in ("one", "two"):
                    await h.type(f"next {which}\r")
                    await h.wait_text(f"answer {which}", timeout=10)
                    await h.idle()
                await h.type("/quit\r")
                await asyncio.wait_for(h.task, 10)
        finally:
            await runtime.close()
        check_round(r, "cancelled at s", cut_note=CUT_OFF_BY_USER, prompts=["cancelled at s", "next one", "next two"],
                    followed_by=request_with_prompt(fake, "next one"))
    assert_valid(fake.model_requests)


def test_sigint_twice_while_the_turn_stopped_hook_runs_ends_the_turn(
    tmp_path: Path, preloaded_ketch: Preloaded, isolated_home: Path
) -> None:
    cwd = workdir(tmp_path)
    install_hooks(isolated_home / "config")
    wire = "openai-responses"
    r = Round("s", "the answer streaming", cwd)
    (cwd / GATES / "stop.armed").touch()
    with FakeProvider(r.turns()) as fake:
        proc = preloaded_ketch.start(["-p", "cancelled at s", "--output-format", "stream-json", "--yolo", *adhoc(fake, wire)],
                               cwd, ketch_env(), tmp_path)
        try:
            proc.wait_for(lambda: headless_shows(r, proc.events()), r.boundary)
            proc.interrupt()
            proc.wait_for((cwd / GATES / "stop.running").exists, "the turn_stopped hook runs")
            proc.interrupt()
            (cwd / GATES / "stop.armed").unlink()
            (cwd / GATES / "stop.go").touch()
            code = proc.wait(10)
        finally:
            r.release_all()
            if proc.code is None:
                proc.wait(5)
        assert code == 130, proc.stderr()
        assert proc.events()[-1]["type"] == "turn_finished" and proc.events()[-1]["reason"] == "cancelled"
        fake.script.clear()
        fake.add(Turn(text="answer one"))
        done = run_ketch(["--continue", "-p", "next one", "--yolo", *adhoc(fake, wire)], cwd)
        assert done.code == 0, done.stderr
        check_round(r, "cancelled at s", cut_note=INTERRUPTED_MESSAGE, prompts=["cancelled at s", "next one"],
                    followed_by=request_with_prompt(fake, "next one"))
    assert_valid(fake.model_requests)
    assert not fake.rejections, fake.rejections

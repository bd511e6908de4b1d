"""/rewind in the inline UI against the real session: the picker lists the prompts, the
conversation goes back to before prompt 2 of 4, the input box holds prompt 2, and the next
request carries exactly the history before it (strict history rules on every wire)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import FakeProvider, ToolCall, Turn, user_texts
from kettle import adhoc, run_ketch
from test_interactive import running
from test_rewind import WIRES, assert_strict_history, make_repo


@pytest.fixture(autouse=True)
def checkpoints_on(isolated_home: Path) -> None:
    (isolated_home / "config" / "config.toml").write_text("titles = false\ncheckpoints = true\n")


def four_prompts(tmp_path: Path, wire: str) -> str:
    sid = ""
    for i, prompt in enumerate(["first", "second", "third", "fourth"]):
        script = [Turn(tool_calls=[ToolCall("write_file", {"path": f"f{i}.txt", "content": f"{i}\n"}, id=f"w{i}")]),
                  Turn(text=f"answer {i + 1}")]
        with FakeProvider(script) as fake:
            args = ["-p", prompt, "--yolo", "--output-format", "json", *adhoc(fake, wire)]
            run = run_ketch(args if i == 0 else ["--continue", *args], tmp_path)
        assert run.code == 0, run.stderr
        sid = json.loads(run.stdout)["session_id"]
    return sid


@pytest.fixture(params=WIRES)
def wire(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def session_of_four(tmp_path: Path, wire: str) -> str:
    """Four headless turns (a sync fixture: each runs its own event loop)."""
    make_repo(tmp_path)
    return four_prompts(tmp_path, wire)


async def test_rewinding_the_conversation_puts_prompt_2_back_in_the_input_box(tmp_path: Path, fake_provider: Any, wire: str,
                                                                             session_of_four: str) -> None:
    sid = session_of_four
    fake = fake_provider([Turn(text="fresh answer")])
    async with running(tmp_path, "--resume", sid, *adhoc(fake, wire)) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("/rewind\r")
        await h.wait_text("go back to before which prompt?")
        screen = h.sink.text()
        assert "1. first" in screen and "4. fourth" in screen and "f1.txt +1 -0" in screen
        await h.type("second")
        await h.type("\r")
        await h.wait_text("Restore conversation only")
        await h.type("conversation only\r")
        await h.wait_text("back to before prompt 2")
        assert h.app.buffer.text == "second"
        assert (tmp_path / "f1.txt").exists()  # the conversation only: the files stay
        await h.type(", reworded\r")
        await h.wait_text("fresh answer")
        await h.idle()
    [request] = fake.model_requests
    assert user_texts(request) == ["first", "second, reworded"]
    assert not fake.rejections
    assert_strict_history(request)


@pytest.mark.parametrize("wire", ["openai-chat"])
async def test_esc_twice_on_an_empty_prompt_opens_rewind_and_code_rewind_asks_with_the_diff(tmp_path: Path, fake_provider: Any,
                                                                                            session_of_four: str) -> None:
    sid = session_of_four
    fake = fake_provider([])
    async with running(tmp_path, "--resume", sid, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("\x1b")
        await h.wait_text("esc again to rewind")
        await h.type("\x1b")
        await h.wait_text("go back to before which prompt?")
        await h.type("third\r")
        await h.wait_text("Restore code only")
        await h.type("code only\r")
        await h.wait_text("Apply this rewind?")
        screen = h.sink.text()
        assert "f2.txt" in screen and "f3.txt" in screen and "-2" in screen  # the diff it will apply
        assert (tmp_path / "f3.txt").exists()  # nothing changed before the answer
        await h.type("Apply\r")
        await h.wait_text("Files: 2 deleted")
    assert not (tmp_path / "f2.txt").exists() and not (tmp_path / "f3.txt").exists()
    assert (tmp_path / "f1.txt").exists()
    assert fake.model_requests == []

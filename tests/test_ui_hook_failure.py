"""A hook that cannot run is a visible line in the inline UI (the real ``Interactive`` runtime on
a pyte screen), and the shell call it guards does not run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakeprovider import ToolCall, Turn
from kettle import adhoc, write_project_config
from test_ui_trust import running


async def test_a_missing_hook_program_is_shown_and_blocks_the_call(tmp_path: Path, fake_provider: Any) -> None:
    marker = tmp_path / "shell-ran"
    write_project_config(tmp_path, '[permissions]\nshell = "allow"\n'
                         '[[hooks.before_tool]]\ncommand = "/nonexistent/ketch-guard"\nmatcher = "shell"\n')
    fake = fake_provider([Turn(tool_calls=[ToolCall("shell", {"command": f"touch {marker}"})]), Turn(text="all finished")])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("adhoc:fake-model", timeout=10)
        await h.type("go\r")
        await h.wait_text("all finished", timeout=15)
        await h.idle()
        screen = " ".join(h.sink.text().split())
    assert not marker.exists()
    assert "the before_tool hook `/nonexistent/ketch-guard` could not run" in screen, screen
    assert "the shell call was blocked" in screen, screen

"""The trust question in the inline UI: the real ``Interactive`` runtime and session on a pyte
screen, against the fake provider. What the repository's config adds is listed before any
session exists; the answer decides whether its hook (which leaves a marker) runs, is stored,
and a changed config is asked about again."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fakeprovider import Turn
from kettle import adhoc, write_project_config
from prompt_toolkit.input import create_pipe_input
from uifakes import Harness, app_config_fields, make_output

import ketch.core.session  # noqa: F401
from ketch.frontends.cli import _main_parser
from ketch.frontends.interactive import Interactive
from ketch.ui.controller import KetchApp


def parse(tmp_path: Path, *argv: str) -> argparse.Namespace:
    return _main_parser().parse_args([*argv, "--cwd", str(tmp_path)])


class TrustHarness(Harness):
    """The harness, entered as soon as the first frame is drawn (the session may wait for trust)."""

    async def __aenter__(self) -> TrustHarness:
        self._pipe_cm = create_pipe_input()
        self.pipe = self._pipe_cm.__enter__()
        self.app = KetchApp(self.config, input=self.pipe, output=make_output(self.sink))
        self.task = asyncio.ensure_future(self.app.run())
        await self.wait_for(lambda: self.app is not None and self.app.app.render_counter > 0)
        return self


@asynccontextmanager
async def running(tmp_path: Path, *argv: str) -> AsyncIterator[tuple[TrustHarness, Interactive]]:
    runtime = Interactive(parse(tmp_path, *argv), tmp_path)
    config = runtime.app_config()
    fields = app_config_fields(config, "trust_question")
    try:
        async with TrustHarness(None, columns=120, rows=30, **fields) as h:
            yield h, runtime
    finally:
        await runtime.close()


def _config(marker: Path) -> str:
    return f'[permissions]\nshell = "allow"\n\n[[hooks.prompt_submitted]]\ncommand = "touch {marker}"\n'


async def _prompt_once(h: TrustHarness, answer: str) -> None:
    await h.type("hello\r")
    await h.wait_text(answer, timeout=10)
    await h.idle()


def _unwrapped(text: str) -> str:
    """``text`` without whitespace: a path longer than the screen is wrapped onto a new line."""
    return "".join(text.split())


async def test_the_question_lists_what_the_repo_adds_and_no_keeps_it_out(tmp_path: Path, fake_provider: Any) -> None:
    marker = tmp_path / "hook-ran"
    write_project_config(tmp_path, _config(marker), trust=False)
    fake = fake_provider([Turn(text="first answer"), Turn(text="second answer")])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, runtime):
        await h.wait_text("is not trusted yet", timeout=10)
        screen = h.sink.text()
        assert "allow shell" in screen
        assert _unwrapped(f"hook prompt_submitted: runs touch {marker}") in _unwrapped(screen)  # long paths wrap
        assert runtime.session is None  # nothing is built (nothing the repo names runs) before the answer
        await h.type("n")
        await h.wait_text("adhoc:fake-model", timeout=10)
        await _prompt_once(h, "first answer")
    assert not marker.exists()
    assert fake.model_requests, "the session never ran"

    # the answer was stored: the next start does not ask again, and still keeps the hook out
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("adhoc:fake-model", timeout=10)
        assert "not trusted yet" not in h.sink.text()
        await _prompt_once(h, "second answer")
    assert not marker.exists()


async def test_yes_applies_it_and_a_changed_config_is_asked_again(tmp_path: Path, fake_provider: Any) -> None:
    marker = tmp_path / "hook-ran"
    write_project_config(tmp_path, _config(marker), trust=False)
    fake = fake_provider([Turn(text="first answer"), Turn(text="second answer")])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("is not trusted yet", timeout=10)
        await h.type("y")
        await h.wait_text("adhoc:fake-model", timeout=10)
        await _prompt_once(h, "first answer")
    assert marker.exists()
    marker.unlink()

    second = tmp_path / "second-ran"
    write_project_config(tmp_path, _config(marker) + f'\n[[hooks.prompt_submitted]]\ncommand = "touch {second}"\n', trust=False)
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("changed since you trusted it", timeout=10)
        # the overlay may still be drawing; a long path wraps at the screen's edge
        await h.wait_for(lambda: _unwrapped(f"runs touch {second}") in _unwrapped(h.sink.text()), timeout=10)
        await h.type("\x1b")  # escape: not trusted
        await h.wait_text("adhoc:fake-model", timeout=10)
        await _prompt_once(h, "second answer")
    assert not marker.exists() and not second.exists()


async def test_a_connection_change_is_marked(tmp_path: Path, fake_provider: Any) -> None:
    write_project_config(tmp_path, '[connections.openai]\nbase_url = "http://127.0.0.1:9/v1"\n', trust=False)
    fake = fake_provider([])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("is not trusted yet", timeout=10)
        screen = h.sink.text()
        assert "⚠ connection openai: base_url = 'http://127.0.0.1:9/v1' (sends your key OPENAI_API_KEY" in screen
        await h.type("n")
        await h.wait_text("adhoc:fake-model", timeout=10)

"""What a session start does not do, so that ``bench/startup.py``'s gains cannot silently regress.

The interactive session is built in a clean interpreter on each wire, the way ``ketch`` builds
it (``Interactive.build_session``: the preload thread, then the session), and ``sys.modules`` is
listed: no provider SDK and none of the modules made lazy (psutil: process trees; pathspec:
ignore files, read when a tool walks; Rich's Markdown and Pygments' lexers: the renderer's
warm-up; click, Rich's console and Pygments: httpx's command-line client, kept out by
``wire.sdk_pins``). Prompt history opens the default store
without pydantic, and no cyclic-collector pass runs from the start (paused as ``cli.main``
pauses it) until the session is built, when ``Interactive`` turns it on again. In the app, the renderer's warm-up and the ``@`` file walk wait for the
session: CPU work beside its build would only delay it (the GIL is shared).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from fakeprovider import FakeProvider
from kettle import adhoc, ketch_env
from prompt_toolkit.input import create_pipe_input
from uifakes import Harness, make_output

from ketch.ui.controller import KetchApp

WIRES = ("openai-chat", "openai-responses", "anthropic-messages", "gemini")
NOT_AT_START = ("openai", "anthropic", "google.genai", "groq", "mistralai", "pydantic_ai.models.openai",
                "pydantic_ai.models.anthropic", "pydantic_ai.models.google", "psutil", "rich.markdown",
                "pygments.lexers.python", "pathspec",
                "click", "rich.console", "pygments.lexers")
"""Modules (and their submodules) a session start must not import."""

BUILD = """
import gc
from ketch.context.collector import pause_collector
resume = pause_collector()  # as cli.main does, before the configuration's imports
passes = []
gc.callbacks.append(lambda phase, info: passes.append(info["generation"]) if phase == "start" else None)

import asyncio, json, sys
from pathlib import Path
from ketch.frontends.cli import _main_parser
from ketch.frontends.interactive import Interactive

runtime = Interactive(_main_parser().parse_args(sys.argv[1:]), Path.cwd(), resume)
history = runtime.load_history()
before = sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_ai'))

async def main():
    session = await runtime.build_session()
    gc.callbacks.clear()
    status = session.status()
    await runtime.close()
    return status

status = asyncio.run(main())
banned = {banned!r}
loaded = sorted(m for m in sys.modules if sys.modules[m] is not None and any(m == b or m.startswith(b + '.') for b in banned))
print(json.dumps({{"history": history, "before": before, "model": status.model, "loaded": loaded,
                  "passes": passes, "collecting": gc.isenabled()}}))
"""


@pytest.mark.parametrize("wire", WIRES)
def test_an_interactive_session_starts_without_the_lazy_modules(wire: str, tmp_path: Path) -> None:
    (tmp_path / "project" / ".git").mkdir(parents=True)
    (tmp_path / "project" / ".gitignore").write_text("*.log\n")
    env = ketch_env({"KETCH_CONFIG_DIR": str(tmp_path / "config"), "KETCH_DATA_DIR": str(tmp_path / "data"),
                     "GEMINI_API_KEY": "test"})
    with FakeProvider() as fake:
        out = subprocess.run([sys.executable, "-c", BUILD.format(banned=NOT_AT_START), *adhoc(fake, wire)],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path / "project", env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["history"] == []
    assert result["before"] == [], "opening the prompt history imported pydantic"
    assert "fake-model" in result["model"]
    assert result["loaded"] == [], f"imported at session start on {wire}: {result['loaded']}"
    assert (tmp_path / "data" / "ketch.db").is_file(), "the store was opened where KETCH_DATA_DIR says"
    assert result["passes"] == [], "the cyclic collector ran while the app started and the session was built"
    assert result["collecting"] is True, "the collector is back on once the session is ready"


@pytest.mark.asyncio
async def test_the_file_walk_and_the_renderer_warm_up_wait_for_the_session() -> None:
    """While the session is being built (its factory held here) the app has started neither the
    ``@`` file walk nor Rich's warm-up; once it is ready, both run."""
    entered, release = asyncio.Event(), asyncio.Event()
    walked: list[str] = []

    def candidates() -> list[str]:
        walked.append("walk")
        return ["README.md"]

    harness = Harness(candidates=candidates)

    async def held_session() -> object:
        entered.set()
        await release.wait()
        return harness.session

    harness.config.session_factory = held_session
    with create_pipe_input() as pipe:
        app = KetchApp(harness.config, input=pipe, output=make_output(harness.sink))
        task = asyncio.ensure_future(app.run())
        await asyncio.wait_for(entered.wait(), 30)
        for _ in range(20):  # the loop runs whatever the start of the app scheduled beside the factory
            await asyncio.sleep(0)
        started = {t.get_coro().__name__ for t in app._tasks}
        assert "_load_session" in started
        assert not started & {"_load_files", "_warm_renderer"}, started
        assert walked == [] and app.renderer._console is None
        release.set()
        await harness.wait_for(lambda: walked == ["walk"] and app.renderer._console is not None)
        app.exit(0)
        await asyncio.wait_for(task, 10)

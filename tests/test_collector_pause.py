"""``context.collector.pause_collector``: a pause of the cyclic collector that spans an
interactive start, ended once (by ``Interactive`` when the session is built, or when
``run_interactive`` returns), and never turning on a collector the process had off."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

from kettle import ketch_env

from ketch.context.collector import collector_paused, pause_collector


def test_the_pause_ends_once_and_moves_what_was_built_to_the_oldest_generation() -> None:
    assert gc.isenabled()
    resume = pause_collector()
    try:
        assert not gc.isenabled()
        built = [[i] for i in range(2_000)]
        with collector_paused():  # a nested pause leaves the outer one to end it
            pass
        assert not gc.isenabled()
    finally:
        resume()
    assert gc.isenabled()
    assert gc.get_count()[0] < 50, "what was built during the pause is still young"
    assert any(built[0] is o for o in gc.get_objects(generation=2))
    gc.disable()
    try:
        resume()  # ended already: does not turn the collector on again
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_process_with_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    try:
        resume = pause_collector()
        resume()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_interactive_start_without_a_terminal_leaves_the_collector_on(tmp_path: Path) -> None:
    """``cli.main`` pauses the collector before the configuration's imports; a start that ends
    early (no terminal on stdin) ends the pause too."""
    script = ("import gc, json\nfrom ketch.frontends.cli import main\ncode = main([])\n"
              "print(json.dumps([code, gc.isenabled()]))")
    env = ketch_env({"KETCH_CONFIG_DIR": str(tmp_path / "config"), "KETCH_DATA_DIR": str(tmp_path / "data")})
    out = subprocess.run([sys.executable, "-c", script], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=60, cwd=tmp_path, env=env)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [2, True], out.stderr[-2000:]
    assert "needs a terminal" in out.stderr

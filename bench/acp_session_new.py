"""How long ``ketch acp`` takes to answer ``session/new`` after ``initialize``, against a
provider that never answers (a socket that accepts and says nothing).

Starts ``ketch acp`` as an editor does (the official Python SDK's client, real pipes), then
times initialize, the first session/new (the process still warming up) and a second one, RUNS
times, printing the medians. A calibration loop is timed too, so a busy machine shows.
Target: session/new within 0.3 s of initialize. Run: ``.venv/bin/python bench/acp_session_new.py``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RUNS = 5


class Editor:
    async def session_update(self, *_: Any, **__: Any) -> None:
        pass

    def on_connect(self, conn: Any) -> None:
        pass


def calibrate() -> float:
    start = time.perf_counter()
    total = 0
    for i in range(2_000_000):
        total += i
    return time.perf_counter() - start


async def one(silent_url: str, env: dict[str, str], cwd: str) -> tuple[float, float, float]:
    from acp import PROTOCOL_VERSION, spawn_agent_process

    async with spawn_agent_process(Editor(), sys.executable, "-m", "ketch", "acp", "--base-url", silent_url,
                                   "--wire", "openai-chat", "--model", "m", env=env, cwd=cwd) as (conn, _process):
        start = time.perf_counter()
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        initialized = time.perf_counter()
        await conn.new_session(cwd=cwd, mcp_servers=[])
        first = time.perf_counter()
        await conn.new_session(cwd=cwd, mcp_servers=[])
        second = time.perf_counter()
    return initialized - start, first - initialized, second - first


def main() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # connections are accepted by the kernel and never answered
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(KETCH_CONFIG_DIR=f"{home}/config", KETCH_DATA_DIR=f"{home}/data", HOME=home)
        Path(f"{home}/config").mkdir()
        Path(f"{home}/config/config.toml").write_text("titles = false\ncheckpoints = false\n")
        work = Path(home) / "work"
        work.mkdir()
        print(f"calibration loop: {calibrate() * 1000:.0f} ms")
        rows = [asyncio.run(one(url, env, str(work))) for _ in range(RUNS)]
    for label, values in zip(("initialize", "session/new (first)", "session/new (second)"), zip(*rows, strict=True), strict=True):
        print(f"{label:22} median {statistics.median(values) * 1000:7.0f} ms  max {max(values) * 1000:7.0f} ms")


if __name__ == "__main__":
    main()

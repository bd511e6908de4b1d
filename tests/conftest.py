"""Shared fixtures: an isolated home for every test, the fake provider, running ketch."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/ helpers: fakeprovider, kettle
sys.path.insert(0, str(Path(__file__).parent.parent / "src"))

os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")

from fakeprovider import fake_provider  # noqa: E402,F401  (fixture re-export)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads or writes the real user config, data dir or keys."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("KETCH_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("KETCH_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("HOME", str(home))
    # Titles are an extra model request after the first turn; scripted tests turn them
    # off here, and the title tests turn them on in their own project config.
    (home / "config").mkdir()
    # Checkpoints likewise (a private git store per workspace): tests/test_rewind.py turns them on.
    (home / "config" / "config.toml").write_text("titles = false\ncheckpoints = false\n")
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY", "KETCH_MODEL"):
        monkeypatch.delenv(var, raising=False)
    return home


_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: object) -> object:
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and self.family in (socket.AF_INET, socket.AF_INET6):
        if not (host.startswith("127.") or host in ("::1", "localhost")):
            raise OSError(f"test tried to reach {host}: tests stay on 127.0.0.1")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the network out: any connect to a non-loopback address fails the call."""
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)


@pytest.fixture(scope="session")
def preloaded_ketch():  # noqa: ANN201
    """The interpreter that forks real ketch processes without paying the SDK imports
    (``ketch_processes.Preloaded``), started once for the tests that ask for it."""
    from ketch_processes import Preloaded

    server = Preloaded()
    yield server
    server.close()

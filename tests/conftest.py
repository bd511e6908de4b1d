"""Shared fixtures: an isolated home for every test, the fake provider, running ketch.

Also the suite's running rules: every test runs beside others (pytest-xdist, ``-n`` in
pyproject's addopts), so each gets its own HOME, config, data and XDG directories here;
``--shuffle SEED`` runs the tests in a seeded random order (to show no test depends on
another's leftovers); with ``CI=true`` a skipped test is a failure (CI installs every tool
the suite needs, so a skip there means a test silently stopped running)."""

from __future__ import annotations

import os
import random
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/ helpers: fakeprovider, kettle
sys.path.insert(0, str(Path(__file__).parent.parent / "src"))

os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")

from fakeprovider import fake_provider  # noqa: E402,F401  (fixture re-export)


LSP_OFF = "[lsp]\nenabled = false\n"
"""The user config's last table in every test (``isolated_home``)."""


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test reads or writes the real user config, data dir or keys."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("KETCH_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("KETCH_DATA_DIR", str(home / "data"))
    monkeypatch.setenv("HOME", str(home))
    # Whatever reads the XDG base directories (platformdirs, git, tools a test runs) gets this
    # test's own too: tests run beside each other (pytest-xdist) and must share no directory.
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
                     ("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".local/state")):
        monkeypatch.setenv(var, str(home / sub))
    # Titles are an extra model request after the first turn; scripted tests turn them
    # off here, and the title tests turn them on in their own project config.
    (home / "config").mkdir()
    # Checkpoints likewise (a private git store per workspace): tests/test_rewind.py turns them on.
    # Language servers too (pylsp from the test extra is on PATH): tests/test_lsp_* turn them on.
    (home / "config" / "config.toml").write_text("titles = false\ncheckpoints = false\n" + LSP_OFF)
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


@pytest.fixture(autouse=True, scope="session")
def extension_table_checks() -> None:
    """What ``cli.main`` does first: hand the config its [hooks]/[permissions]/[guards] checks,
    for the tests that load a config without going through the command line."""
    from ketch.extensions import table_checks

    table_checks.install()


@pytest.fixture(autouse=True, scope="session")
def tool_schemas_once() -> None:
    """Each tool function's pydantic-ai schema is built once per worker (``schema_memo``)."""
    from schema_memo import install

    install()


@pytest.fixture(scope="session")
def preloaded_ketch():  # noqa: ANN201
    """The interpreter that forks real ketch processes without paying the imports
    (``ketch_processes.Preloaded``), started once for the tests that ask for it."""
    from ketch_processes import Preloaded

    server = Preloaded()
    yield server
    server.close()


@pytest.fixture
def subreaper():  # noqa: ANN201
    """This worker adopts the processes orphaned under it during the test (a child subreaper),
    so ``isolation.own_processes()`` finds a ``(sleep 9 &)`` that a command left behind without
    scanning every process on the machine. Afterwards the adopted orphans that have exited are
    collected and the worker stops adopting."""
    import psutil
    from isolation import become_subreaper, stop_subreaping

    before = {child.pid for child in psutil.Process().children()}
    become_subreaper()
    try:
        yield
    finally:
        stop_subreaping()
        for child in psutil.Process().children():
            if child.pid in before:
                continue
            try:
                if child.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(child.pid, os.WNOHANG)
            except (psutil.NoSuchProcess, ChildProcessError):
                continue


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (pyproject's addopts): two workers per usable core. Much of the suite waits on
    the processes it runs (ketch, bash, git, tmux), so one worker per core leaves the cores
    part idle; ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still chooses (xdist reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return 2 * len(os.sched_getaffinity(0))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shuffle", metavar="SEED", type=int, default=None,
                     help="run the tests in a random order drawn from SEED (the same in every xdist worker)")


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("KETCH_TEST_CPU") == "1":  # per-test CPU in the summary (tests/cpu_report.py)
        from cpu_report import CpuReport

        config.pluginmanager.register(CpuReport(), "ketch-cpu-report")
    # pytest has read PYTEST_ADDOPTS (e.g. a --shuffle seed) by now; the pytest a test's ketch runs
    # in its workspace must not get this suite's options
    os.environ.pop("PYTEST_ADDOPTS", None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seed = config.getoption("--shuffle")
    if seed is not None:
        random.Random(seed).shuffle(items)


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--shuffle")
    return None if seed is None else f"shuffled test order: --shuffle {seed}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # noqa: ANN201
    """On CI (CI=true) a skip fails the test: every tool the suite needs is installed there."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") == "true" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped on CI, where nothing may skip: {reason}"

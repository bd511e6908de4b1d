"""Per-test CPU, for making the suite cheaper (``KETCH_TEST_CPU=1 pytest ...``; off otherwise).

The suite is bound by CPU on a 2-core machine, not by waiting, so a test's cost is the CPU it
burns: the worker's own (setup, call and teardown), the processes it ran and reaped (bash, git,
``python -m ketch``), and the processes that live on between tests and do work for it (the
preloaded interpreter that forks ketch children and reaps them, a fake provider's server): for
those, the growth of their own and their reaped children's CPU over the test, read from
``/proc``. A process that outlives the test and is reaped by nobody here is not counted.
The terminal summary lists the top 40 tests and the total per file; the figures travel from
xdist workers as a user property of the teardown report.
"""

from __future__ import annotations

import os
import resource
from collections import defaultdict
from pathlib import Path

import pytest

_TICK = os.sysconf("SC_CLK_TCK")


def _own() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def _descendants() -> dict[int, float]:
    """Each live descendant's CPU, its reaped children's included (utime+stime+cutime+cstime)."""
    children: dict[int, list[int]] = defaultdict(list)
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children[int(fields[1])].append(int(entry.name))
        times[int(entry.name)] = sum(int(f) for f in fields[11:15]) / _TICK
    found: dict[int, float] = {}
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        if pid in times:
            found[pid] = times[pid]
        todo.extend(children.get(pid, []))
    return found


class CpuReport:
    def __init__(self) -> None:
        self._start: dict[str, tuple[float, dict[int, float]]] = {}
        self.per_test: dict[str, float] = {}
        self.pythons = 0
        """Python interpreters the worker started (``subprocess.Popen`` of ``sys.executable``) in
        the current test: each pays its imports, about 1 CPU-s for ``python -m ketch``."""
        import subprocess
        import sys

        popen_init = subprocess.Popen.__init__
        report = self

        def counting_init(popen, args, *rest, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            first = args[0] if isinstance(args, (list, tuple)) and args else args
            if isinstance(first, (str, os.PathLike)) and os.fspath(first) == sys.executable:
                report.pythons += 1
            return popen_init(popen, args, *rest, **kwargs)

        subprocess.Popen.__init__ = counting_init

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self._start[item.nodeid] = (_own(), _descendants())
        self.pythons = 0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):  # noqa: ANN201
        outcome = yield
        if call.when != "teardown" or item.nodeid not in self._start:
            return
        own0, desc0 = self._start.pop(item.nodeid)
        desc1 = _descendants()
        # a descendant that was there before the test is counted by its growth, a new one whole;
        # whatever was reaped (by the worker: RUSAGE_CHILDREN; by a descendant: its cutime) comes
        # with its whole life, so the part before the test of one that ended (say the preloaded
        # interpreter closed in the last test's teardown) is taken off
        spent = (_own() - own0 + sum(t - desc0.get(pid, 0.0) for pid, t in desc1.items())
                 - sum(t for pid, t in desc0.items() if pid not in desc1))
        outcome.get_result().user_properties.append(("cpu_s", spent))
        if os.environ.get("KETCH_TEST_CPU_LEFT"):  # what lives on after the test: threads, descendants
            import threading

            left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
            with open(os.environ["KETCH_TEST_CPU_LEFT"], "a", encoding="utf-8") as sink:
                sink.write(f"{spent:.2f}\t{item.nodeid}\tpythons={self.pythons}\tthreads={left}\tdescendants={sorted(desc1.items())}\n")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            for key, value in report.user_properties:
                if key == "cpu_s":
                    self.per_test[report.nodeid] = value

    def pytest_terminal_summary(self, terminalreporter) -> None:  # noqa: ANN001
        if not self.per_test:
            return
        write = terminalreporter.write_line
        terminalreporter.section("CPU per test (KETCH_TEST_CPU)")
        for nodeid, cpu in sorted(self.per_test.items(), key=lambda kv: -kv[1])[:40]:
            write(f"{cpu:8.2f}s  {nodeid}")
        per_file: dict[str, float] = defaultdict(float)
        count: dict[str, int] = defaultdict(int)
        for nodeid, cpu in self.per_test.items():
            per_file[nodeid.split("::")[0]] += cpu
            count[nodeid.split("::")[0]] += 1
        terminalreporter.section("CPU per file")
        for name, cpu in sorted(per_file.items(), key=lambda kv: -kv[1])[:60]:
            write(f"{cpu:8.2f}s  {count[name]:5d} tests  {name}")
        write(f"{sum(self.per_test.values()):8.2f}s  {len(self.per_test):5d} tests  in tests (collection and worker start not included)")
        out = os.environ.get("KETCH_TEST_CPU_OUT")
        if out:
            with open(out, "a", encoding="utf-8") as sink:
                for nodeid, cpu in self.per_test.items():
                    sink.write(f"{cpu:.3f}\t{nodeid}\n")

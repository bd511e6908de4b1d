"""A session's services are built once by the composition root and never reassigned.

``frontends/assemble.py`` builds the store, gate, hooks, MCP hub, sandbox, checkpoints,
background jobs, key ring, live search, lock claim and closers first and hands them to ``Session``
as one frozen ``core.session_services.SessionServices``; the session reads each through a
read-only attribute. Checked three ways: the dataclass refuses assignment; a built session
refuses ``session.<service> = …`` (and shows the very objects it was given); and no module of
ketch assigns a service onto a session object or appends to its closers (read from the source).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import re
from pathlib import Path

import pytest
from fakeprovider import FakeProvider, Turn

from ketch.core.session_services import SessionServices

SRC = Path(__file__).resolve().parents[1] / "src" / "ketch"
SERVICES = tuple(f.name for f in dataclasses.fields(SessionServices))
SESSION_NAME = re.compile(r"(^|_)(session|child|parent)$")


def _args(tmp_path: Path, base_url: str) -> argparse.Namespace:
    return argparse.Namespace(cwd=str(tmp_path), base_url=base_url, wire="openai-chat", model="fake-model", yolo=False,
                              sandbox="full-access", approval=None)


def test_the_services_refuse_assignment() -> None:
    services = SessionServices(gate=object())
    for name in SERVICES:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(services, name, None)


async def test_a_built_session_holds_the_services_it_was_given_and_refuses_new_ones(tmp_path: Path, isolated_home: Path) -> None:
    from ketch.frontends.assemble import build_session

    with FakeProvider([Turn(text="ok")]) as fake:
        session = await build_session(_args(tmp_path, fake.base_url), interactive=False)
        try:
            services = session.services
            assert services.store is not None and services.gate is not None and services.sandbox is not None
            assert services.background is session.background_jobs
            assert len(services.closers) >= 5 and isinstance(services.closers, tuple)
            for name in SERVICES:
                if hasattr(type(session), name):  # the session's read-only view of each service it exposes
                    assert getattr(session, name) is getattr(services, name), name
                    with pytest.raises(AttributeError):
                        setattr(session, name, object())
            assert {"store", "gate", "hooks", "mcp_hub", "sandbox", "checkpoints", "key_ring", "closers"} <= {
                n for n in SERVICES if hasattr(type(session), n)}
            async for _ in session.run_turn("hi"):
                pass
            assert session.store.list_sessions(str(tmp_path))  # the store it was given is the one it writes
        finally:
            await session.aclose()
            await session.aclose()  # the closers run once: a second close is a no-op, not a double release


def _assigned_services(source: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each assignment of a service onto a session-named object, or change of its closers."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and t.attr in SERVICES and _session_named(t.value):
                    found.append((node.lineno, ast.unparse(t)))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend", "insert")
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "closers"):
            found.append((node.lineno, ast.unparse(node.func)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and node.args:
            if _session_named(node.args[0]) and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in SERVICES:
                found.append((node.lineno, ast.unparse(node)))
    return found


def _session_named(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return bool(SESSION_NAME.search(node.id))
    return isinstance(node, ast.Attribute) and bool(SESSION_NAME.search(node.attr))


def test_no_module_assigns_a_service_onto_a_session() -> None:
    found = [f"{p.relative_to(SRC)}:{line}: {code}" for p in sorted(SRC.rglob("*.py")) for line, code in _assigned_services(p.read_text())]
    assert not found, "services set after construction:\n" + "\n".join(found)


@pytest.mark.parametrize("snippet", [
    # what build_session and the subagent factory did before the services were built first
    "session.key_ring = ring",
    "session.hooks = hooks",
    "session.web_search, session.live_search = search, live_search",
    "session.mcp_hub = hub",
    "session.closers.append(store.close)",
    "session.claim = locks.claim",
    "session.sandbox = sandbox",
    "session.checkpoints = checkpoints",
    "child.key_ring = parent.key_ring",
    "child.hooks = ChildHooks(parent.hooks)",
    "self.session.store = store",
    "setattr(session, 'gate', gate)",
])
def test_the_scan_sees_each_old_assignment(snippet: str) -> None:
    assert _assigned_services(snippet), snippet

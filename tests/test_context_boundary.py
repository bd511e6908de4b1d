"""``context``'s side of the session seam: compaction, the request retries and the small-window
profile see a session only through ``context.session_view.SessionView``, the small view the
session hands them (``core.context_view``), never through the session's private attributes.

Read from the source: no module of ``ketch/context`` (nor ``providers/wiring.py``, which attaches
the small-window profile) reads, calls or sets a private attribute (``x._name``) of anything but
itself, nor names one through ``getattr``/``setattr``. And at run time: what compaction is handed
by a real session is a ``SessionView``, whose reads follow the session (``/clear`` changes the id).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from ketch.protocol import operations as op

SRC = Path(__file__).resolve().parents[1] / "src" / "ketch"
SCANNED = sorted((SRC / "context").glob("*.py")) + [SRC / "providers" / "wiring.py"]


def _privates(source: str) -> list[tuple[int, str]]:
    """``(line, code)`` of each private attribute of another object that ``source`` reaches."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr", "hasattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and node.args[1].value.startswith("_") and not node.args[1].value.startswith("__")):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_context_reaches_no_private_attribute_of_a_session() -> None:
    violations = [f"{path.relative_to(SRC)}:{line}: {code}" for path in SCANNED for line, code in _privates(path.read_text())]
    assert not violations, "context reaches into another object's privates:\n" + "\n".join(violations)


@pytest.mark.parametrize("snippet", [
    "turn = session._turn",  # the reads this test replaced (compaction, request_retries)
    "self.session._emit(event)",
    "session._persist(list(messages))",
    "defs = [session._tool_defs[n] for n in names]",
    "await session._ask('', why, choices)",
    "getattr(session, '_turn', None)",
    "self.session._retried = True",
])
def test_the_scan_sees_each_old_reach(snippet: str) -> None:
    assert _privates(snippet), snippet


def test_the_scan_lets_an_object_use_its_own_privates() -> None:
    assert not _privates("self._retried = key\nif self._squeeze_next is not None: pass\nx.__class__")


async def test_the_view_a_real_session_hands_over_follows_the_session(tmp_path: Path, isolated_home: Path) -> None:
    from fakeprovider import FakeProvider, Turn

    from ketch.context.session_view import SessionView
    from ketch.frontends.assemble import build_session
    from ketch.protocol import events as ev

    args = argparse.Namespace(cwd=str(tmp_path), base_url="", wire="openai-chat", model="fake-model", yolo=False,
                              sandbox="full-access", approval=None)
    with FakeProvider([Turn(text="one"), Turn(text="two")]) as fake:
        args.base_url = fake.base_url
        session = await build_session(args, interactive=False)
        try:
            view = session.context_view
            assert isinstance(view, SessionView) and view is not session
            assert view.turn_id_now() is None and not view.first_compaction()  # between turns: no turn to mark
            turn_ids = set()
            async for event in session.run_turn("hi"):
                turn_ids.add(event.turn_id)
                if isinstance(event, ev.TurnStarted):
                    assert view.turn_id_now() == event.turn_id
                    assert view.first_compaction() and not view.first_compaction()  # once a turn
            assert view.messages is session.messages and len(view.messages) == 2
            session.apply(op.Clear())
            assert view.session_id == session.session_id and view.messages == []
        finally:
            await session.aclose()

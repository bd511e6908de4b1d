"""The front ends' side of the seam, read from the source: they see a session through its
public calls, the events it yields and the operations they send it (``Session.apply``).

A front end (``ketch.frontends``, ``ketch.ui``; the ACP server and the slash commands live in
the first) may not
- read or call a private attribute of a session (``session._persist``, ``self.session._x``,
  ``getattr(session, "_x")``);
- change a session's state: assign or delete an attribute anywhere beneath a session
  (``session.web_search = …``, ``session.live_search.current = …``), change a container it
  holds (``session.messages.append``), or reach for a writing method of its store
  (``session.store.set_pending``); what /model, /agent, /clear, /fork … change goes through
  ``Session.apply(operation)``;
- import the modules the session is made of (its mixins), nor the session's own module.

The composition root builds sessions: ``build_session`` in ``frontends/assemble.py`` (it builds
the services first and hands them over, ``tests/test_session_services.py``; the rest of that
file is scanned like any front end) and the two functions of ``frontends/acp_sessions.py`` that build an editor's session (they
add the editor's file system and terminal to the tools' extras, and keep a new session's row
listed). A session is recognised by name: an expression named ``session`` or ``*_session``
(a variable, ``self.session``, ``self._session``, ``pickers.session``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
FRONTENDS = ("ketch/frontends", "ketch/ui")
COMPOSITION = {"ketch/frontends/assemble.py": {"build_session"}, "ketch/frontends/acp_sessions.py": {"_build", "_build_new", "warm_imports"}}
"""Files (and, where given, the functions in them) that build sessions."""
SESSION_NAME = re.compile(r"(^|_)session$")
STORE_WRITERS = frozenset({
    "create_session", "reserve_session", "keep_reserved", "set_title", "set_settings", "touch", "fork",
    "delete_session", "replace_history", "set_pending", "append_messages", "append_events", "transaction",
})
"""The store's methods that write (``state/store.py`` and its history mixins)."""
MUTATORS = frozenset({"append", "extend", "insert", "pop", "popitem", "clear", "remove", "update", "setdefault",
                      "add", "discard", "sort", "reverse"})


def _session_modules() -> tuple[str, set[str]]:
    """The module defining ``Session`` and the ketch modules defining its bases (its mixins)."""
    from ketch.core.session import Session

    bases = {c.__module__ for c in Session.__mro__[1:] if c.__module__.startswith("ketch.")}
    assert bases, "Session has no ketch mixins any more: update this test's reading of it"
    return Session.__module__, bases


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    rule: str
    code: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.code}"


def _is_session(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return bool(SESSION_NAME.search(node.id))
    if isinstance(node, ast.Attribute):
        return bool(SESSION_NAME.search(node.attr))
    return False


def _beneath_session(node: ast.AST) -> bool:
    """Whether ``node`` is a session or something reached from one (``session.a.b[k]``)."""
    while True:
        if _is_session(node):
            return True
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        else:
            return False


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


class _Scanner(ast.NodeVisitor):
    def __init__(self, rel: str, exempt: set[str] | None | bool, session_module: str, internals: set[str]) -> None:
        self.rel, self.session_module, self.internals = rel, session_module, internals
        self.exempt_file = exempt is None
        self.exempt_functions = exempt if isinstance(exempt, set) else set()
        self.functions: list[str] = []
        self.found: list[Violation] = []
        self.session_reads = 0

    def _composing(self) -> bool:
        return self.exempt_file or any(f in self.exempt_functions for f in self.functions)

    def _flag(self, node: ast.AST, rule: str, code: str) -> None:
        self.found.append(Violation(self.rel, getattr(node, "lineno", 0), rule, code))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _is_session(node.value):
            self.session_reads += 1
            if _private(node.attr):
                self._flag(node, "private attribute", ast.unparse(node))
        if isinstance(node.ctx, (ast.Store, ast.Del)) and _beneath_session(node.value) and not self._composing():
            self._flag(node, "sets", ast.unparse(node))
        if (node.attr in STORE_WRITERS and isinstance(node.value, ast.Attribute) and node.value.attr == "store"
                and _beneath_session(node.value.value) and not self._composing()):
            self._flag(node, "writes the session's store", ast.unparse(node))
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)) and _beneath_session(node.value) and not self._composing():
            self._flag(node, "sets", ast.unparse(node))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2:
            target, name = node.args[0], node.args[1]
            if _beneath_session(target):
                if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value):
                    self._flag(node, "private attribute by name", ast.unparse(node))
                elif func.id in ("setattr", "delattr") and not self._composing():
                    self._flag(node, "sets", ast.unparse(node))
        if (isinstance(func, ast.Attribute) and func.attr in MUTATORS and isinstance(func.value, (ast.Attribute, ast.Subscript))
                and _beneath_session(func.value) and not self._composing()):
            self._flag(node, "changes what the session holds", ast.unparse(func))
        self.generic_visit(node)

    def _imported(self, node: ast.AST, module: str) -> None:
        if module in self.internals:
            self._flag(node, "imports the session's internals", module)
        elif module == self.session_module and not (self.exempt_file or self.exempt_functions):
            self._flag(node, "imports the session's module", f"{module} (outside the composition root)")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._imported(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self._imported(node, module)
        for alias in node.names:  # `from ketch.core import session_persist`
            self._imported(node, f"{module}.{alias.name}")


def scan(path: Path, rel: str) -> tuple[list[Violation], int]:
    """The boundary violations in one front-end file, and how many session attributes it reads."""
    session_module, internals = _session_modules()
    exempt: set[str] | None | bool = COMPOSITION[rel] if rel in COMPOSITION else False
    scanner = _Scanner(rel, exempt, session_module, internals)
    scanner.visit(ast.parse(path.read_text(), str(path)))
    return scanner.found, scanner.session_reads


def _frontend_files() -> list[tuple[Path, str]]:
    files = [(p, p.relative_to(SRC).as_posix()) for package in FRONTENDS for p in sorted((SRC / package).rglob("*.py"))]
    assert len(files) > 20, files  # the packages are where this test thinks they are
    return files


def test_no_front_end_reaches_into_a_session() -> None:
    found: list[Violation] = []
    reads = 0
    for path, rel in _frontend_files():
        violations, seen = scan(path, rel)
        found += violations
        reads += seen
    assert not found, "\n".join(map(str, found))
    # the scan does see the sessions the front ends hold (it would pass vacuously if it did not)
    assert reads > 100, reads


def test_the_composition_root_exists() -> None:
    """The exemptions name files and functions that exist (a rename would widen nothing silently)."""
    for rel, functions in COMPOSITION.items():
        path = SRC / rel
        assert path.is_file(), rel
        defined = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        assert functions is None or functions <= defined, (rel, functions - defined)


OLD_CODE = {
    # what the front ends did before they sent operations (slash_actions, acp_slash, acp_server, rewind_actions)
    "self.session._require_idle()": "private attribute",
    "session._persist(list(repair.messages))": "private attribute",
    "x = getattr(session, '_task', None)": "private attribute by name",
    "session.history_rewritten = True": "sets",
    "session.web_search = search": "sets",
    "session.live_search.current = search": "sets",
    "session.title_task = None": "sets",
    "self._session.auto_title += 1": "sets",
    "del session.model": "sets",
    "session.deps.extras['editor_fs'] = files": "sets",
    "setattr(session, 'model', model)": "sets",
    "session.store.set_pending(session.session_id, None)": "writes the session's store",
    "store = session.store.fork(old)": "writes the session's store",
    "asyncio.to_thread(session.store.replace_history, sid, kept)": "writes the session's store",
    "session.messages.append(message)": "changes what the session holds",
    "from ketch.core.session_persist import Persistence": "imports the session's internals",
    "from ketch.core import session_controls": "imports the session's internals",
    "import ketch.core.session": "imports the session's module",
}


@pytest.mark.parametrize("line", sorted(OLD_CODE))
def test_the_scan_catches_what_the_front_ends_used_to_do(tmp_path: Path, line: str) -> None:
    path = tmp_path / "slash_actions.py"
    path.write_text(f"async def run(self, session, search, files, model, message, old, sid, kept, repair):\n    {line}\n")
    found, _ = scan(path, "ketch/frontends/slash_actions.py")
    assert [v.rule for v in found][:1] == [OLD_CODE[line]], found


@pytest.mark.parametrize("line", [
    "session.apply(op.Repair(tuple(messages)))",
    "print(session.session_id, session.store.list_sessions(cwd), session.messages[-1])",
    "self.session = session",
    "self._sessions[sid] = session",
    "sessions.pop(sid)",
    "task = session.take_title_task()",
    "from ketch.protocol.operations import Rewind",
])
def test_the_scan_lets_the_public_surface_through(tmp_path: Path, line: str) -> None:
    path = tmp_path / "ok.py"
    path.write_text(f"def run(self, session, sid, sessions, messages, cwd):\n    {line}\n")
    assert scan(path, "ketch/frontends/ok.py")[0] == []


def test_the_composition_root_may_set_services(tmp_path: Path) -> None:
    path = tmp_path / "acp_sessions.py"
    path.write_text("async def _build(self, session, files):\n    session.deps.extras['editor_fs'] = files\n"
                    "async def _prompt(self, session):\n    session.title_task = None\n")
    found, _ = scan(path, "ketch/frontends/acp_sessions.py")
    assert [v.line for v in found] == [4], found

"""The layout's rules, read from the source: import direction, no import circles, module sizes.

Every import counts, the lazy ones inside functions and those under ``TYPE_CHECKING`` too: a
lazy import is still a dependency, only a later one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "ketch"
SDK = ("pydantic_ai", "openai", "anthropic", "mcp", "google", "groq", "genai_prices")
MAX_LINES = 500
LONG_LINES = 400


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names), at any depth of the file."""
    tree = ast.parse(path.read_text(), str(path))
    own = _module_name(path)
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = own.split(".") if is_pkg else own.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            for alias in node.names:  # `from ketch.x import module`
                if f"{module}.{alias.name}" in MODULES:
                    found.add(f"{module}.{alias.name}")
    return found


def _ketch_imports(name: str) -> set[str]:
    """The ketch modules ``name`` depends on (a package's ``__init__`` only when imported as such)."""
    out = set()
    for target in _imports(MODULES[name]):
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        if target and target.startswith("ketch") and target != name and target != "ketch":
            out.add(target)
    return out


GRAPH = {name: _ketch_imports(name) for name in MODULES}


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_every_module_lives_in_a_package_that_names_it():
    flat = [n for n, p in MODULES.items() if n.count(".") == 1 and p.name != "__init__.py" and n != "ketch.__main__"]
    assert flat == [], f"modules outside the architecture packages: {flat}"
    for name, path in MODULES.items():
        if path.name == "__init__.py" and name != "ketch":
            doc = ast.get_docstring(ast.parse(path.read_text()))
            assert doc and "import" in doc.lower(), f"{name}: the package docstring says what it owns and may import"


@pytest.mark.parametrize("package", ["ketch.core", "ketch.context", "ketch.providers", "ketch.state", "ketch.extensions", "ketch.websearch", "ketch.tools"])
def test_the_core_and_its_machinery_never_import_a_front_end(package):
    bad = {
        (name, dep)
        for name, deps in GRAPH.items()
        if _in(name, package)
        for dep in deps
        if _in(dep, "ketch.frontends") or _in(dep, "ketch.ui")
    }
    assert not bad, f"{package} imports a front end: {sorted(bad)}"


def test_the_ui_never_imports_providers_or_the_sdk():
    bad = set()
    for name, path in MODULES.items():
        if not _in(name, "ketch.ui"):
            continue
        for target in _imports(path):
            if target.split(".")[0] in SDK or _in(target, "ketch.providers") or _in(target, "ketch.context"):
                bad.add((name, target))
    assert not bad, f"the UI reaches past the seam: {sorted(bad)}"


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    assert _cycles() == []


def test_module_sizes(capsys):
    sizes = sorted(((len(p.read_text().splitlines()), n) for n, p in MODULES.items()), reverse=True)
    with capsys.disabled():
        print("\nlargest modules: " + ", ".join(f"{n} {lines}" for lines, n in sizes[:8]))
    too_big = [(n, lines) for lines, n in sizes if lines > MAX_LINES]
    assert not too_big, f"modules over {MAX_LINES} lines: {too_big}"
    for lines, name in sizes:
        if lines > LONG_LINES:
            doc = ast.get_docstring(ast.parse(MODULES[name].read_text())) or ""
            assert "one thing" in doc.lower(), f"{name} has {lines} lines: its docstring must say why it is one thing"

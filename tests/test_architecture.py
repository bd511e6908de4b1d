"""The layout's rules, read from the source: each package's declared "May import" line, import
direction, no package pair importing each other, no import circles, the README map, module sizes.

Every import counts, the lazy ones inside functions and those under ``TYPE_CHECKING`` too: a
lazy import is still a dependency, only a later one.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "ketch"
SDK = ("pydantic_ai", "openai", "anthropic", "mcp", "google", "groq", "genai_prices")
MAX_LINES = 500
LONG_LINES = 400
MAY_IMPORT = re.compile(r"^May import: (?P<what>nothing|[a-z_]+(?:, [a-z_]+)*)\.$", re.MULTILINE)
"""The one line of a package's docstring that the checker reads: ``May import: a, b, c.`` (ketch's
top-level packages, comma-separated, without ``ketch.``) or ``May import: nothing.``; prose about
the SDK, laziness or reasons goes on other lines."""


def _module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(src: Path = SRC) -> dict[str, Path]:
    return {_module_name(p, src): p for p in sorted((src / "ketch").rglob("*.py"))}


MODULES = _modules()


def _imports(path: Path, src: Path = SRC, modules: dict[str, Path] = MODULES) -> set[str]:
    """Every module ``path`` imports (absolute names), at any depth of the file."""
    tree = ast.parse(path.read_text(), str(path))
    own = _module_name(path, src)
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
                if f"{module}.{alias.name}" in modules:
                    found.add(f"{module}.{alias.name}")
    return found


def _ketch_imports(name: str, src: Path = SRC, modules: dict[str, Path] = MODULES) -> set[str]:
    """The ketch modules ``name`` depends on (a package's ``__init__`` only when imported as such)."""
    out = set()
    for target in _imports(modules[name], src, modules):
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target.startswith("ketch") and target != name and target != "ketch":
            out.add(target)
    return out


def _graph(src: Path = SRC) -> dict[str, set[str]]:
    modules = MODULES if src == SRC else _modules(src)
    return {name: _ketch_imports(name, src, modules) for name in modules}


@functools.cache
def _source_graph() -> dict[str, set[str]]:
    """ketch's own import graph, parsed when a test first asks (not at collection: every xdist
    worker collects this file, and the parse was about a tenth of a worker's collection)."""
    return _graph()


def _package(module: str) -> str | None:
    """``ketch.core.session`` -> ``core``; None for the top-level modules (``ketch``, ``ketch.__main__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) >= 2 and parts[1] != "__main__" else None


def _packages(src: Path = SRC) -> list[str]:
    return sorted(p.parent.name for p in (src / "ketch").glob("*/__init__.py"))


def _declared(src: Path = SRC) -> dict[str, set[str] | str]:
    """Each package's declared ``May import`` set, or the problem with its docstring (a str)."""
    known = set(_packages(src))
    out: dict[str, set[str] | str] = {}
    for pkg in known:
        doc = ast.get_docstring(ast.parse((src / "ketch" / pkg / "__init__.py").read_text())) or ""
        lines = MAY_IMPORT.findall(doc)
        if len(lines) != 1:
            out[pkg] = f"{len(lines)} 'May import: ...' lines (need exactly one, in the form {MAY_IMPORT.pattern})"
            continue
        allowed = set() if lines[0] == "nothing" else set(lines[0].split(", "))
        unknown = allowed - known
        out[pkg] = f"names no such package: {sorted(unknown)}" if unknown else allowed
    return out


def _violations(src: Path = SRC) -> list[str]:
    """Every import across packages that the importer's ``May import`` line does not allow."""
    declared = _declared(src)
    problems = [f"{pkg}: {what}" for pkg, what in sorted(declared.items()) if isinstance(what, str)]
    for name, deps in sorted(_graph(src).items()):
        pkg = _package(name)
        if pkg is None or isinstance(declared.get(pkg), str):
            continue
        for dep in sorted(deps):
            target = _package(dep)
            if target is not None and target != pkg and target not in declared[pkg]:
                problems.append(f"{name} imports {dep}: package {pkg} may import {', '.join(sorted(declared[pkg])) or 'nothing'}")
    return problems


def _package_edges(src: Path = SRC) -> set[tuple[str, str]]:
    edges = set()
    for name, deps in _graph(src).items():
        for dep in deps:
            a, b = _package(name), _package(dep)
            if a and b and a != b:
                edges.add((a, b))
    return edges


def test_every_import_is_allowed_by_its_packages_may_import_line():
    assert _violations() == []


def test_no_two_packages_import_each_other():
    edges = _package_edges()
    mutual = sorted({tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges})
    assert mutual == [], f"package pairs that import each other: {mutual}"


def test_the_declared_layers_have_no_circle():
    """The ``May import`` lines themselves form a DAG, so no docstring can allow a way back up."""
    declared = {k: v for k, v in _declared().items() if isinstance(v, set)}
    done: set[str] = set()

    def visit(pkg: str, path: tuple[str, ...]) -> None:
        assert pkg not in path, f"the declared layers run in a circle: {' -> '.join(path + (pkg,))}"
        if pkg in done:
            return
        for dep in sorted(declared.get(pkg, ())):
            visit(dep, path + (pkg,))
        done.add(pkg)

    for pkg in sorted(declared):
        visit(pkg, ())


def test_the_ground_floor_imports_nothing_of_ketch_and_every_package_may_import_it():
    declared = _declared()
    assert declared["protocol"] == set()
    others = [p for p, d in declared.items() if p not in ("protocol", "harbor") and isinstance(d, set) and "protocol" not in d]
    assert others == [], f"packages whose line leaves out the ground floor: {others}"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "src" / "ketch" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "src"


def test_the_checker_catches_an_import_the_line_does_not_allow(tmp_path):
    """A synthetic tree: the lazy import and the TYPE_CHECKING one are caught, the allowed one is not,
    and a package without a parseable line is reported, so the check above cannot pass vacuously."""
    src = _tree(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": '"""Low.\n\nMay import: nothing.\n"""\n',
        "low/a.py": "def f():\n    from ketch.high import b\n",
        "low/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ketch.high.b import B\n",
        "high/__init__.py": '"""High.\n\nMay import: low.\n"""\n',
        "high/b.py": "from ketch.low import a\nclass B: ...\n",
        "loose/__init__.py": '"""Says what it owns but not, in the form, what it may import: core and config."""\n',
    })
    problems = _violations(src)
    assert problems == [
        "loose: 0 'May import: ...' lines (need exactly one, in the form " + MAY_IMPORT.pattern + ")",
        "ketch.low.a imports ketch.high: package low may import nothing",  # the package's __init__, then
        "ketch.low.a imports ketch.high.b: package low may import nothing",  # the module, lazily
        "ketch.low.c imports ketch.high.b: package low may import nothing",  # under TYPE_CHECKING
    ]
    assert ("low", "high") in _package_edges(src) and ("high", "low") in _package_edges(src)
    (src / "ketch" / "low" / "a.py").write_text("def f():\n    return 1\n")
    (src / "ketch" / "low" / "c.py").write_text("X = 1\n")
    (src / "ketch" / "loose" / "__init__.py").write_text('"""Loose.\n\nMay import: low, high.\n"""\n')
    assert _violations(src) == []


def _readme_map() -> set[str]:
    """The packages the README's Architecture table names (its first column)."""
    text = (SRC.parent / "README.md").read_text()
    section = text.split("\n## Architecture\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z_]+)/` \|", section, re.MULTILINE))


def test_the_readme_map_shows_every_package_and_nothing_else():
    assert _readme_map() == set(_packages())


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_every_module_lives_in_a_package_that_names_it():
    flat = [n for n, p in MODULES.items() if n.count(".") == 1 and p.name != "__init__.py" and n != "ketch.__main__"]
    assert flat == [], f"modules outside the architecture packages: {flat}"
    for name, path in MODULES.items():
        if path.name == "__init__.py" and name != "ketch":
            doc = ast.get_docstring(ast.parse(path.read_text()))
            assert doc and "import" in doc.lower(), f"{name}: the package docstring says what it owns and may import"


@pytest.mark.parametrize("package", ["ketch.core", "ketch.context", "ketch.providers", "ketch.state", "ketch.gate", "ketch.extensions", "ketch.websearch", "ketch.tools"])
def test_the_core_and_its_machinery_never_import_a_front_end(package):
    bad = {
        (name, dep)
        for name, deps in _source_graph().items()
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

    graph = _source_graph()

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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

    for v in sorted(graph):
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

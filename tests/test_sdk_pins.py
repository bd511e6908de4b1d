"""``ketch.wire.sdk_pins``: the versions its patches were written against are the installed ones,
the upstream source still has the shape each patch relies on, and each patch does what it says
(in a clean interpreter: ``sys.modules`` after importing pydantic-ai and ketch's wire)."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from ketch.wire.sdk_pins import PINNED


@pytest.mark.parametrize("distribution", sorted(PINNED))
def test_the_installed_version_is_the_pinned_one(distribution: str) -> None:
    assert version(distribution) == PINNED[distribution], (
        f"{distribution} {version(distribution)} is installed, ketch.wire.sdk_pins was written against "
        f"{PINNED[distribution]}: re-read each patch there against the new source, then move the pin")


def test_httpx_still_falls_back_when_its_cli_cannot_import() -> None:
    """httpx/__init__.py imports ``main`` from ``._main`` inside a try whose ``except ImportError``
    defines a ``main`` of its own: what makes a failed import of ``httpx._main`` harmless."""
    spec = importlib.util.find_spec("httpx")
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    guarded = [node for node in tree.body if isinstance(node, ast.Try)
               and any(isinstance(s, ast.ImportFrom) and s.module == "_main" and s.level == 1 for s in node.body)]
    assert len(guarded) == 1, "httpx no longer imports its CLI inside a try"
    (handler,) = guarded[0].handlers
    assert isinstance(handler.type, ast.Name) and handler.type.id == "ImportError"
    assert any(isinstance(s, ast.FunctionDef) and s.name == "main" for s in handler.body)


PROBE = """
import json, sys
from ketch.wire.sdk_pins import quiet_imports
if sys.argv[1] == "on":
    quiet_imports()
import pydantic_ai, httpx
import ketch.wire.http
loaded = sorted(m for m in sys.modules if sys.modules[m] is not None and m.split('.')[0] in ("click", "rich", "pygments")
                or m == "httpx._main" and sys.modules[m] is not None)
client = httpx.AsyncClient()
print(json.dumps({"loaded": loaded, "main": httpx.main.__module__, "client": type(client).__module__}))
"""


def _probe(mode: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_quiet_imports_keeps_the_httpx_cli_and_what_it_pulls_in_out() -> None:
    result = _probe("on")
    assert result["loaded"] == [], result
    assert result["main"] == "httpx"  # the fallback stub httpx defines for itself
    assert result["client"].startswith("httpx")
    assert _probe("off")["loaded"], "without the patch httpx's CLI (click, rich) is imported: the probe sees it"

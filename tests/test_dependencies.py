"""What a user installs: no provider SDK (every wire is ketch's own), and the lock covers the rest.

- ``[project].dependencies`` in pyproject.toml names no provider SDK, directly or through an extra
  of pydantic-ai-slim that pulls one in;
- walking the installed packages' own metadata from those dependencies (extras followed, markers
  evaluated) reaches no provider SDK package: the default install's whole tree is SDK-free;
- every package of that tree is pinned in requirements.lock (the constraints file the README's
  install command uses), at the version installed here.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SDKS = {"openai", "anthropic", "groq", "google-genai", "mistralai", "cohere", "tiktoken", "huggingface-hub",
        "boto3", "xai-sdk"}
"""Provider SDKs (and the tokenizer only the OpenAI extra brings)."""
SDK_EXTRAS = {"openai", "anthropic", "google", "groq", "mistral", "cohere", "openrouter", "zai", "bedrock",
              "huggingface", "xai", "cerebras", "vertexai"}
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(spec: str) -> tuple[str, set[str], str]:
    requirement, _, marker = spec.partition(";")
    match = _NAME.match(requirement)
    assert match, spec
    extras = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
    return norm(match.group(1)), extras, marker.strip()


def default_dependencies() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]


def test_the_default_dependencies_name_no_provider_sdk() -> None:
    for spec in default_dependencies():
        name, extras, _ = parse(spec)
        assert name not in SDKS, spec
        assert not extras & SDK_EXTRAS, f"{spec}: the extras {sorted(extras & SDK_EXTRAS)} install provider SDKs"


def _tree() -> dict[str, str]:
    """Every package the default dependencies pull in (name -> installed version), from the
    installed packages' metadata."""
    from packaging.markers import Marker

    seen: dict[str, str] = {}
    todo = [(parse(spec)[0], parse(spec)[1], parse(spec)[2], {"extra": ""}) for spec in default_dependencies()]
    visited: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras, marker, env = todo.pop()
        if marker and not Marker(marker).evaluate(env):
            continue
        key = (name, frozenset(extras))
        if key in visited:
            continue
        visited.add(key)
        dist = metadata.distribution(name)
        seen[name] = dist.version
        for req in dist.requires or []:
            sub, sub_extras, sub_marker = parse(req)
            for extra in extras or {""}:
                if sub_marker and not Marker(sub_marker).evaluate({"extra": extra}):
                    continue
                todo.append((sub, sub_extras, "", {"extra": ""}))
    return seen


def test_the_default_install_tree_holds_no_provider_sdk_and_is_locked() -> None:
    tree = _tree()
    assert "pydantic-ai-slim" in tree and "fastmcp-slim" in tree  # the walk followed the mcp extra
    assert not SDKS & set(tree), sorted(SDKS & set(tree))
    lock = {}
    for line in (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            lock[norm(name)] = version
    assert {n: v for n, v in tree.items() if lock.get(n) != v} == {}

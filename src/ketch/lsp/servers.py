"""Which language server serves which file: the built-in defaults (Python, TypeScript and
JavaScript, Go, Rust, each used only when its program is on PATH) and the user's ``[lsp]``
table over them.

A configured server with the same name as a default replaces it; ``enabled = false`` turns
one off. The first default candidate found on PATH wins (Python: pylsp, then basedpyright,
then pyright).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_WAIT_S = 3.0
"""The most an edit waits for its file's diagnostics."""
DEFAULT_START_TIMEOUT_S = 20.0
"""The most a server may take to answer ``initialize`` before it is dropped."""

_LANGUAGE_IDS: dict[str, str] = {
    ".py": "python", ".pyi": "python",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "typescriptreact",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascriptreact",
    ".go": "go", ".rs": "rust",
}  # fmt: skip


@dataclass(frozen=True)
class ServerSpec:
    """One language server: how to start it and the files it serves."""

    name: str
    command: tuple[str, ...]
    extensions: tuple[str, ...]
    language_id: str = ""
    """The ``languageId`` sent with each file ('' : by extension)."""
    initialization_options: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    """What ``workspace/configuration`` answers, by section (dotted names walk the table)."""

    def language_of(self, suffix: str) -> str:
        return self.language_id or _LANGUAGE_IDS.get(suffix, self.name)


_DEFAULTS: dict[str, tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]] = {
    "python": ((("pylsp",), ("basedpyright-langserver", "--stdio"), ("pyright-langserver", "--stdio")), (".py", ".pyi")),
    "typescript": ((("typescript-language-server", "--stdio"),), (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")),
    "go": ((("gopls",),), (".go",)),
    "rust": ((("rust-analyzer",),), (".rs",)),
}


@dataclass(frozen=True)
class LspSettings:
    """The ``[lsp]`` table as the pool uses it."""

    enabled: bool = True
    wait_s: float = DEFAULT_WAIT_S
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    servers: tuple[ServerSpec, ...] = ()


def settings_from(table: Mapping[str, Any], path_env: str | None = None) -> LspSettings:
    """``[lsp]`` (already checked by ``config.tables``) over the defaults found on PATH."""
    path = os.environ.get("PATH", "") if path_env is None else path_env
    configured: Mapping[str, Any] = table.get("servers") or {}
    servers: list[ServerSpec] = []
    for name, (candidates, extensions) in _DEFAULTS.items():
        if name in configured:
            continue
        found = next((c for c in candidates if shutil.which(c[0], path=path)), None)
        if found is not None:
            servers.append(ServerSpec(name, found, extensions))
    for name, entry in configured.items():
        if not entry.get("enabled", True):
            continue
        default = _DEFAULTS.get(name)
        extensions = entry.get("extensions") or (default[1] if default else ())
        command = entry.get("command")
        if not command and default is not None:
            command = next((c for c in default[0] if shutil.which(c[0], path=path)), None)
        if not command or not extensions:
            continue  # a default language whose server is not installed, and no command given
        servers.append(ServerSpec(
            name, tuple(command), tuple(extensions), entry.get("language_id", ""),
            dict(entry.get("initialization_options") or {}), dict(entry.get("settings") or {}),
        ))
    return LspSettings(
        enabled=bool(table.get("enabled", True)),
        wait_s=float(table.get("wait", DEFAULT_WAIT_S)),
        start_timeout_s=float(table.get("start_timeout", DEFAULT_START_TIMEOUT_S)),
        servers=tuple(servers),
    )


def server_for(settings: LspSettings, suffix: str) -> ServerSpec | None:
    """The server for files ending in ``suffix`` (the last configured one that claims it)."""
    chosen = None
    for spec in settings.servers:
        if suffix in spec.extensions:
            chosen = spec
    return chosen


def section(settings: Mapping[str, Any], name: str | None) -> Any:
    """``workspace/configuration``'s answer for one section (None where there is nothing)."""
    if not name:
        return dict(settings) or None
    value: Any = settings
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value

"""The shapes of config's free-form tables, checked when the file is read.

``mcp``, ``lsp``, ``hooks``, ``permissions``, ``guards`` and ``telemetry`` are kept as plain tables in
``Config`` (their consumers read them as such), but a value of the wrong type inside them is
as much an error as one at the top: ``network = "false"`` on an MCP server, ``timeout = "5"``
on a hook or ``capture_content = 1`` would otherwise be read leniently by whoever uses them.
Each check here raises ``ValueError`` with the key, so ``config._validate`` reports the file
and the key; nothing is coerced and the table is returned unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class McpServerConfig(_Strict):
    """``[mcp.servers.NAME]``: a stdio server (``command``) or an HTTP one (``url``)."""

    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = Field(default=None, min_length=1)
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    network: bool = True

    @field_validator("url")
    @classmethod
    def _clean_host(cls, value: str | None) -> str | None:
        from ketch.config.hostcheck import url_problem

        problem = url_problem(value) if value is not None else None
        if problem is not None:
            raise ValueError(problem)
        return value


class McpConfig(_Strict):
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class LspServerConfig(_Strict):
    """``[lsp.servers.NAME]``: a language server (NAME ``python``, ``typescript``, ``go`` or
    ``rust`` replaces that default)."""

    command: list[str] | None = Field(default=None, min_length=1)
    extensions: list[str] | None = Field(default=None, min_length=1)
    language_id: str = ""
    enabled: bool = True
    initialization_options: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)

    @field_validator("command")
    @classmethod
    def _words(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not all(word and "\0" not in word for word in value):
            raise ValueError("each word of the command must be a non-empty string")
        return value

    @field_validator("extensions")
    @classmethod
    def _suffixes(cls, value: list[str] | None) -> list[str] | None:
        bad = [s for s in value or [] if not s.startswith(".") or len(s) < 2 or "/" in s]
        if bad:
            raise ValueError(f"extensions are written like \".py\", not {bad[0]!r}")
        return value


class LspConfig(_Strict):
    """``[lsp]``: diagnostics from language servers after edits."""

    enabled: bool = True
    wait: float = Field(default=3.0, gt=0, le=60, allow_inf_nan=False)
    """Seconds an edit waits at most for its file's diagnostics."""
    start_timeout: float = Field(default=20.0, gt=0, le=600, allow_inf_nan=False)
    """Seconds a server may take to answer ``initialize`` before it is dropped."""
    servers: dict[str, LspServerConfig] = Field(default_factory=dict)


class TelemetryConfig(_Strict):
    otlp_endpoint: str | None = None
    capture_content: bool = False


def _first_error(exc: ValidationError, table: str) -> ValueError:
    err = exc.errors()[0]
    where = ".".join([table, *(str(p) for p in err["loc"])])
    if err["type"] == "extra_forbidden":
        return ValueError(f"unknown config key '{where}'")
    return ValueError(f"invalid value for '{where}': {err['msg'].removeprefix('Value error, ')}")


def _validated(model: type[BaseModel], table: str, value: dict[str, Any]) -> dict[str, Any]:
    """``value`` as it is, once ``model`` accepts it; the first problem as ``[table]``'s error."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        raise _first_error(exc, table) from None
    return value


def check_mcp(value: dict[str, Any]) -> dict[str, Any]:
    return _validated(McpConfig, "mcp", value)


def check_lsp(value: dict[str, Any]) -> dict[str, Any]:
    return _validated(LspConfig, "lsp", value)


def check_telemetry(value: dict[str, Any]) -> dict[str, Any]:
    return _validated(TelemetryConfig, "telemetry", value)


EXTENSION_TABLES = ("hooks", "permissions", "guards")
"""Tables whose shape only their owner can check: hooks (``extensions.hooks``), permission rules
(``gate.rules``), guards (``extensions.plugins``). ``config`` sits below ``extensions``, so the
checks are handed in (``extensions.table_checks.install``) by whoever loads the config."""

_extension_checks: dict[str, Callable[[Any], None]] = {}


def take_extension_checks(checks: Mapping[str, Callable[[Any], None]]) -> None:
    """Keep the checks of :data:`EXTENSION_TABLES` (each raises ``ValueError`` naming the key)."""
    unknown = set(checks) - set(EXTENSION_TABLES)
    if unknown:
        raise ValueError(f"no such extension table: {sorted(unknown)}")
    _extension_checks.update(checks)


def _extension_check(name: str, value: Any) -> Any:
    check = _extension_checks.get(name)
    if check is None:  # fail closed: an unchecked [hooks] would be read leniently later
        raise ValueError(f"[{name}] cannot be checked: the extensions' checks were not handed in (ketch.extensions.table_checks.install)")
    check(value)
    return value


def check_hooks(value: dict[str, Any]) -> dict[str, Any]:
    return _extension_check("hooks", value)


def check_permissions(value: dict[str, Any]) -> dict[str, Any]:
    return _extension_check("permissions", value)


def check_guards(value: list[Any]) -> list[Any]:
    return _extension_check("guards", value)

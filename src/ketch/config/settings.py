"""Configuration: resolution order, connections, and model references.

Resolution, highest first: CLI flags > environment > project ``.ketch/config.toml`` >
user config (platformdirs) > defaults. Every file is validated on its own so an unknown
key is reported with the file and the key. Nothing here imports the model SDK.

It is one thing, configuration: the schema, the layers merged in order, and the resolution
of a connection from them (its window limits live in ``config_limits``).
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from ketch.protocol import strict_json
from ketch.config.dirs import user_config_dir, user_data_dir
from ketch.config.env_values import env_layer
from ketch.config.limits import limit_fields, take_limits
from ketch.protocol.exceptions import ConfigError, MissingKey
from ketch.config.sandbox import SandboxConfig, limit_project_layer
from ketch.config.presets import PRESETS, WIRES, Preset

__all__ = ["ConfigError", "Config", "Connection", "load_config", "resolve_connection", "user_config_dir", "user_data_dir"]

ThinkLevel = Literal["off", "low", "medium", "high", "max"]
THINK_LEVELS: tuple[str, ...] = ("off", "low", "medium", "high", "max")


def _clean_url(value: Any) -> Any:
    """A URL config names is refused at load when its host carries control bytes (``config.hostcheck``)."""
    from ketch.config.hostcheck import url_problem

    problem = url_problem(value) if isinstance(value, str) else None
    if problem is not None:
        raise ValueError(problem)
    return value


_TABLES = ("mcp", "hooks", "permissions", "guards", "telemetry", "lsp")
"""The free-form tables ``config_tables`` checks (their messages name the key themselves)."""


class _Strict(BaseModel):
    """Unknown keys and values of the wrong type are errors: ``"false"``, ``0``/``1`` for a
    yes/no, ``"5"`` for a number are never coerced (a repository's file could otherwise flip a
    setting the user set the other way through the lenient reading of a string)."""

    model_config = ConfigDict(extra="forbid", strict=True)


DEFAULT_TIMEOUT = 300.0
"""Seconds a provider may stay silent before a request times out (Codex's stream idle limit)."""


class ConnectionConfig(_Strict):
    """A named provider access path."""

    preset: str = "openai-compatible"
    """One of the presets (openai, anthropic, openrouter, deepseek, groq, xai, mistral,
    ollama, lmstudio, llamacpp, openai-compatible)."""
    base_url: str | None = None
    """Overrides the preset's base URL."""
    wire: Literal["openai-chat", "openai-responses", "anthropic-messages", "gemini"] | None = None
    """Overrides the preset's wire protocol."""
    api_key_env: str | None = None
    """Environment variable that holds the key."""
    max_retries: int = 2
    """Retries the SDK makes on 429, 5xx and timeouts, with backoff."""
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, allow_inf_nan=False)
    """Seconds to wait for the provider's next bytes (its first, or the next of a stream) before
    the request fails as timed out (and is retried); also the connect limit, capped at 30 s."""
    context_window: int | None = Field(default=None, gt=0)
    """Tokens one request may hold, input and output together; overrides what the model's
    profile and ketch's table say (a repo's config may only lower it)."""
    max_output_tokens: int | None = Field(default=None, gt=0)
    """``max_tokens`` each request sends (the output reservation); a repo's config may only lower it."""
    _base_url_host = field_validator("base_url")(_clean_url)

    reasoning: bool | None = None
    """The models behind it reason: send the wire's thinking field for ``--think`` even where
    the SDK does not know the model to reason (``reasoning_effort``, ``reasoning.effort``,
    Anthropic ``thinking``)."""


class ModelMeta(_Strict):
    """What ketch should assume about one model (``[models."conn:model"]``)."""

    context_window: int | None = Field(default=None, gt=0)
    """Tokens the model accepts; defaults come from a table by model family."""
    max_output_tokens: int | None = Field(default=None, gt=0)
    """``max_tokens`` each request to this model sends."""
    capabilities: dict[str, bool] = Field(default_factory=dict)
    """Explicit capability flags, e.g. ``web_search = true``."""
    reasoning: bool | None = None
    """This model reasons (as the connection's ``reasoning``, for one model; wins over it)."""


class AgentConfig(_Strict):
    """A user-defined agent variant or subagent kind."""

    prompt: str = ""
    """Extra instructions for this agent."""
    tools: list[str] | None = None
    """The tools it may use (None: the default set)."""
    model: str | None = None
    think: ThinkLevel | None = None
    description: str = ""


class ToolsConfig(_Strict):
    enabled: list[str] | None = None
    """When set, only these tools are offered."""
    disabled: list[str] = Field(default_factory=list)
    """Tools never offered."""
    keep_env: list[str] = Field(default_factory=list)
    """Variables that shell commands, hooks and MCP servers keep although their names look
    like secrets (``*KEY*``, ``*TOKEN*``, ...). Only the user's own config may set it."""


class WebSearchConfig(_Strict):
    enabled: bool = False
    """Offer web search at all."""
    source: Literal["model", "tavily"] = "model"
    """``model``: hosted by the session's own provider; ``tavily``: a client tool with its own key."""
    protocol: Literal["auto", "responses", "anthropic"] = "auto"
    """Force the hosted-search protocol; ``auto`` follows the connection's wire."""
    anthropic_dynamic_filtering: bool = False
    """Send Anthropic's ``web_search_20260209`` (dynamic filtering) instead of ``20250305`` for
    the models ``ketch models --capabilities`` marks, on the official Anthropic API only."""
    tavily_base_url: str = "https://api.tavily.com"
    _tavily_host = field_validator("tavily_base_url")(_clean_url)


class CompactionConfig(_Strict):
    threshold: float = 0.8
    """Share of the context window at which pruning starts."""
    context_window: int | None = Field(default=None, gt=0)
    """Override the model's context window (tokens)."""


class Config(_Strict):
    """The whole configuration, as merged from every source."""

    model: str | None = None
    """The model as ``connection:model`` (for example ``openai:gpt-5``)."""
    think: ThinkLevel = "off"
    """Thinking level: off, low, medium, high, max."""
    agent: str = "build"
    """The agent variant: build, plan, or a user agent."""
    max_steps: int = Field(default=100, ge=1)
    """Model requests one turn may make before it ends with a step-limit event."""
    titles: bool = True
    checkpoints: bool = True
    """Snapshot the workspace around every turn so that /rewind can put files back."""
    checkpoint_cap_mb: int = Field(default=2048, ge=1)
    """The most a workspace's checkpoints may take on disk; the oldest go first past it."""
    """Name each new interactive session with a short auxiliary model call (no tools)."""
    privacy: bool = False
    """Privacy mode: no web search of any kind."""
    connections: dict[str, ConnectionConfig] = Field(default_factory=dict)
    models: dict[str, ModelMeta] = Field(default_factory=dict)
    permissions: dict[str, Any] = Field(default_factory=dict)
    """Permission rules: ``{tool: action}`` or ``{tool: {pattern: action}}``."""
    guards: list[dict[str, Any]] = Field(default_factory=list)
    """Refusal rules in the plugin rule shape; nothing bypasses them."""
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    telemetry: dict[str, Any] = Field(default_factory=dict)
    """``[telemetry]`` otlp_endpoint / capture_content: read from the user's own config only
    (``core.telemetry``); a repository's is accepted and ignored."""
    mcp: dict[str, Any] = Field(default_factory=dict)
    """``[mcp.servers.NAME]`` with command/args/env or url/headers."""
    hooks: dict[str, Any] = Field(default_factory=dict)
    lsp: dict[str, Any] = Field(default_factory=dict)
    """``[lsp]``: language servers for diagnostics after edits (``config.tables.LspConfig``)."""
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    registry_url: str = "https://registry.ketch.dev/index.json"
    _registry_host = field_validator("registry_url")(_clean_url)
    """Where ``/registry`` fetches its index."""
    added_dirs: list[str] = Field(default_factory=list)
    """Directories besides the workspace that file tools may touch."""
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig, validate_default=True)
    approval: Literal["ask", "auto", "never"] = "ask"  # auto: sandboxed commands need no prompt; never: deny what would ask
    _limit_ceilings: dict[str, int] = PrivateAttr(default_factory=dict)
    """Window and output limits a repo's own config set, which may only lower the others."""
    _project_trust: Any = PrivateAttr(default=None)

    @field_validator(*_TABLES)
    @classmethod
    def _check_table(cls, value: Any, info: Any) -> Any:
        """The free-form tables' own shapes (``config_tables``): wrong types are errors here,
        at load, with the file named, not a lenient read later by their consumer."""
        from ketch.config import tables as config_tables

        return getattr(config_tables, f"check_{info.field_name}")(value) if value else value

    @property
    def project_trust(self) -> Any:
        """How the project's config was treated (``trust.ProjectTrust``), None if not loaded from files."""
        return self._project_trust


def find_project_root(cwd: Path) -> Path:
    """The nearest ancestor holding ``.git`` or ``.ketch``; the cwd itself otherwise."""
    for candidate in (cwd, *cwd.parents):
        if (candidate / ".git").exists() or (candidate / ".ketch").is_dir():
            return candidate
    return cwd


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file or remove it") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    _validate(data, str(path))
    return data


def _validate(data: dict[str, Any], source: str) -> None:
    try:
        Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            raise ConfigError(f"{source}: unknown config key '{where}'") from None
        if err["type"] == "value_error" and err["loc"] == (err["loc"][0],) and err["loc"][0] in _TABLES:
            raise ConfigError(f"{source}: {err['ctx']['error']}") from None  # the table's own check names the key
        raise ConfigError(f"{source}: invalid value for '{where}': {err['msg'].removeprefix('Value error, ')}") from None


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_config(
    cwd: Path, flags: dict[str, Any] | None = None, environ: dict[str, str] | None = None, *, trust_flag: bool = False
) -> Config:
    """Merge every layer into one validated Config.

    The project's file is split (``project_config.split_project``): its narrowing part always
    applies, its widening part only where the folder is trusted (``trust.standing_of``) or
    ``trust_flag`` (``--trust``) says so. ``config.project_trust`` tells what happened."""
    from ketch.config import trust
    from ketch.config.project import merge_layer

    environ = dict(os.environ if environ is None else environ)
    merged: dict[str, Any] = {}
    user_file = user_config_dir() / "config.toml"
    if user_file.is_file():
        merged = _merge(merged, _read_toml(user_file))
    root = find_project_root(cwd)
    ignored: list[str] = []  # (sandbox and approval keys: only what narrows the user's file, trusted or not)
    ceilings: dict[str, int] = {}  # window and output limits: only ever lower (ketch.context.windows)
    split = _split_project_file(root, merged, ignored, ceilings)
    if split is not None:
        merged = merge_layer(merged, split.narrowing)
    standing = trust.standing_of(root, split, flag=trust_flag)
    if split is not None and standing.applied:
        merged = merge_layer(merged, split.widening)
    layer = env_layer(environ)
    _validate(layer, "environment (KETCH_*)")
    merged = _merge(merged, layer)
    flag_layer = {k: v for k, v in (flags or {}).items() if v is not None}
    _validate(flag_layer, "command line")
    merged = _merge(merged, flag_layer)
    config = Config.model_validate(merged, context={"ignored": ignored})
    config._project_trust = standing
    config._limit_ceilings = ceilings
    return config


def project_split(cwd: Path) -> Any:
    """The project's config split against the user's (None when the project has no file)."""
    user_file = user_config_dir() / "config.toml"
    user = _read_toml(user_file) if user_file.is_file() else {}
    return _split_project_file(find_project_root(cwd), user)


def _split_project_file(
    root: Path, user: dict[str, Any], ignored: list[str] | None = None, ceilings: dict[str, int] | None = None
) -> Any:
    from ketch.config.project import ProjectConfigError, split_project

    project_file = root / ".ketch" / "config.toml"
    if not project_file.is_file():
        return None
    keys = stored_keys()
    try:
        # a connection with a key variable (set now or later) or a stored key uses the user's key
        layer = _read_toml(project_file)
        taken = take_limits(layer)
        if ceilings is not None:
            ceilings.update(taken)
        project = limit_project_layer(layer, user, str(project_file), ignored)
        return split_project(project, user, project_file, has_user_key=lambda name, env: bool(env or keys.get(name)))
    except ProjectConfigError as exc:
        raise ConfigError(f"{project_file}: {exc}") from None


# ---------------------------------------------------------------- connections and keys


@dataclass(frozen=True)
class Connection:
    """A resolved access path to one model. ``api_key`` never leaves this object in text."""

    name: str
    preset: Preset
    wire: str
    base_url: str
    model_name: str
    api_key: str | None
    key_env: str
    max_retries: int = 2
    meta: ModelMeta | None = None
    timeout: float = DEFAULT_TIMEOUT
    context_window: int | None = None
    """The window config sets for this connection and model (None: the model's own)."""
    max_output_tokens: int | None = None
    """The output reservation config sets (None: the model's own)."""
    window_ceiling: int | None = None
    """The most window a repo's config allows (it may only lower the window)."""
    output_ceiling: int | None = None
    """The most output a repo's config allows."""
    reasoning: bool | None = None
    """The connection's ``reasoning`` flag (the model's own, in ``meta``, wins)."""

    @property
    def ref(self) -> str:
        return f"{self.name}:{self.model_name}"

    def __repr__(self) -> str:  # keep the key out of any repr that reaches a log
        return f"Connection({self.ref}, wire={self.wire}, base_url={self.base_url})"


def keys_file() -> Path:
    return user_config_dir() / "keys.json"


def stored_keys() -> dict[str, str]:
    path = keys_file()
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def store_key(name: str, key: str) -> Path:
    """Save a key for a connection in the user config dir, readable by the owner only."""
    path = keys_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = stored_keys()
    keys[name] = key
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(strict_json.dumps(keys))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def known_connections(config: Config) -> list[str]:
    return sorted(set(PRESETS) | set(config.connections))


def check_base_url(url: str, where: str) -> None:
    """Refuse a base URL no HTTP client can use (no scheme, no host, a bad port) as a usage error."""
    from urllib.parse import urlsplit

    from ketch.config.hostcheck import url_problem

    example = "write it like http://localhost:11434/v1"
    problem = url_problem(url)
    if problem is not None:
        raise ConfigError(f"{where}: {problem}; {example}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise ConfigError(f"{where} {url!r} is not a valid URL ({exc}); {example}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where} {url!r} is not an http:// or https:// URL with a host; {example}")


def resolve_connection(
    config: Config,
    model_ref: str | None,
    *,
    base_url: str | None = None,
    wire: str | None = None,
    api_key_env: str | None = None,
    environ: dict[str, str] | None = None,
) -> Connection:
    """Turn ``connection:model`` (or an ad-hoc ``--base-url``/``--wire`` endpoint) into a Connection."""
    environ = dict(os.environ if environ is None else environ)
    from ketch.config.env_values import env_int

    retries_override = env_int(environ, "KETCH_MAX_RETRIES")
    timeout_override = _timeout_override(environ.get("KETCH_TIMEOUT"))
    if not model_ref:
        raise ConfigError(
            "no model chosen: pass --model CONNECTION:MODEL (list them with 'ketch models'), or put "
            f"model = \"openai:gpt-5\" (say) in {user_config_dir() / 'config.toml'}; "
            "store a key with 'ketch auth login openai'"
        )
    if base_url:  # ad-hoc endpoint: no config file needed
        if wire not in WIRES:
            raise ConfigError(f"--base-url needs --wire, one of: {', '.join(WIRES)}")
        check_base_url(base_url, "--base-url")
        name, model_name = "adhoc", model_ref
        key = None
        if api_key_env:
            key = environ.get(api_key_env)
            if not key:
                raise ConfigError(f"--api-key-env {api_key_env} is set but the variable is empty or missing")
        preset = PRESETS["openai-compatible"]
        retries = retries_override if retries_override is not None else 2
        return Connection(
            name, preset, wire, base_url, model_name, key, api_key_env or "", retries, config.models.get(model_ref),
            timeout=timeout_override or DEFAULT_TIMEOUT,
            **limit_fields(config, name, model_ref),
        )
    if wire is not None and wire not in WIRES:
        raise ConfigError(f"unknown wire '{wire}'; use one of: {', '.join(WIRES)}")
    name, sep, model_name = model_ref.partition(":")
    if not sep or not model_name:
        raise ConfigError(f"model '{model_ref}' must be written CONNECTION:MODEL, e.g. openai:gpt-5; list models with 'ketch models CONNECTION'")
    conn_cfg = config.connections.get(name)
    if conn_cfg is None and name not in PRESETS:
        raise ConfigError(
            f"unknown connection '{name}' in model '{model_ref}'; known: {', '.join(known_connections(config))} "
            "(add [connections.NAME] to config, or list models with 'ketch models CONNECTION')"
        )
    conn_cfg = conn_cfg or ConnectionConfig(preset=name)
    preset = PRESETS.get(conn_cfg.preset)
    if preset is None:
        raise ConfigError(f"connection '{name}' uses unknown preset '{conn_cfg.preset}'; presets: {', '.join(PRESETS)}")
    resolved_wire = wire or conn_cfg.wire or preset.wire
    url = conn_cfg.base_url or preset.base_url
    if not url:
        raise ConfigError(f"connection '{name}' needs base_url (preset {preset.name} has none)")
    check_base_url(url, f"connection '{name}' base_url")
    key_env = api_key_env or conn_cfg.api_key_env or preset.key_env
    key = environ.get(key_env) if key_env else None
    alt_env = preset.alt_key_env if key_env == preset.key_env else ""
    key = key or (environ.get(alt_env) if alt_env else None) or stored_keys().get(name)
    if not key and key_env:
        either = f"{key_env} (or {alt_env})" if alt_env else key_env
        raise MissingKey(f"missing API key for connection '{name}': set {either} or run 'ketch auth login {name}'")
    retries = retries_override if retries_override is not None else conn_cfg.max_retries
    return Connection(
        name, preset, resolved_wire, url, model_name, key, key_env, retries, config.models.get(model_ref),
        timeout=timeout_override or conn_cfg.timeout, reasoning=conn_cfg.reasoning,
        **limit_fields(config, name, model_ref),
    )


def _timeout_override(text: str | None) -> float | None:
    """``KETCH_TIMEOUT``: seconds, a positive number, overriding every connection's ``timeout``."""
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ConfigError(f"KETCH_TIMEOUT must be a number of seconds above 0, not {text!r}")
    return seconds

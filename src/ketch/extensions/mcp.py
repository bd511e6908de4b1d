"""MCP servers as pydantic-ai toolsets: start them together, namespace their tools, report status.

Each configured server becomes one ``MCPToolset`` (stdio for ``command``, streamable HTTP for
``url``), wrapped in ``NamespacedToolset`` so its tools reach the model as ``server__tool``.
Servers start concurrently, each under its own deadline; one that crashes, cannot be spawned or
stays silent is recorded as failed with a one-line reason and the others carry on. Values from a
server's ``env`` and ``headers`` are treated as secrets: they never appear in a status or error.

pydantic-ai and fastmcp are imported only when servers are actually started, so a session without
MCP never pays for them.

It is one thing at this length: MCP servers as toolsets, started, namespaced, reported
and stopped together; each transport's launch is a few lines of it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ketch.sandbox.runtime import launch_argv

if TYPE_CHECKING:
    from pydantic_ai.toolsets import AbstractToolset

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What every provider accepts as a tool name."""
NAMESPACE_SEPARATOR = "__"
_MAX_TOOL_NAME = 64
_MAX_SERVER_PART = 40
_UNSAFE_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_REDACTED = "***"
_MIN_SECRET_LEN = 4
DEFAULT_START_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ServerStatus:
    """One configured server as ``/mcp`` and ``ketch mcp list`` show it."""

    name: str
    state: Literal["ready", "failed"]
    tools: list[str] = field(default_factory=list)
    """The namespaced tool names the model sees (``server__tool``)."""
    error: str = ""
    """Why the server failed, in one line, with secrets removed."""
    transport: Literal["stdio", "http", "unknown"] = "unknown"


def safe_name_part(text: str, *, limit: int = _MAX_TOOL_NAME) -> str:
    """``text`` with every character a provider rejects replaced by ``_``, cut to ``limit``."""
    cleaned = _UNSAFE_CHARS.sub("_", text)[:limit]
    return cleaned or "_"


def namespaced_tool_name(server: str, tool: str) -> str:
    """The provider-safe public name of ``tool`` on ``server``: ``server__tool``.

    Names too long for the 64-character limit keep a readable head and end in a short digest of
    the full pair, so two long names still differ.
    """
    name = f"{safe_name_part(server, limit=_MAX_SERVER_PART)}{NAMESPACE_SEPARATOR}{safe_name_part(tool)}"
    if len(name) <= _MAX_TOOL_NAME:
        return name
    return f"{name[: _MAX_TOOL_NAME - 9]}_{_digest(server, tool)}"


def _digest(server: str, tool: str) -> str:
    return hashlib.sha1(f"{server}\0{tool}".encode()).hexdigest()[:8]


def _public_names(server: str, tools: list[str]) -> dict[str, str]:
    """Map public name -> original name for one server, never letting two tools share a name."""
    mapping: dict[str, str] = {}
    for tool in tools:
        public = namespaced_tool_name(server, tool)
        if public in mapping:
            public = f"{public[: _MAX_TOOL_NAME - 9]}_{_digest(server, tool)}"
        mapping[public] = tool
    return mapping


@functools.cache
def _namespaced_toolset_class() -> type:
    """Build the wrapper class lazily so importing this module does not import pydantic-ai."""
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.toolsets import WrapperToolset

    @dataclass
    class NamespacedToolset(WrapperToolset[Any]):
        """Presents a server's tools as ``server__tool`` and routes calls back to the original name."""

        server: str = ""
        names: dict[str, str] = field(default_factory=dict)
        """Public name -> the server's own name, refreshed whenever the tools are listed."""
        scrub: Callable[[str], str] = str
        """Removes this server's secrets from a message."""

        async def get_tools(self, ctx: Any) -> dict[str, Any]:
            tools = await super().get_tools(ctx)
            self.names = _public_names(self.server, sorted(tools))
            return {
                public: replace(tools[original], toolset=self, tool_def=replace(tools[original].tool_def, name=public))
                for public, original in self.names.items()
            }

        async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
            original = self.names.get(name) or name.split(NAMESPACE_SEPARATOR, 1)[-1]
            ctx = replace(ctx, tool_name=original)
            tool = replace(tool, tool_def=replace(tool.tool_def, name=original))
            try:
                return await super().call_tool(original, tool_args, ctx, tool)
            except Exception as exc:
                if type(exc).__module__.startswith("pydantic_ai"):
                    raise  # ToolFailed, ModelRetry, approval and deferral signals keep their meaning
                raise ToolFailed(f"MCP server '{self.server}' failed: {self.scrub(_first_line(_leaf(exc)))}") from exc

    return NamespacedToolset


class _Secrets:
    """Values that must not be shown: env and header values, URL credentials and query values."""

    def __init__(self, spec: dict[str, Any]) -> None:
        values = [str(v) for v in (spec.get("env") or {}).values()]
        values += [str(v) for v in (spec.get("headers") or {}).values()]
        if spec.get("url"):
            parts = urlsplit(str(spec["url"]))
            values += [parts.password or "", parts.query, *(v for _, v in parse_qsl(parts.query))]
        self._values = sorted({v for v in values if len(v) >= _MIN_SECRET_LEN}, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, _REDACTED)
        return text


def _display_url(url: str) -> str:
    """The URL without user info or query string (either may carry a token)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


@dataclass
class _Running:
    name: str
    toolset: Any
    """The namespaced wrapper handed to the agent."""
    stack: AsyncExitStack
    stderr: Any = None


class McpHub:
    """The running MCP servers of a session: their toolsets, their status, and shutdown."""

    def __init__(self) -> None:
        self._running: list[_Running] = []
        self._statuses: list[ServerStatus] = []
        self._closed = False

    @property
    def toolsets(self) -> list[AbstractToolset[Any]]:
        """One namespaced toolset per ready server, in configuration order."""
        return [running.toolset for running in self._running]

    def status(self) -> list[ServerStatus]:
        """Every configured server, ready or failed, in configuration order."""
        return list(self._statuses)

    def tool_origin(self, public_name: str) -> tuple[str, str] | None:
        """``(server, original tool name)`` for a namespaced tool name, or None if it is not MCP's."""
        for running in self._running:
            original = running.toolset.names.get(public_name)
            if original is not None:
                return running.name, original
        return None

    async def aclose(self) -> None:
        """Stop every server (stdio processes are terminated); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(_stop(running) for running in self._running))
        self._running.clear()

    async def __aenter__(self) -> McpHub:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _add(self, status: ServerStatus, running: _Running | None) -> None:
        self._statuses.append(status)
        if running is not None:
            self._running.append(running)


async def _stop(running: _Running) -> None:
    try:
        await running.stack.aclose()
    except Exception:  # noqa: BLE001 - a server that dies on the way out is stopped either way
        pass
    finally:
        _close_file(running.stderr)


async def start_mcp_servers(
    config: dict[str, Any] | None, *, timeout: float = DEFAULT_START_TIMEOUT_S, sandbox: Any = None, child_env: Any = None
) -> McpHub:
    """Start every server in ``config`` concurrently and return the hub.

    ``config`` is ``{"servers": {NAME: {"command", "args", "env"} | {"url", "headers"}}, "timeout": s}``;
    a server entry may carry its own ``timeout``, and ``network = false`` to run a stdio
    server without the network (it runs under ``sandbox``'s policy, network on by default). Failures never raise: they become failed statuses.
    ``child_env`` (a ``tools.child_env.ChildEnv``) is what a stdio server's environment leaves out.
    Call it on the event loop that will run the agent (stdio sessions belong to that loop), and
    ``aclose()`` the hub on the same loop.
    """
    hub = McpHub()
    servers = dict((config or {}).get("servers") or {})
    if not servers:
        return hub
    default_timeout = float((config or {}).get("timeout") or timeout)
    namespaces = _unique_namespaces(list(servers))
    attempts = [
        _start_one(name, namespaces[name], spec, _server_timeout(spec, default_timeout), sandbox, child_env)
        for name, spec in servers.items()
    ]
    for status, running in await asyncio.gather(*attempts):
        hub._add(status, running)
    return hub


def _server_timeout(spec: Any, default: float) -> float:
    value = spec.get("timeout") if isinstance(spec, dict) else None
    return float(value or default)


def _unique_namespaces(names: list[str]) -> dict[str, str]:
    """Provider-safe namespace per server name; two names that clean up alike get distinct ones."""
    taken: set[str] = set()
    result: dict[str, str] = {}
    for name in names:
        base = safe_name_part(name, limit=_MAX_SERVER_PART)
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base[: _MAX_SERVER_PART - 3]}_{n}", n + 1
        taken.add(candidate)
        result[name] = candidate
    return result


async def _start_one(
    name: str, namespace: str, spec: Any, timeout: float, sandbox: Any = None, child_env: Any = None
) -> tuple[ServerStatus, _Running | None]:
    if not isinstance(spec, dict) or not (spec.get("command") or spec.get("url")):
        return ServerStatus(name, "failed", error="needs either 'command' or 'url' in its configuration"), None
    transport: Literal["stdio", "http"] = "http" if spec.get("url") else "stdio"
    secrets = _Secrets(spec)
    stack = AsyncExitStack()
    stderr = None
    try:
        toolset, stderr = _build_toolset(namespace, spec, timeout, secrets.scrub, sandbox, child_env)
        async with asyncio.timeout(timeout):
            await stack.enter_async_context(toolset)
            tools = await toolset.wrapped.list_tools()
    except asyncio.CancelledError:
        await _close_quietly(stack)
        _close_file(stderr)
        raise
    except Exception as exc:  # noqa: BLE001 - every start failure becomes a status line
        await _close_quietly(stack)
        reason = _describe_failure(exc, spec, timeout, _last_line(stderr))
        _close_file(stderr)
        return ServerStatus(name, "failed", error=secrets.scrub(reason), transport=transport), None
    toolset.names = _public_names(namespace, sorted(t.name for t in tools))
    public = sorted(toolset.names)
    return (
        ServerStatus(name, "ready", tools=public, transport=transport),
        _Running(name, toolset, stack, stderr),
    )


def _build_toolset(
    namespace: str, spec: dict[str, Any], timeout: float, scrub: Callable[[str], str], sandbox: Any = None,
    child_env: Any = None,
) -> tuple[Any, Any]:
    """The namespaced toolset for one server entry, plus the file collecting a stdio server's stderr."""
    from pydantic_ai.mcp import MCPToolset

    wrapper = _namespaced_toolset_class()
    if spec.get("url"):
        from ketch.config.hostcheck import url_problem

        url = str(spec["url"])
        problem = url_problem(url)
        if problem is not None:
            raise ValueError(f"refused before connecting: {problem}")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {_display_url(url)!r}")
        headers = {str(k): str(v) for k, v in (spec.get("headers") or {}).items()} or None
        toolset = MCPToolset(url, id=namespace, headers=headers, init_timeout=timeout + 1, tool_error_behavior="failed")
        return wrapper(toolset, server=namespace, scrub=scrub), None
    from fastmcp.client.transports import StdioTransport

    stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
    command = [str(spec["command"]), *(str(a) for a in spec.get("args") or [])]
    if shutil.which(command[0]):  # a missing command stays unwrapped, so it fails as "command not found"
        command = launch_argv(sandbox, command, spec.get("cwd") or os.getcwd(), network=bool(spec.get("network", True)))
    stdio = StdioTransport(
        command=command[0],
        args=command[1:],
        env=_server_env(spec, child_env),
        cwd=spec.get("cwd"),
        keep_alive=False,
        log_file=stderr,
    )
    toolset = MCPToolset(stdio, id=namespace, init_timeout=timeout + 1, tool_error_behavior="failed")
    return wrapper(toolset, server=namespace, scrub=scrub), stderr


def _server_env(spec: dict[str, Any], child_env: Any) -> dict[str, str]:
    """A stdio server's environment: the MCP library's few inherited variables (``PATH``,
    ``HOME``, ...) and the ones the user keeps by name, less every key ketch holds and every
    variable that looks like a secret; then the server's own ``env`` from its config."""
    import os

    from mcp.client.stdio import get_default_environment

    from ketch.tools.child_env import child_environment

    keep = getattr(child_env, "keep", frozenset())
    base = {**get_default_environment(), **{k: os.environ[k] for k in keep if k in os.environ}}
    return {**child_environment(child_env, base), **{str(k): str(v) for k, v in (spec.get("env") or {}).items()}}


async def _close_quietly(stack: AsyncExitStack) -> None:
    try:
        await asyncio.shield(stack.aclose())
    except BaseException:  # noqa: BLE001 - cleanup of a server that never started
        pass


def _close_file(handle: Any) -> None:
    if handle is not None:
        handle.close()


def _last_line(stderr: Any) -> str:
    if stderr is None:
        return ""
    try:
        stderr.flush()
        stderr.seek(0)
        lines = [line.strip() for line in stderr.read()[-4000:].splitlines() if line.strip()]
    except (OSError, ValueError):
        return ""
    return lines[-1] if lines else ""


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps: first members of exception groups and ``raise ... from`` causes."""
    chain: list[BaseException] = [exc]
    while len(chain) < 20:
        current = chain[-1]
        inner = current.exceptions[0] if isinstance(current, BaseExceptionGroup) and current.exceptions else None
        inner = inner or current.__cause__
        if inner is None or inner in chain:
            break
        chain.append(inner)
    return chain


def _leaf(exc: BaseException) -> BaseException:
    """The innermost cause, usually the most specific."""
    return _chain(exc)[-1]


def _describe_failure(exc: BaseException, spec: dict[str, Any], timeout: float, stderr_tail: str) -> str:
    """One line saying why a server did not start (may still contain secrets; the caller scrubs)."""
    if any(isinstance(link, TimeoutError) for link in _chain(exc)):
        return f"did not answer within {timeout:g} s; raise 'timeout' in the MCP settings if it is just slow"
    exc = _leaf(exc)
    if spec.get("url"):
        where = _display_url(str(spec["url"]))
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status is not None:
            return f"{where} answered HTTP {status}"
        if type(exc).__name__ in {"ConnectError", "ConnectTimeout"}:
            return f"could not connect to {where}"
        return f"{where}: {_first_line(exc)}"
    command = str(spec.get("command"))
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {command}"
    if isinstance(exc, PermissionError):
        return f"command is not executable: {command}"
    detail = f" ({stderr_tail})" if stderr_tail else ""
    if "Connection closed" in str(exc):
        return f"exited during start{detail}"
    return f"{_first_line(exc)}{detail}"


def _first_line(exc: BaseException) -> str:
    """The first line of the message; the class name only where the message alone is unclear."""
    text = str(exc).strip().splitlines()
    if not text:
        return type(exc).__name__
    if type(exc).__name__.lower() == "mcperror":  # the protocol layer's own words
        return text[0]
    return f"{type(exc).__name__}: {text[0]}"


"""Wiring: from parsed arguments and configuration to a ready Session.

``build_session`` is a short sequence of named steps, each in the package it belongs to:
settle the configuration (here), open the history (``state.resume``), the tools and the
gate (here, with ``extensions.wiring``), the instructions (``core.instructions_wiring``),
MCP (``extensions.wiring``), the model (``providers.models``), then the Session and its
subagents. Everything heavy (the SDK, the provider module in use, MCP) is imported on demand.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from ketch.core.agents import resolve_agent
from ketch.gate.approval import ApprovalGate
from ketch.config.settings import Config, Connection, find_project_root, load_config, resolve_connection
from ketch.extensions import table_checks
from ketch.protocol.exceptions import ConfigError


def config_from_args(args: Any, cwd: Path) -> Config:
    flags = {
        "model": None if getattr(args, "base_url", None) else getattr(args, "model", None),
        "think": getattr(args, "think", None),
        "agent": getattr(args, "agent", None),
        "max_steps": getattr(args, "max_steps", None),
        "privacy": True if getattr(args, "privacy", False) else None,
        "sandbox": {"mode": args.sandbox} if getattr(args, "sandbox", None) else None,
        "approval": getattr(args, "approval", None),
    }
    table_checks.install()  # (idempotent) for callers that did not come through cli.main
    return load_config(cwd, flags, trust_flag=bool(getattr(args, "trust", False)))


def connection_from_args(args: Any, config: Config) -> Connection:
    return resolve_connection(
        config,
        getattr(args, "model", None) if getattr(args, "base_url", None) else config.model,
        base_url=getattr(args, "base_url", None),
        wire=getattr(args, "wire", None),
        api_key_env=getattr(args, "api_key_env", None),
    )


def _fallback_capability(conn: Connection, chat_model: Any, *, follows_model: bool = False) -> list[Any]:
    """The sticky Chat → Responses switch: official OpenAI preset on the chat wire only. With
    ``follows_model`` (a session's own agent) it is there for any connection, idle, so that a
    ``/model`` to such a connection gets it too (``ResponsesFallback.follow_model``)."""
    from ketch.providers.fallback import ResponsesFallback

    fallback = ResponsesFallback()
    fallback.follow_model(chat_model, conn)
    return [fallback] if follows_model or fallback.chat_model is not None else []


def _compactor(config: Config, conn: Connection) -> Any:
    """The session's context manager: window and output limits from config, the model's
    profile or ketch's table (``context.windows``)."""
    from ketch.context.compaction import Compactor

    return Compactor(connection=conn, threshold=config.compaction.threshold)


@dataclasses.dataclass
class Settled:
    """What the arguments and the configuration say, before anything is started."""

    cwd: Path
    config: Config
    variant: Any
    conn: Connection
    root: Path
    workspace: Any


def settle(args: Any) -> Settled:
    """Step 1: configuration, agent variant, connection and workspace from the arguments."""
    from pydantic_ai.exceptions import ToolFailed

    from ketch.tools.workspace import Workspace

    cwd = Path(getattr(args, "cwd", None) or os.getcwd()).resolve()
    config = config_from_args(args, cwd)
    variant = resolve_agent(config.agent, config)
    conn = connection_from_args(args, config)
    root = find_project_root(cwd)
    try:
        workspace = Workspace(root, [Path(d).expanduser() for d in [*config.added_dirs, *getattr(args, "add_dir", [])]])
    except ToolFailed as exc:  # an added directory that does not exist
        raise ConfigError(f"added directory: {exc}") from None
    return Settled(cwd, config, variant, conn, root, workspace)


def tool_specs(s: Settled, search: Any) -> tuple[list[Any], Any]:
    """Step 3: the built-in tools, the client-side search tool when routed, and ``task``."""
    from ketch.core.subagent import subagent_kinds, task_tool_spec
    from ketch.frontends.builtin_tools import builtin_tool_specs
    from ketch.websearch.wiring import web_research_available

    specs = builtin_tool_specs()
    if search.route.client_tool is not None:
        specs.append(search.route.client_tool)
    task_kinds = subagent_kinds(s.config, {spec.name: spec.kind for spec in specs}, web_research=web_research_available(search))
    specs.append(task_tool_spec(task_kinds))
    return specs, task_kinds


def tool_deps(s: Settled, store: Any, child_env: Any = None) -> Any:
    """Step 4: what the tools share: the jail, the process registry, the task list, skills, memory."""
    from ketch.tools import skills
    from ketch.tools import memory, notebook
    from ketch.tools.background import BackgroundJobs
    from ketch.tools.base import ToolDeps, ToolSettings
    from ketch.tools.shell import ProcessRegistry
    from ketch.websearch.wiring import tavily_settings

    return ToolDeps(
        workspace=s.workspace,
        processes=ProcessRegistry(),
        settings=ToolSettings(child_env=child_env),
        extras={
            "notebook": notebook.Notebook(),
            "skills": skills.SkillCatalog.discover(s.root),
            "memory": memory.MemoryBook(store, str(s.root)),
            "tavily": tavily_settings(s.config),
            "background": BackgroundJobs(),
        },
    )


def session_model(s: Settled, search: Any, model_override: Any, interactive: bool) -> Any:
    """Step 6: the model the connection names (or the caller's), refused names as one line."""
    if model_override is not None:
        return model_override
    from pydantic_ai.exceptions import UserError

    from ketch.providers.models import build_model

    try:
        return build_model(s.conn, search.wire, profile=search.model_profile())
    except UserError as exc:  # the SDK refuses the model name or settings before any request
        raise ConfigError(f"model '{s.conn.ref}': {' '.join(str(exc).split())}") from None


def held_keys(s: Settled, args: Any) -> tuple[Any, Any]:
    """Step 4a: the keys this run holds, and the child environment without them."""
    from ketch.config.keyring import collect_keys
    from ketch.tools.child_env import ChildEnv, hold_for_process

    ring = collect_keys(s.config, s.conn, extra_names=(getattr(args, "api_key_env", None) or "",))
    child_env = ChildEnv.of(ring.names, ring.values, s.config.tools.keep_env)
    hold_for_process(child_env)
    return ring, child_env


def attach_subagents(session: Any, s: Settled, *, specs: list[Any], task_kinds: Any, search: Any,
                     sources: Any, own_model: bool, always: tuple[Any, ...] = ()) -> None:
    """Step 8: the ``task`` tool's runner, sharing the parent's gate, processes and skills."""
    from ketch.core.subagent import ChildWiring, SubagentRunner
    from ketch.providers.wiring import child_capabilities

    deps, conn = session.deps, s.conn
    subagents = SubagentRunner(
        ChildWiring(
            workspace=s.workspace,
            specs=specs,
            gate=session.gate,
            interactive=session.interactive,
            processes=deps.processes,
            settings=deps.settings,
            shared_extras={k: v for k, v in deps.extras.items() if k in ("skills", "tavily", "lsp", "background")},
            make_instructions=sources.for_child,
            capabilities_for=lambda c, m: [
                *(_fallback_capability(c, m) if (c is not conn or search.wire == conn.wire) else []), *child_capabilities(c)],
            search=search,
            compactor_for=lambda c: _compactor(s.config, c),
            own_model=own_model,
            always_capabilities=always,
        ),
        task_kinds,
    )
    deps.extras["subagents"] = subagents
    subagents.attach(session)


def compound_surface(s: Settled, warnings: list[str]) -> bool:
    """Step 3b: a Groq compound model runs without function tools and titles, with one notice saying so."""
    from ketch.providers.groq import TOOLS_OFF, compound_connection

    if not compound_connection(s.conn):
        return False
    warnings.append(TOOLS_OFF.format(model=s.conn.ref))
    return True


def start_telemetry(s: Settled, warnings: list[str]) -> bool:
    """Step 0: tracing, when the standard variable or the user's own config asks for it."""
    from ketch.core import telemetry

    settings = telemetry.settings_from(telemetry.user_telemetry())
    if settings is None:
        return False
    notice = telemetry.start(settings, secrets=[k for k in (s.conn.api_key,) if k])
    if notice:
        warnings.append(notice)
        return False
    return True


def open_checkpoints(s: Settled, warnings: list[str]) -> Any:
    """Step 9: snapshots of the workspace around every turn, for /rewind (None: off, with a warning why)."""
    from ketch.checkpoints.rewind import checkpointer_for

    checkpoints, why_not = checkpointer_for(s.root, enabled=s.config.checkpoints, cap_mb=s.config.checkpoint_cap_mb)
    if why_not:
        warnings.append(why_not)
    return checkpoints


def session_closers(*, hub: Any, store: Any, deps: Any, locks: Any, sandbox: Any, traced: bool, checkpoints: Any) -> tuple[Any, ...]:
    """Step 10: what the session's ``aclose`` runs, last first. Background commands belong to the
    session: it lists them, tells the model when one ends, and stops them all when it closes
    (their closer runs first)."""
    from ketch.sandbox.runtime import cleanup_tmp

    closers: list[Any] = [hub.aclose] if hub is not None else []
    closers += [store.close, deps.extras["lsp"].aclose, locks.release, lambda: cleanup_tmp(sandbox)]
    if traced:
        from ketch.core.telemetry import shutdown

        closers.append(shutdown)
    if checkpoints is not None:
        closers.append(checkpoints.close)
    closers.append(deps.extras["background"].close)
    return tuple(closers)


async def build_session(args: Any, *, interactive: bool, model_override: Any = None, titles: bool = False) -> Any:
    """Build the Session the arguments describe (resuming one when asked).

    ``titles``: name a new session after its first turn (the interactive front end asks for it)."""
    from ketch.core.instructions_wiring import InstructionSources
    from ketch.core.session import Session
    from ketch.extensions.wiring import gate_parts, start_mcp
    from ketch.providers.models import model_settings
    from ketch.providers.endings import RESUME_HINT, cut_by_output_limit
    from ketch.providers.base_url import forgiving_connection
    from ketch.providers.strict_args import sanitize_history
    from ketch.providers.thinking import thinking_notice
    from ketch.providers.wiring import ServerBehaviour
    from ketch.core.session_services import SessionServices
    from ketch.sandbox.wiring import session_sandbox
    from ketch.state.resume import open_history, open_store
    from ketch.websearch.wiring import session_search
    from ketch.state.redaction import RedactToolOutput, redacting_emit
    from ketch.context.collector import tune_for_long_sessions

    tune_for_long_sessions()
    s = settle(args)
    if getattr(args, "acp_mcp_servers", None):  # servers the editor passed with session/new
        mcp = dict(s.config.mcp)
        mcp["servers"] = {**mcp.get("servers", {}), **args.acp_mcp_servers}
        s.config = s.config.model_copy(update={"mcp": mcp})
    warnings: list[str] = []
    s.conn, url_notice = forgiving_connection(s.conn)
    warnings.extend([url_notice] if url_notice else [])
    server_behaviour = ServerBehaviour(s.conn, s.config)
    store = open_store()
    traced = start_telemetry(s, warnings)
    trust_notice = s.config.project_trust.notice() if s.config.project_trust is not None else ""
    if trust_notice:
        warnings.append(trust_notice)
    ring, child_env = held_keys(s, args)
    redact = RedactToolOutput(ring=ring)
    session_id, history, locks = open_history(
        args, store, s.cwd, model_ref=s.conn.ref, agent=s.variant.name, interactive=interactive, warnings=warnings
    )
    if history and cut_by_output_limit(history):
        warnings.append(RESUME_HINT)
    rewritten = sanitize_history(history)  # calls stored before they were checked
    search = session_search(
        s.config, s.conn, interactive=interactive, flag=bool(getattr(args, "web_search", False)), tool_ceiling=s.variant.tools
    )
    warnings.extend([search.notice] if search.notice else [])
    specs, task_kinds = tool_specs(s, search)
    compound = compound_surface(s, warnings)
    if compound:  # Groq compound takes no function tools: none are offered, listed or sent
        specs, task_kinds = [], {}
    sandbox, sandbox_notices = session_sandbox(
        s.config, s.root, s.workspace.extra_dirs, yolo=bool(getattr(args, "yolo", False)), flag_mode=getattr(args, "sandbox", None)
    )
    warnings.extend(sandbox_notices)
    guard, rules, hooks = gate_parts(s.config, s.root, s.cwd, warnings, sandbox)
    if hooks is not None:
        hooks.child_env = child_env
    gate = ApprovalGate(
        kinds={spec.name: spec.kind for spec in specs},
        key_args={spec.name: spec.key_arg for spec in specs},
        guard=guard,
        rules=rules,
        hooks=hooks,
        yolo=bool(getattr(args, "yolo", False)),
        approval=s.config.approval,
        sandbox=sandbox,
        interactive=interactive,
    )
    deps = tool_deps(s, store, child_env)
    deps.settings.sandbox = sandbox
    sandbox.workspace = s.workspace  # directories added later (/add-dir) become writable too
    from ketch.tools.diagnostics import language_servers

    deps.extras["lsp"] = language_servers(s.config.lsp, s.root, sandbox, child_env)  # none starts before an edit
    descriptions = {spec.name: (spec.function.__doc__ or "").strip().splitlines()[0] if spec.function.__doc__ else "" for spec in specs}
    from ketch.websearch.wiring import LiveSearch

    live_search = LiveSearch(search)  # /model replaces what it holds
    sources = InstructionSources(
        cwd=s.cwd, root=s.root, agent_prompt=lambda: session.variant.prompt, descriptions=descriptions,
        notebook=deps.extras["notebook"], memory=deps.extras["memory"], skills=deps.extras["skills"], search=live_search,
    )
    hub, extra_kinds = await start_mcp(s.config, descriptions, warnings, sandbox, child_env=child_env)
    gate.kinds = {**gate.kinds, **extra_kinds}
    model = session_model(s, search, model_override, interactive)
    think = s.variant.think or s.config.think
    thinking_model = model if model_override is None else None  # a caller's model gets the level as it is
    if (think_notice := thinking_notice(think, thinking_model, s.conn, search.wire)) is not None:
        warnings.append(think_notice)
    checkpoints = open_checkpoints(s, warnings)
    services = SessionServices(
        gate=gate, store=store, hooks=hooks, mcp_hub=hub, sandbox=sandbox, checkpoints=checkpoints,
        background=deps.extras["background"], key_ring=ring,  # (and the views derived from a call: its diff, preview, summary)
        live_search=live_search, claim=locks.claim,
        closers=session_closers(hub=hub, store=store, deps=deps, locks=locks, sandbox=sandbox, traced=traced, checkpoints=checkpoints),
    )
    session = Session(
        config=s.config,
        connection=s.conn,
        model=model,
        workspace=s.workspace,
        specs=specs,
        variant=s.variant,
        services=services,
        interactive=interactive,
        deps=deps,
        instructions=sources.for_session,
        session_id=session_id,
        history=history,
        extra_toolsets=hub.toolsets if hub is not None and not compound else (),
        extra_kinds=extra_kinds,
        capabilities=[
            *(_fallback_capability(s.conn, model, follows_model=True) if model_override is None and search.wire == s.conn.wire else []),
            *live_search.capabilities(),
            *server_behaviour.capabilities(),
            redact,
        ],
        model_settings=model_settings(think, wire=search.wire, model=thinking_model, conn=s.conn),
        compactor=_compactor(s.config, s.conn),
        web_search=search,
        auto_title=bool(titles and s.config.titles and not history and not compound),
        notices=[*warnings, *deps.extras["skills"].warnings],
        history_rewritten=bool(rewritten),
    )
    deps.emit = redacting_emit(deps.emit, ring)  # live output chunks, the parent's and its subagents'
    if hooks is not None:
        hooks.report = session.report_hook_failure  # a hook that cannot run is said, not swallowed
    attach_subagents(session, s, specs=specs, task_kinds=task_kinds, search=search, sources=sources,
                     own_model=model_override is None, always=(redact,))
    server_behaviour.attach(session, sources)
    return session

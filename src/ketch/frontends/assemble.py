"""Wiring: from parsed arguments and configuration to a ready Session.

Everything heavy (the SDK, the provider module in use, MCP) is imported here, on demand.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from ketch.core.agents import resolve_agent
from ketch.core.approval import ApprovalGate
from ketch.core.config import Config, Connection, find_project_root, load_config, resolve_connection, user_config_dir
from ketch.core.exceptions import ConfigError


def config_from_args(args: Any, cwd: Path) -> Config:
    flags = {
        "model": None if getattr(args, "base_url", None) else getattr(args, "model", None),
        "think": getattr(args, "think", None),
        "agent": getattr(args, "agent", None),
        "max_steps": getattr(args, "max_steps", None),
        "privacy": True if getattr(args, "privacy", False) else None,
    }
    return load_config(cwd, flags)


def connection_from_args(args: Any, config: Config) -> Connection:
    return resolve_connection(
        config,
        getattr(args, "model", None) if getattr(args, "base_url", None) else config.model,
        base_url=getattr(args, "base_url", None),
        wire=getattr(args, "wire", None),
        api_key_env=getattr(args, "api_key_env", None),
    )


def _fallback_capability(conn: Connection, chat_model: Any) -> list[Any]:
    """The sticky Chat → Responses switch: official OpenAI preset on the chat wire only."""
    if not (conn.preset.official_openai and conn.wire == "openai-chat"):
        return []
    from ketch.providers.fallback import ResponsesFallback, switch_for
    from ketch.providers.models import build_model

    return [
        ResponsesFallback(
            chat_model=chat_model,
            responses_model_factory=lambda: build_model(conn, "openai-responses"),
            state=switch_for(f"{conn.name}|{conn.base_url}"),
        )
    ]


def _compactor(config: Config, conn: Connection) -> Any:
    """The session's context manager: the window from config, model metadata or the table."""
    from ketch.context.budget import context_window
    from ketch.context.compaction import Compactor

    override = config.compaction.context_window or (conn.meta.context_window if conn.meta else None)
    return Compactor(window=context_window(conn.model_name, override), threshold=config.compaction.threshold)


def _open_store() -> Any:
    from ketch.state.store import Store, StoreError

    try:
        return Store.open()
    except StoreError as exc:
        raise ConfigError(str(exc)) from None


def _resume_target(args: Any, store: Any, cwd: Path, *, interactive: bool = True) -> Any:
    """The row of the session ``--continue``/``--resume`` names, or None for a new session."""
    from ketch.state.store import StoreError

    try:
        return _find_target(args, store, cwd, interactive)
    except StoreError as exc:  # an ambiguous id prefix, an unreadable row
        raise ConfigError(str(exc)) from None


def _find_target(args: Any, store: Any, cwd: Path, interactive: bool) -> Any:
    if getattr(args, "continue_", False):
        row = store.latest_session(str(cwd))
        if row is None:
            raise ConfigError(f"no earlier session in {cwd} to continue; start one with ketch -p or ketch")
        return row
    resume = getattr(args, "resume", None)
    if resume == "" and not interactive:
        raise ConfigError("--resume needs a session ID with -p; list them with 'ketch sessions', or use --continue")
    if resume:
        row = store.get_session(resume)
        if row is None:
            raise ConfigError(f"no session '{resume}'; list them with 'ketch sessions'")
        return row
    return None


async def build_session(args: Any, *, interactive: bool, model_override: Any = None, titles: bool = False) -> Any:
    """Build the Session the arguments describe (resuming one when asked).

    ``titles``: name a new session after its first turn (the interactive front end asks for it)."""
    from pydantic_ai.exceptions import ToolFailed, UserError

    from ketch.state import memory

    from ketch.state import notebook

    from ketch.extensions import skills
    from ketch.extensions.hooks import HookRunner
    from ketch.providers.models import build_model, model_settings
    from ketch.extensions.plugins import ManifestError, compile_guard, config_rules, load_installed
    from ketch.core.prompt import CachedGitSummary, PromptState, build_instructions
    from ketch.extensions.rules import RuleError, RuleSet, rules_from_config
    from ketch.core.session import Session
    from ketch.tools import builtin_tool_specs
    from ketch.tools.base import ToolDeps, ToolSettings
    from ketch.tools.shell import ProcessRegistry
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

    store = _open_store()
    warnings: list[str] = []
    resumed_row = _resume_target(args, store, cwd, interactive=interactive)
    resumed = resumed_row.id if resumed_row is not None else None
    if resumed:
        from ketch.state.store import StoreError

        session_id = resumed
        if resumed_row.cwd != str(cwd):
            warnings.append(
                f"session {resumed} was started in {resumed_row.cwd}; it continues here, in {cwd}, "
                "and its tools work in this directory"
            )
        try:
            history = store.load_messages(resumed)
        except StoreError as exc:
            raise ConfigError(str(exc)) from None
    else:
        session_id = store.reserve_session(str(cwd), conn.ref, variant.name)  # a row once it stores a message
        history = []

    from ketch.websearch.wiring import session_search, tavily_settings

    search = session_search(
        config, conn, interactive=interactive, flag=bool(getattr(args, "web_search", False)), tool_ceiling=variant.tools
    )
    specs = builtin_tool_specs()
    if search.route.client_tool is not None:
        specs.append(search.route.client_tool)
    from ketch.websearch.wiring import web_research_available
    from ketch.core.subagent import ChildWiring, SubagentRunner, subagent_kinds, task_tool_spec

    task_kinds = subagent_kinds(config, {s.name: s.kind for s in specs}, web_research=web_research_available(search))
    specs.append(task_tool_spec(task_kinds))
    manifests = load_installed(user_config_dir(), root, warnings.append)
    try:
        guard = compile_guard(manifests, config_rules(config.guards), root=root)
        rules = RuleSet(rules_from_config(config.permissions), root=root)
        hooks = HookRunner(config.hooks, cwd) if config.hooks else None
    except (ManifestError, RuleError, ValueError) as exc:
        raise ConfigError(f"configuration: {exc}") from None
    gate = ApprovalGate(
        kinds={s.name: s.kind for s in specs},
        key_args={s.name: s.key_arg for s in specs},
        guard=guard,
        rules=rules,
        hooks=hooks,
        yolo=bool(getattr(args, "yolo", False)),
    )
    settings = ToolSettings(web_allow_loopback=os.environ.get("KETCH_TEST_ALLOW_LOOPBACK") == "1")
    notes = notebook.Notebook()
    catalog = skills.SkillCatalog.discover(root)
    book = memory.MemoryBook(store, str(root))
    deps = ToolDeps(
        workspace=workspace,
        processes=ProcessRegistry(),
        settings=settings,
        extras={"notebook": notes, "skills": catalog, "memory": book, "tavily": tavily_settings(config)},
    )
    descriptions = {s.name: (s.function.__doc__ or "").strip().splitlines()[0] if s.function.__doc__ else "" for s in specs}

    git_cache = CachedGitSummary(root)
    base_state = PromptState(
        cwd=cwd,
        root=root,
        agent_prompt=variant.prompt,
        task_list=notes.render_for_prompt,
        memory=lambda: book.render_for_prompt(4000),
        skills=catalog.render_for_prompt,
        git=git_cache,
    )

    def instructions(active: list[str]) -> str:
        git_cache.new_step()
        listed = [(name, descriptions.get(name, "")) for name in active] + search.prompt_entries()
        # the variant's prompt is read per request: /agent switches it on a live session
        state = dataclasses.replace(base_state, tools=listed, agent_prompt=session.variant.prompt)
        return build_instructions(state)

    def child_instructions(agent_prompt: str, task_list: Any, extra: list[tuple[str, str]]) -> Any:
        child_state = dataclasses.replace(base_state, agent_prompt=agent_prompt, task_list=task_list)

        def instructions_of_child(active: list[str]) -> str:
            listed = [(name, descriptions.get(name, "")) for name in active] + extra
            return build_instructions(dataclasses.replace(child_state, tools=listed))

        return instructions_of_child

    hub = None
    extra_kinds: dict[str, str] = {}
    if config.mcp.get("servers"):
        from ketch.extensions.mcp import start_mcp_servers

        hub = await start_mcp_servers(config.mcp)
        for status in hub.status():
            if status.state == "failed":
                warnings.append(f"MCP server '{status.name}' failed to start: {status.error}")
            for tool in status.tools:
                extra_kinds[tool] = "mcp"
                descriptions[tool] = f"MCP tool from server {status.name}"
        gate.kinds = {**gate.kinds, **extra_kinds}

    try:
        model = model_override if model_override is not None else build_model(
            conn, search.wire, profile=search.model_profile(), warm_up_now=interactive
        )
    except UserError as exc:  # the SDK refuses the model name or settings before any request
        raise ConfigError(f"model '{conn.ref}': {' '.join(str(exc).split())}") from None
    think = variant.think or config.think
    session = Session(
        config=config,
        connection=conn,
        model=model,
        workspace=workspace,
        specs=specs,
        variant=variant,
        gate=gate,
        interactive=interactive,
        deps=deps,
        instructions=instructions,
        store=store,
        session_id=session_id,
        history=history,
        extra_toolsets=hub.toolsets if hub is not None else (),
        extra_kinds=extra_kinds,
        capabilities=[
            *(_fallback_capability(conn, model) if model_override is None and search.wire == conn.wire else []),
            *search.route.capabilities(),
        ],
        model_settings=model_settings(think),
        compactor=_compactor(config, conn),
    )
    session.hooks = hooks
    session.web_search = search
    subagents = SubagentRunner(
        ChildWiring(
            workspace=workspace,
            specs=specs,
            gate=gate,
            interactive=interactive,
            processes=deps.processes,
            settings=settings,
            shared_extras={k: v for k, v in deps.extras.items() if k in ("skills", "tavily")},
            make_instructions=child_instructions,
            capabilities_for=lambda c, m: _fallback_capability(c, m) if (c is not conn or search.wire == conn.wire) else [],
            search=search,
            compactor_for=lambda c: _compactor(config, c),
            own_model=model_override is None,
        ),
        task_kinds,
    )
    deps.extras["subagents"] = subagents
    subagents.attach(session)
    session.mcp_hub = hub
    if hub is not None:
        session.closers.append(hub.aclose)
    session.closers.append(store.close)
    session.auto_title = titles and config.titles and not history
    for warning in [*warnings, *catalog.warnings]:
        session.startup_notices.append(warning)
    return session

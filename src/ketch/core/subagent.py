"""Subagents: the ``task`` tool runs a nested agent loop and returns one message.

A subagent is a child ``Session`` with its own history and task list, sharing the
parent's model, workspace, running-command registry and approval gate. What it may do
follows from the tools it holds:

- ``explore`` and ``review`` hold only reading tools (review adds the git tools), so
  they can never need approval;
- ``worker`` holds the reading and writing tools and the shell; its calls pass the
  parent's gate (same guards, rules, hooks, ``--yolo``) and, when a call must be asked,
  the parent's user answers a request that names the subagent; the user's
  ``after_tool`` hooks run after its calls as after the parent's;
- user-defined kinds come from ``config.agents`` (prompt, tools, model, thinking).

The parent's active tools are a ceiling: a child never holds a tool its parent lacks.
Progress goes out through the parent's event stream (``SubagentStarted`` /
``SubagentProgress`` / ``SubagentFinished`` plus the child's tool and approval events
tagged ``agent=<label>``); the parent's history keeps only the final message.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.protocol import events as ev
from ketch.core.agents import AgentVariant
from ketch.config.settings import Config
from ketch.tools.base import ToolDeps, ToolSpec

SEARCH_TOOL = "web_search"
"""Hosted or client search; not in the parent's function tools when the provider runs it."""

DEFAULT_MAX_CONCURRENT = 4
"""Subagents running at once; further ``task`` calls of the same step wait their turn."""

_EXPLORE_PROMPT = (
    "You are a subagent exploring the project on behalf of another agent. Search and read; "
    "you cannot change anything. Finish with one concise report of what you found, citing "
    "path:line, written for the agent that sent you: it sees only this final message."
)
_REVIEW_PROMPT = (
    "You are a subagent reviewing changes on behalf of another agent. Read the diff, the "
    "history and the code around it; you cannot change anything. Finish with one concise "
    "review (problems first, each with path:line): the requesting agent sees only that message."
)
_WORKER_PROMPT = (
    "You are a subagent carrying out one delegated task for another agent. Do the work, "
    "check it, and finish with a short report of what you changed and what remains: the "
    "requesting agent sees only that final message."
)
_RESEARCH_PROMPT = (
    "You are a subagent researching a question on the web on behalf of another agent. Search, "
    "compare sources, and finish with a concise answer that cites the URLs you relied on: the "
    "requesting agent sees only that final message."
)
_USER_KIND_PROMPT = (
    "You are a subagent working on behalf of another agent, which sees only your final "
    "message: end with a concise, self-contained report."
)


@dataclass(frozen=True)
class SubagentKind:
    """What a kind of subagent is: its prompt and the tools it may hold."""

    name: str
    prompt: str
    tools: tuple[str, ...]
    model: str | None = None
    think: str | None = None
    description: str = ""


def _names(kinds: Mapping[str, str], wanted: set[str], *, git: bool = True) -> tuple[str, ...]:
    return tuple(n for n, k in kinds.items() if k in wanted and (git or not n.startswith("git_")))


def subagent_kinds(config: Config, tool_kinds: Mapping[str, str], *, web_research: bool = False) -> dict[str, SubagentKind]:
    """The kinds ``task`` accepts: the built-in ones (``web_research`` only when search is
    routed for children), then every agent in config (a config agent named like a built-in
    kind replaces it). A config agent without an explicit tool list gets the worker's tools."""
    worker_tools = (*_names(tool_kinds, {"read", "write", "shell"}), "todo_write")
    kinds = {
        "explore": SubagentKind("explore", _EXPLORE_PROMPT, _names(tool_kinds, {"read"}, git=False),
                                description="searches and reads the project (read-only)"),
        "review": SubagentKind("review", _REVIEW_PROMPT, _names(tool_kinds, {"read"}),
                               description="reviews changes with the reading and git tools (read-only)"),
        "worker": SubagentKind("worker", _WORKER_PROMPT, worker_tools,
                               description="reads, edits files and runs commands (its calls are approved like yours)"),
    }
    if web_research:
        kinds["web_research"] = SubagentKind(
            "web_research", _RESEARCH_PROMPT, (*_names(tool_kinds, {"read"}, git=False), SEARCH_TOOL),
            description="searches the web and the project (read-only)",
        )
    for name, agent in config.agents.items():
        prompt = f"{_USER_KIND_PROMPT}\n\n{agent.prompt}".strip()
        tools = tuple(agent.tools) if agent.tools is not None else worker_tools
        kinds[name] = SubagentKind(name, prompt, tools, agent.model, agent.think, agent.description)
    return kinds


def child_variant(kind: SubagentKind, ceiling: Sequence[str]) -> AgentVariant:
    """The child's agent variant: the kind's tools within the parent's active tools,
    never ``task`` itself (no nesting) nor the interactive ``ask``."""
    allowed = set(ceiling) - {"task", "ask"}
    return AgentVariant(
        name=kind.name,
        prompt=kind.prompt,
        tools=tuple(t for t in kind.tools if t in allowed),
        model=kind.model,
        think=kind.think,
        description=kind.description,
    )


ChildFactory = Callable[[Any, AgentVariant, str], Any]
"""Builds a child Session: ``(parent, variant, label) -> Session``."""


@dataclass
class ChildWiring:
    """What a child Session shares with its parent; calling it builds one child.

    Shared: the parent's current connection, model and thinking level (unless the kind
    names its own; read at call time, so ``/model`` and ``/think`` carry over), workspace, the
    running-command registry (Ctrl-C reaches the child's commands), the gate object
    (guards, rules, hooks, yolo), the interactive flag, and the parent's pending-request
    table (so the parent's ``decide`` answers the child's approvals). Own: history,
    task list, tool deps, instructions."""

    workspace: Any
    specs: Sequence[ToolSpec]
    gate: Any
    interactive: bool
    processes: Any
    settings: Any
    shared_extras: Mapping[str, Any]
    make_instructions: Callable[[str, Callable[[], str], list[tuple[str, str]]], Callable[[list[str]], str]]
    """``(agent_prompt, task_list, extra_tool_lines) -> instructions(active_tools)``."""
    capabilities_for: Callable[[Any, Any], list[Any]]
    """``(connection, model) -> capabilities`` such as the sticky Responses fallback."""
    search: Any = None
    """The parent's ``search_wiring.SessionSearch``; a child gets search only if its tool list names it."""
    compactor_for: Callable[[Any], Any] | None = None
    """``connection -> Compactor`` so a long child run is compacted like its parent."""
    own_model: bool = True
    """False when a test injected the model: kinds then never build their own."""
    always_capabilities: Sequence[Any] = ()
    """Capabilities every child gets whatever its model (the tool-output key redaction)."""

    def __call__(self, parent: Any, variant: AgentVariant, label: str) -> Any:
        from ketch.providers.models import model_settings
        from ketch.tools.notebook import Notebook
        from ketch.websearch.wiring import NATIVE_SEARCH_HINT, child_search_route
        from ketch.core.session import Session
        from ketch.core.session_services import SessionServices

        config: Config = parent.config
        conn, model = parent.connection, parent.model
        if variant.model and self.own_model:
            conn, model = self._model_for(config, conn, variant.model)
        # The parent's search now (``/model`` re-decides it), judged on the child's own model when it has one.
        own_connection = conn if conn is not parent.connection else None
        route = child_search_route(getattr(parent, "web_search", None) or self.search, variant.tools, connection=own_connection)
        wanted = set(variant.tools) if variant.tools is not None else None
        specs = [s for s in self.specs if wanted is None or s.name in wanted]  # schemas cost ~10 ms a tool
        if route.client_tool is not None and route.client_tool.name not in {s.name for s in specs}:
            specs.append(route.client_tool)
        hosted = [(SEARCH_TOOL, NATIVE_SEARCH_HINT)] if route.native_tool is not None else []
        notes = Notebook()
        deps = ToolDeps(
            workspace=self.workspace,
            processes=self.processes,
            settings=self.settings,
            extras={**self.shared_extras, "notebook": notes},
        )
        child = Session(
            config=config,
            connection=conn,
            model=model,
            workspace=self.workspace,
            specs=specs,
            variant=variant,
            services=SessionServices(  # never stored; its diffs, previews and summaries redacted as the parent's
                gate=self.gate,
                key_ring=parent.key_ring,
                hooks=ChildHooks(parent.hooks) if parent.hooks is not None else None,
            ),
            interactive=self.interactive,
            deps=deps,
            instructions=self.make_instructions(variant.prompt, notes.render_for_prompt, hosted),
            session_id=f"{parent.session_id}.{label}",
            capabilities=[*(self.capabilities_for(conn, model) if self.own_model else []), *route.capabilities(),
                          *self.always_capabilities],
            model_settings=model_settings(variant.think or config.think, model=model if self.own_model else None, conn=conn),
            compactor=self.compactor_for(conn) if self.compactor_for is not None else None,
            label=label,
            pending=parent._pending,  # the parent's decide() answers the child's requests
            background=parent._background,  # the child's after-tool hooks outlive it; the parent awaits them
        )
        return child

    @staticmethod
    def _model_for(config: Config, parent_conn: Any, ref: str) -> tuple[Any, Any]:
        """``connection:model`` resolves through config; a bare name keeps the parent's endpoint."""
        from ketch.config.settings import resolve_connection
        from ketch.providers.models import build_model

        if ":" in ref or parent_conn is None:
            conn = resolve_connection(config, ref)
        else:
            conn = dataclasses.replace(parent_conn, model_name=ref)
        return conn, build_model(conn)


class ChildHooks:
    """The parent's user hooks as a child session runs them: ``after_tool`` fires for the
    child's calls exactly as for the parent's (``before_tool`` already runs in the shared
    gate); ``prompt_submitted`` and ``turn_stopped`` belong to the user's own turn, not to
    the subagent's."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner

    def after_tool(self, name: str, args: Mapping[str, Any], result_summary: str, is_error: bool) -> Any:
        return self.runner.after_tool(name, args, result_summary, is_error)

    async def prompt_submitted(self, text: str) -> None:
        return None

    async def turn_stopped(self, reason: str) -> None:
        return None


class SubagentRunner:
    """Runs subagents for one parent session; lives in ``ToolDeps.extras['subagents']``."""

    def __init__(
        self,
        factory: ChildFactory,
        kinds: Mapping[str, SubagentKind],
        *,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
    ) -> None:
        self.factory = factory
        self.kinds = dict(kinds)
        self.max_concurrent = max(1, max_concurrent)
        self.parent: Any = None
        self._slots: asyncio.Semaphore | None = None
        self._counts: Counter[str] = Counter()

    def attach(self, parent: Any) -> None:
        """Bind the parent Session (its ceiling, usage totals and pending requests)."""
        self.parent = parent

    def _ceiling(self) -> list[str]:
        """The parent's tools now, plus hosted search when the parent's route sends it."""
        tools = list(self.parent.active_tools())
        search = getattr(self.parent, "web_search", None)
        if search is not None and search.route.native_tool is not None:
            tools.append(SEARCH_TOOL)
        return tools

    def _next_label(self, kind: str) -> str:
        self._counts[kind] += 1
        return f"{kind}-{self._counts[kind]}"

    async def run(self, *, kind: str, description: str, prompt: str, emit: Callable[[Any], None]) -> str:
        """Run one subagent to its end and return its final message."""
        spec = self.kinds.get(kind)
        if spec is None:
            raise ToolFailed(f"Unknown subagent kind '{kind}'; use one of: {', '.join(self.kinds)}.")
        if self.parent is None:
            raise ToolFailed("Subagents are not available in this session.")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrent)
        label = self._next_label(kind)
        variant = child_variant(spec, self._ceiling())
        async with self._slots:
            child = self.factory(self.parent, variant, label)
            try:
                return await self._drive(child, label, kind, description, prompt, emit)
            finally:
                await child.aclose()

    async def _drive(self, child: Any, label: str, kind: str, description: str, prompt: str,
                     emit: Callable[[Any], None]) -> str:
        def forward(event: Any) -> None:
            emit(dataclasses.replace(event, session_id="", turn_id="", agent=label))

        forward(ev.SubagentStarted(subagent_id=label, kind=kind, description=description))
        reason, text, failure = "error", "", ""
        try:
            async for event in child.run_turn(prompt):
                match event:
                    case ev.TurnFinished():
                        reason, text = event.reason, event.text
                    case ev.ToolCallStarted():
                        forward(event)
                        key = getattr(child.specs.get(event.name), "key_arg", "")
                        detail = str(event.args.get(key, "")) if key else ""
                        forward(ev.SubagentProgress(subagent_id=label, tool=event.name, detail=_clip(detail)))
                    case ev.Usage():
                        forward(self._roll_up(event))
                    case ev.Error():
                        failure = event.message
                        forward(ev.Notice(level="warning", text=f"{label}: {event.message}"))
                    case ev.ToolCallFinished() | ev.ApprovalRequested() | ev.ApprovalResolved() | ev.AskRequested() | ev.Notice():
                        forward(event)
                    case _:
                        pass  # text, reasoning, live output and the child's todo list stay inside
        finally:
            forward(
                ev.SubagentFinished(
                    subagent_id=label,
                    ok=reason == "done",
                    input_tokens=child.input_tokens,
                    output_tokens=child.output_tokens,
                    cost_usd=child.cost_usd,
                )
            )
        if reason == "error":
            raise ToolFailed(f"The {kind} subagent failed: {failure or 'no answer'}")
        text = text.strip() or "(the subagent finished without a message)"
        if reason == "step_limit":
            text += "\n\n[the subagent hit the step limit before finishing]"
        elif reason == "max_tokens":
            text += "\n\n[the subagent's answer was cut at the model's output limit; it is incomplete]"
        return text

    def _roll_up(self, usage: ev.Usage) -> ev.Usage:
        """Add a child's response to the parent's totals; the event shows the parent's total."""
        parent = self.parent
        parent.input_tokens += usage.input_tokens
        parent.output_tokens += usage.output_tokens
        parent.cache_read_tokens += usage.cache_read_tokens
        parent.cache_write_tokens += usage.cache_write_tokens
        if usage.cost_usd is None:
            parent.cost_usd = None
        elif parent.cost_usd is not None:
            parent.cost_usd += usage.cost_usd
        return dataclasses.replace(usage, session_cost_usd=parent.cost_usd)


def _clip(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


async def task(ctx: RunContext[ToolDeps], description: str, prompt: str, kind: str = "explore") -> str:
    """Hand a self-contained task to a subagent and get back its final report.

    Kinds: explore (searches and reads, read-only), review (reads the code, diff and
    history, read-only), worker (edits files and runs commands; its calls are approved as
    yours are), or a kind defined in the configuration. The subagent starts with no view
    of this conversation: put everything it needs in the prompt. Several task calls in one
    step run at the same time.

    Args:
        description: A short label for the task (a few words), shown while it runs.
        prompt: The full task: what to do, what to look at, what to report back.
        kind: The kind of subagent: explore, review, worker, or a configured kind.
    """
    runner = ctx.deps.extras.get("subagents")
    if not isinstance(runner, SubagentRunner):
        raise ToolFailed("Subagents are not available in this session.")
    return await runner.run(kind=kind, description=description, prompt=prompt, emit=ctx.deps.emit)


def task_tool_spec(kinds: Mapping[str, SubagentKind] | None = None) -> ToolSpec:
    """The ``task`` tool; configured kinds are listed in its description. Kind "meta":
    calling it needs no approval, the child's own calls are gated one by one."""
    function: Any = task
    extra = [k for k in (kinds or {}) if k not in ("explore", "review", "worker")]
    if extra:
        async def configured_task(ctx: RunContext[ToolDeps], description: str, prompt: str, kind: str = "explore") -> str:
            return await task(ctx, description, prompt, kind)

        configured_task.__doc__ = (task.__doc__ or "").replace(
            "or a kind defined in the configuration",
            "or a configured kind: " + ", ".join(f"{k} ({kinds[k].description or 'user-defined'})" for k in extra),  # type: ignore[index]
        )
        function = configured_task
    return ToolSpec(name="task", function=function, kind="meta", key_arg="description")


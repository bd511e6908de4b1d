"""The seam between the agent core and every front end.

The session yields these events; the TUI, the headless printers and the tests consume
them. Events are plain frozen data with a ``type`` tag and ids, so ``stream-json`` output
is exactly ``event.to_dict()`` per line. Nothing live (no callables, no SDK objects)
ever sits inside an event.

*Requests* (approval, ask) are events that expect an answer: the front end answers
through the session (``Session.decide`` / ``Session.answer``) using the request id.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, Union

Decision = Literal["allow", "allow_session", "deny", "allow_rule", "allow_rule_saved"]
"""``allow_rule``: allow this call and add an allow rule for the session (the pattern goes
where a denial's reason goes); ``allow_rule_saved``: the same, and write it to the user's config."""
DecidedBy = Literal["user", "rule", "guard", "yolo", "default", "hook", "sandbox"]


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


@dataclass(frozen=True, kw_only=True)
class _Event:
    session_id: str = ""
    turn_id: str = ""
    agent: str = ""
    """Subagent label when the event came from a child agent (empty for the main agent)."""

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(self)


@dataclass(frozen=True, kw_only=True)
class TurnStarted(_Event):
    type: Literal["turn_started"] = "turn_started"
    prompt: str = ""
    model: str = ""


@dataclass(frozen=True, kw_only=True)
class TextDelta(_Event):
    type: Literal["text_delta"] = "text_delta"
    text: str


@dataclass(frozen=True, kw_only=True)
class ReasoningDelta(_Event):
    type: Literal["reasoning_delta"] = "reasoning_delta"
    text: str


@dataclass(frozen=True, kw_only=True)
class ToolCallStarted(_Event):
    type: Literal["tool_call_started"] = "tool_call_started"
    call_id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ToolOutputChunk(_Event):
    type: Literal["tool_output"] = "tool_output"
    call_id: str
    text: str
    stream: Literal["stdout", "stderr"] = "stdout"


@dataclass(frozen=True, kw_only=True)
class ToolCallFinished(_Event):
    type: Literal["tool_call_finished"] = "tool_call_finished"
    call_id: str
    name: str
    summary: str
    is_error: bool = False
    diff: str = ""
    """A unified diff for edits and writes (empty otherwise), for coloured display."""


@dataclass(frozen=True, kw_only=True)
class ApprovalRequested(_Event):
    type: Literal["approval_requested"] = "approval_requested"
    request_id: str
    call_id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    preview: str = ""
    """What will happen: the command for the shell, a diff for edits."""
    reason: str = ""
    """Why the gate asks instead of allowing: the ask rule that matched, the run-later path,
    or why no allow rule applied to the command (empty when the tool simply asks by default)."""
    cwd: str = ""
    """Where the command runs (the shell)."""
    sandbox: str = ""
    """What the sandbox lets the call do and not do (the shell)."""
    rule_proposal: str = ""
    """The ``shell(...)`` pattern "allow commands like this" would add ('' when none)."""
    no_rule_because: str = ""
    """Why no rule is proposed for a shell command."""


@dataclass(frozen=True, kw_only=True)
class ApprovalResolved(_Event):
    type: Literal["approval_resolved"] = "approval_resolved"
    call_id: str
    name: str
    decision: Decision
    by: DecidedBy
    reason: str = ""
    rule: str = ""
    """The rule or guard that decided, when not the user."""


@dataclass(frozen=True, kw_only=True)
class AskRequested(_Event):
    type: Literal["ask_requested"] = "ask_requested"
    request_id: str
    call_id: str
    question: str
    choices: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Compacted(_Event):
    type: Literal["compacted"] = "compacted"
    tokens_before: int
    tokens_after: int
    stage: str = ""


@dataclass(frozen=True, kw_only=True)
class PrefixBreak(_Event):
    """The next request does not extend the one before byte for byte (the provider's prompt
    cache starts again from the first change): a compaction, or the user changed the model,
    the agent, the tools, the instruction files or the skills."""

    type: Literal["prefix_break"] = "prefix_break"
    cause: str


@dataclass(frozen=True, kw_only=True)
class Usage(_Event):
    type: Literal["usage"] = "usage"
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    """Of `input_tokens`, read from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Of `input_tokens`, written to the provider's prompt cache (billed above the base price on Anthropic)."""
    cost_usd: float | None = None
    """USD for this response (cache reads and writes at their own prices); None when the price of the model is unknown."""
    session_cost_usd: float | None = None


@dataclass(frozen=True, kw_only=True)
class TodoUpdated(_Event):
    type: Literal["todo_updated"] = "todo_updated"
    items: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class WebSearchResult(_Event):
    type: Literal["web_search_result"] = "web_search_result"
    call_id: str
    query: str
    sources: list[dict[str, str]] = field(default_factory=list)
    """Normalized sources: title, url, snippet."""


@dataclass(frozen=True, kw_only=True)
class SubagentStarted(_Event):
    type: Literal["subagent_started"] = "subagent_started"
    subagent_id: str
    kind: str
    description: str = ""


@dataclass(frozen=True, kw_only=True)
class SubagentProgress(_Event):
    type: Literal["subagent_progress"] = "subagent_progress"
    subagent_id: str
    tool: str
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class SubagentFinished(_Event):
    type: Literal["subagent_finished"] = "subagent_finished"
    subagent_id: str
    ok: bool = True
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True, kw_only=True)
class Notice(_Event):
    type: Literal["notice"] = "notice"
    level: Literal["info", "warning"] = "info"
    text: str


@dataclass(frozen=True, kw_only=True)
class LanguageServerNotice(Notice):
    """A language server was restarted after it died, or dropped for the rest of the session
    (it died again, hung, or could not start): one such notice per happening. A front end that
    knows only ``Notice`` shows it as one."""

    type: Literal["language_server"] = "language_server"  # type: ignore[assignment]
    level: Literal["info", "warning"] = "warning"
    server: str = ""
    """The server's name in config (its language: ``python``, ``typescript``, ...)."""
    state: Literal["restarted", "dropped"] = "dropped"


@dataclass(frozen=True, kw_only=True)
class Error(_Event):
    type: Literal["error"] = "error"
    kind: Literal["config", "provider", "tool", "interrupted", "internal"]
    message: str
    retryable: bool = False


@dataclass(frozen=True, kw_only=True)
class BackgroundFinished(_Event):
    """A background command (``shell`` with ``background``) ended: it exited, was stopped by
    ``shell_kill`` or ``/bashes``, or the session ended. ``exit_code`` is negative for a signal."""

    type: Literal["background_finished"] = "background_finished"
    job_id: str
    command: str
    exit_code: int | None = None
    how: str = ""
    """What ended it, as the transcript says it: "exit code 0", "killed by signal SIGTERM", "stopped by shell_kill"."""


@dataclass(frozen=True, kw_only=True)
class TurnFinished(_Event):
    type: Literal["turn_finished"] = "turn_finished"
    reason: Literal["done", "refused", "step_limit", "max_tokens", "cost_limit", "time_limit", "error", "interrupted", "cancelled"]
    """``refused``: the provider or model declined to answer (a content filter, a refusal stop);
    ``cost_limit`` / ``time_limit``: a headless run's ``--max-cost`` / ``--time-limit`` ended it."""
    text: str = ""
    """The final answer of the turn."""


AgentEvent = Union[
    TurnStarted,
    TextDelta,
    ReasoningDelta,
    ToolCallStarted,
    ToolOutputChunk,
    ToolCallFinished,
    ApprovalRequested,
    ApprovalResolved,
    AskRequested,
    Compacted,
    PrefixBreak,
    Usage,
    TodoUpdated,
    WebSearchResult,
    SubagentStarted,
    SubagentProgress,
    SubagentFinished,
    Notice,
    LanguageServerNotice,
    Error,
    BackgroundFinished,
    TurnFinished,
]

EVENT_TYPES: dict[str, type] = {cls.__dataclass_fields__["type"].default: cls for cls in AgentEvent.__args__}  # type: ignore[attr-defined]


def event_from_dict(data: dict[str, Any]) -> AgentEvent:
    """Rebuild an event from its ``to_dict`` form (used by export and tests)."""
    cls = EVENT_TYPES[data["type"]]
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names and k != "type"})

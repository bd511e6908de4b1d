"""What every tool shares: its declaration (``ToolSpec``) and its dependencies (``ToolDeps``).

A tool is a plain ``async def fn(ctx: RunContext[ToolDeps], ...) -> str`` whose docstring
and annotated parameters become the schema the model sees. A tool reports a failure the
model should see by raising ``pydantic_ai.exceptions.ToolFailed``; it never decides its
own approval (the gate in ``approval.py`` does that before the body is reached).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ketch.protocol.events import AgentEvent

ToolKind = Literal["read", "write", "shell", "network", "interactive", "meta"]
"""How the gate treats a tool by default: read and meta are allowed; write, shell and
network ask; interactive (ask) is withheld in headless mode."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    function: Callable[..., Any]
    kind: ToolKind
    key_arg: str = ""
    """The argument shown in the transcript line and matched by permission patterns
    (``path`` for file tools, ``command`` for the shell, ``url`` for web_fetch)."""


@dataclass
class ToolSettings:
    shell_timeout_s: float = 120.0
    """Default timeout for one shell command."""
    shell_output_cap: int = 30_000
    """Characters of shell output kept (head and tail) in the tool result."""
    read_max_bytes: int = 256_000
    """Largest file read_file returns whole; larger files need a line range."""
    grep_max_results: int = 200
    web_max_bytes: int = 2_000_000
    web_timeout_s: float = 20.0
    web_allow_loopback: bool = False
    """Tests only, and only from code (no variable or flag sets it): lets web_fetch reach 127.0.0.1."""
    sandbox: Any = None
    """The session's ``ketch.sandbox.runtime.Sandbox`` (None: commands run unconfined)."""
    child_env: Any = None
    """The ``tools.child_env.ChildEnv`` shell commands run with (None: the process's, which at
    least withholds every variable whose name looks like a secret)."""


def _drop_event(event: AgentEvent) -> None:
    return None


@dataclass
class ToolDeps:
    """Live services handed to tools through ``RunContext.deps``."""

    workspace: Any
    """A ``ketch.tools.workspace.Workspace``: root, added dirs, the path jail."""
    emit: Callable[[AgentEvent], None] = _drop_event
    """Publish an event (tool output chunks, todo updates) to the session's stream."""
    processes: Any = None
    """A ``ketch.tools.shell.ProcessRegistry`` of running commands by tool call id."""
    settings: ToolSettings = field(default_factory=ToolSettings)
    extras: dict[str, Any] = field(default_factory=dict)
    """Optional services by name: 'notebook', 'memory', 'skills', 'ask', 'subagents',
    'commit_model'. A tool whose service is absent raises ToolFailed."""

    @property
    def root(self) -> Path:
        return self.workspace.root

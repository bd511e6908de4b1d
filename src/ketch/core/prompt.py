"""The instructions (system prompt) of a session and the volatile state that goes beside them.

:func:`build_instructions` renders what describes the user's choices: the base prompt, the
agent variant, the tools offered, the project's instruction files, the skills installed and
where ketch runs. It is byte-identical from one request to the next until the user changes one
of those, so the provider's prompt cache keeps serving the whole prefix. What moves during a
session (date, git status, memory, the task list) is :func:`volatile_sections`: the session
sends it as a reminder appended to the history when it changed (``context.reminders``), so a
task list written on step one is in step two's request without rewriting the prefix.
The prompt lists only the tools offered, and the fixed text never names a tool, so a
withheld tool is absent from the prompt just as it is absent from the wire.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

INSTRUCTION_FILE_NAMES = ("AGENTS.md", "KETCH.md", "CLAUDE.md")
"""Project instruction files, in the order they are read within one directory."""

MAX_INSTRUCTION_FILE_CHARS = 40_000
"""Longer instruction files are cut, with a note saying so."""

BASE_PROMPT = """\
You are ketch, a coding agent working in the user's terminal, inside their project.

How you work:
- Be brief. Answer in a few sentences unless the user asks for depth; no preamble, no \
recap of what you are about to do.
- Look before you change anything: read the relevant code and search the project rather \
than guessing at names, paths or APIs. Read a file before editing it.
- Prefer small, targeted edits that follow the project's existing style and conventions.
- Use the tools you are given to act and to check your work; run the project's tests or \
build when that is how a change can be verified.
- When a tool fails or is denied, read the reason and adjust; do not repeat the same call \
unchanged.
- Do not invent facts about the code. If something is unclear and it matters, say so and \
check with the user.
- Never expose secrets. Take destructive or irreversible actions only when the user wants \
them.
- Refer to code as path:line so the user can jump to it."""

COMPACT_PROMPT = """\
You are ketch, a coding agent in the user's terminal, inside their project. Be brief. Read \
before you edit; make small edits; use the tools to act and to check your work; do not \
guess at names or paths. Refer to code as path:line."""
"""The instructions of the compact profile (``context.small_window``), for small windows."""

_TOOL_HINTS = {
    "todo_write": "For work with several steps, keep the todo list current with todo_write.",
    "ask": "Use ask only when a decision truly needs the user; otherwise proceed.",
    "task": "Hand broad searches or independent sub-problems to task so your context stays small.",
}
"""Extra guidance that names a tool, included only when that tool is offered."""

Lazy = str | Callable[[], str]
"""A prompt section given as text or as a function computing it when the prompt is built."""


def _default_os() -> str:
    return f"{platform.system()} {platform.release()}".strip()


@dataclass
class InstructionFileCache:
    """Contents of instruction files, re-read only when a file's mtime or size changes."""

    _entries: dict[Path, tuple[int, int, str]] = field(default_factory=dict)

    def read(self, path: Path) -> str | None:
        """The file's text (cut at :data:`MAX_INSTRUCTION_FILE_CHARS`), or None if unreadable."""
        try:
            st = path.stat()
        except OSError:
            self._entries.pop(path, None)
            return None
        entry = self._entries.get(path)
        if entry is not None and entry[0] == st.st_mtime_ns and entry[1] == st.st_size:
            return entry[2]
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        if len(text) > MAX_INSTRUCTION_FILE_CHARS:
            text = text[:MAX_INSTRUCTION_FILE_CHARS] + "\n[… file cut here: too long to include whole]"
        self._entries[path] = (st.st_mtime_ns, st.st_size, text)
        return text


def find_instruction_files(root: Path, cwd: Path) -> list[Path]:
    """Instruction files from ``root`` down to ``cwd``, outermost first.

    Within a directory the order is :data:`INSTRUCTION_FILE_NAMES`. When ``cwd`` is not
    inside ``root`` only ``cwd`` is searched.
    """
    root, cwd = Path(os.path.abspath(root)), Path(os.path.abspath(cwd))
    try:
        rel = cwd.relative_to(root)
    except ValueError:
        dirs = [cwd]
    else:
        dirs = [root]
        for name in rel.parts:
            dirs.append(dirs[-1] / name)
    found: list[Path] = []
    for directory in dirs:
        for name in INSTRUCTION_FILE_NAMES:
            candidate = directory / name
            if candidate.is_file():
                found.append(candidate)
    return found


def git_summary(root: Path, *, timeout: float = 1.5) -> str:
    """One line on the repository at ``root``: branch, upstream drift and changed files.

    Runs ``git status`` through the hardened git launcher (no program the repository's
    config names can run), with a short timeout. Returns "" when git is missing, ``root``
    is not a repository, or git is too slow; outside any repository without starting git
    (it runs once per step: a long turn outside a repository started two git processes a step).
    """
    from ketch.tools.gitsafe import GitLaunchError, in_a_repository, run_git

    if not in_a_repository(root):
        return ""
    args = ["status", "--porcelain=v1", "--branch", "--untracked-files=normal", "--ignore-submodules=dirty"]
    try:
        done = run_git(root, args, timeout_s=timeout, max_bytes=1024 * 1024)
    except GitLaunchError:
        return ""
    if done.returncode != 0:
        return ""
    return summarize_porcelain(done.stdout.decode("utf-8", "replace"))


def summarize_porcelain(output: str) -> str:
    """Turn ``git status --porcelain=v1 --branch`` output into one short line."""
    lines = output.splitlines()
    branch = "unknown"
    drift = ""
    if lines and lines[0].startswith("## "):
        head = lines.pop(0)[3:]
        if head.startswith("No commits yet on "):
            branch = head.removeprefix("No commits yet on ") + " (no commits yet)"
        elif head.startswith("HEAD (no branch)"):
            branch = "detached HEAD"
        else:
            name, _, rest = head.partition("...")
            branch = name.split(" ", 1)[0]
            if "[" in rest:
                drift = " " + rest[rest.index("[") :]
    counts: dict[str, int] = {}
    for line in lines:
        code = line[:2]
        kind = (
            "untracked" if code == "??"
            else "conflicted" if "U" in code or code in ("AA", "DD")
            else "staged" if code[0] not in " ?" and code[1] == " "
            else "modified"
        )  # fmt: skip
        counts[kind] = counts.get(kind, 0) + 1
    state = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "clean"
    return f"branch {branch}{drift}; {state}"


class CachedGitSummary:
    """``git_summary`` computed at most once per step.

    Call :meth:`new_step` when a step starts; calling the object returns the summary,
    running git only on the first call of the step.
    """

    def __init__(self, root: Path, *, timeout: float = 1.5) -> None:
        self.root = root
        self.timeout = timeout
        self._value: str | None = None

    def new_step(self) -> None:
        """Forget the summary so the next call reads the repository again."""
        self._value = None

    def __call__(self) -> str:
        if self._value is None:
            self._value = git_summary(self.root, timeout=self.timeout)
        return self._value


@dataclass
class PromptState:
    """Everything one step's instructions are built from; the session fills it."""

    cwd: Path
    """Where the user started ketch."""
    root: Path | None = None
    """The workspace (repository) root; None means ``cwd``."""
    tools: Sequence[Any] = ()
    """The tools offered on this step only: ``(name, description)`` pairs or objects with
    ``name`` and ``description`` (a pydantic-ai ``ToolDefinition``)."""
    agent_prompt: Lazy = ""
    """The agent variant's own instructions (plan mode, a custom agent)."""
    task_list: Lazy = ""
    """The notebook's task list, rendered."""
    memory: Lazy = ""
    """Durable notes about the user and the project."""
    skills: Lazy = ""
    """The skill catalogue: names and when to use each."""
    git: Lazy = ""
    """The git summary line, typically a :class:`CachedGitSummary`."""
    os_name: str = field(default_factory=_default_os)
    today: Lazy = field(default=lambda: date.today().isoformat())
    """The date, read when the volatile sections are (a session running past midnight sees it change)."""
    files: InstructionFileCache = field(default_factory=InstructionFileCache)
    """Cache for project instruction files; keep one per session so reads are cached."""
    base_prompt: str = BASE_PROMPT


def _text(value: Lazy) -> str:
    return (value() if callable(value) else value).strip()


def _tool_line(tool: Any) -> tuple[str, str]:
    if isinstance(tool, tuple):
        name, description = tool
    else:
        name, description = tool.name, getattr(tool, "description", "") or ""
    first = next((ln.strip() for ln in str(description).splitlines() if ln.strip()), "")
    if len(first) > 160:
        first = first[:159] + "…"
    return str(name), first


def _section(title: str, body: str) -> str:
    return f"# {title}\n{body}" if body else ""


def _project_section(state: PromptState, root: Path) -> str:
    blocks: list[str] = []
    for path in find_instruction_files(root, state.cwd):
        text = state.files.read(path)
        if text and text.strip():
            try:
                label = path.relative_to(os.path.abspath(root)).as_posix()
            except ValueError:
                label = str(path)
            blocks.append(f"## {label}\n{text.strip()}")
    if not blocks:
        return ""
    intro = "Instructions from the project's files; deeper directories refine outer ones.\n\n"
    return _section("Project instructions", intro + "\n\n".join(blocks))


def build_instructions(state: PromptState) -> str:
    """The session's instructions as ``state`` describes them: nothing in them moves by itself
    (no date, git status, memory or task list: see :func:`volatile_sections`)."""
    root = state.root or state.cwd
    tool_lines = [_tool_line(t) for t in state.tools]
    offered = {name for name, _ in tool_lines}
    hints = [hint for name, hint in _TOOL_HINTS.items() if name in offered]
    base = state.base_prompt.strip()
    if hints:
        base += "\n" + "\n".join(f"- {h}" for h in hints)
    tools_body = "\n".join(f"- {name}: {desc}" if desc else f"- {name}" for name, desc in tool_lines)
    if not tool_lines:
        tools_body = "No tools are available on this step; answer from what you know."
    environment = "\n".join(
        line
        for line in (
            f"- Working directory: {state.cwd}",
            f"- Workspace root: {root}" if Path(root) != Path(state.cwd) else "",
            f"- OS: {state.os_name}",
        )
        if line
    )
    sections = [
        base,
        _section("Agent", _text(state.agent_prompt)),
        _section("Tools available on this step", tools_body),
        _project_section(state, Path(root)),
        _section("Skills", _text(state.skills)),
        _section("Environment", environment + "\n" + VOLATILE_NOTE),
    ]
    return "\n\n".join(s for s in sections if s)


VOLATILE_NOTE = (
    "The date, the git status, your memory notes and the list of work items reach you in <system-reminder> "
    "blocks in the conversation, sent by ketch (not typed by the user) when they change; the newest "
    "value of each item is the current one. Git status and memory are as of the user's latest message: "
    "your own changes since are not repeated."
)
"""Says in the instructions where the volatile state is (fixed text: it never moves the prefix)."""


SHOWN_BY_TOOLS = {"todo_write": "Task list", "todo_read": "Task list"}
"""Tools whose result is a volatile section's value as :func:`volatile_sections` renders it."""


def told_by_tool(tool_name: str, content: str) -> dict[str, str] | None:
    """The section a tool result showed the model (``context.reminders.ToolTeller``): the task
    list tools answer with the list as the reminder would carry it, so the model has seen it and
    no reminder repeats it. A result that differs from the current value (an error, an empty
    list's wording) only leads to the reminder being sent."""
    title = SHOWN_BY_TOOLS.get(tool_name)
    return {title: content.strip()} if title is not None else None


def volatile_sections(state: PromptState) -> dict[str, str]:
    """What moves during a session, by title in a fixed order: date, git status, memory notes
    and the task list, as they are now ("(none)" for an empty one)."""
    git = _text(state.git)
    return {
        "Date": _text(state.today),
        "Git": git or "not a repository",
        "Memory": _text(state.memory) or "(none)",
        "Task list": _text(state.task_list) or "(none)",
    }

"""The session's task list: what the agent plans to do and how far it got.

The model replaces the whole list with ``todo_write`` and reads it with ``todo_read``; the
list is rendered into the instructions before every step, so a write in one step is seen
by the next. Each write is published as a ``TodoUpdated`` event for the front ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, get_args

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import ToolCallPart, ToolReturnPart

from ketch.protocol.events import TodoUpdated
from ketch.tools.arg_shapes import Status, TodoInput  # its own small module: pydantic parses the file of its docstrings
from ketch.tools.base import ToolDeps, ToolSpec

STATUSES: tuple[str, ...] = get_args(Status)
_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


@dataclass(frozen=True)
class TodoItem:
    """One task: an id unique within the list, what to do, and its status."""

    id: str
    content: str
    status: Status = "pending"


class Notebook:
    """The current task list of one session."""

    def __init__(self) -> None:
        self._items: list[TodoItem] = []

    @property
    def items(self) -> list[TodoItem]:
        """The tasks in order (a copy)."""
        return list(self._items)

    def write(self, items: list[TodoItem] | list[dict[str, Any]]) -> None:
        """Replace the list. Raises ``ValueError`` naming the first bad item; the list is then unchanged."""
        self._items = validate_items(items)

    def restore(self, history: Sequence[Any]) -> None:
        """Set the list the last successful ``todo_write`` of ``history`` wrote (empty when none
        did), so a resumed, forked or rewound session holds the list its model was last shown.
        A stored call whose arguments no longer validate is passed over for an earlier one."""
        self._items = written_in(history)

    def as_dicts(self) -> list[dict[str, str]]:
        """The tasks as plain dicts (id, content, status), for events and storage."""
        return [asdict(item) for item in self._items]

    def render_for_prompt(self) -> str:
        """The list for the instructions, or '' when there is none."""
        if not self._items:
            return ""
        lines = ["Current task list (update it with todo_write as you work):"]
        lines += [f"{_MARKS[item.status]} {item.id}. {item.content}" for item in self._items]
        return "\n".join(lines)


def validate_items(items: list[TodoItem] | list[dict[str, Any]]) -> list[TodoItem]:
    """Check and normalize raw items: non-empty content, a known status, unique ids."""
    result: list[TodoItem] = []
    seen: set[str] = set()
    for index, raw in enumerate(items, start=1):
        data = asdict(raw) if isinstance(raw, TodoItem) else raw
        if not isinstance(data, dict):
            raise ValueError(f"item {index} must be an object with content and status")
        content = str(data.get("content") or "").strip()
        if not content:
            raise ValueError(f"item {index} has no content")
        status = data.get("status") or "pending"
        if status not in STATUSES:
            raise ValueError(f"item {index} has status {status!r}; use one of {', '.join(STATUSES)}")
        item_id = str(data.get("id") or index).strip()
        if item_id in seen:
            raise ValueError(f"item {index} repeats id {item_id!r}; ids must be unique")
        seen.add(item_id)
        result.append(TodoItem(id=item_id, content=content, status=status))
    return result


def written_in(history: Sequence[Any]) -> list[TodoItem]:
    """The task list the newest successful ``todo_write`` call of ``history`` wrote ([] if none)."""
    succeeded: set[str] = set()
    for message in reversed(history):
        for part in reversed(getattr(message, "parts", ())):
            if isinstance(part, ToolReturnPart) and part.tool_name == "todo_write" and part.outcome == "success":
                succeeded.add(part.tool_call_id)
            elif isinstance(part, ToolCallPart) and part.tool_name == "todo_write" and part.tool_call_id in succeeded:
                try:
                    todos = part.args_as_dict().get("todos")
                    if isinstance(todos, list):
                        return validate_items(todos)
                except (ValueError, TypeError, AttributeError):
                    pass
                succeeded.discard(part.tool_call_id)
    return []


def _notebook(ctx: RunContext[ToolDeps]) -> Notebook:
    notebook = ctx.deps.extras.get("notebook")
    if notebook is None:
        raise ToolFailed("the task list is not available in this session")
    return notebook


def _render_list(notebook: Notebook) -> str:
    return notebook.render_for_prompt() or "The task list is empty."


async def todo_write(ctx: RunContext[ToolDeps], todos: list[TodoInput]) -> str:
    """Replace the task list with `todos`. Use it for work with several steps: plan the steps,
    mark one in_progress when you start it and completed as soon as it is done.

    Args:
        todos: The whole new list, in order. Each task has `content` (what to do), `status`
            ('pending', 'in_progress' or 'completed') and optionally a short `id`.
    """
    notebook = _notebook(ctx)
    try:
        notebook.write(list(todos))
    except ValueError as exc:
        raise ToolFailed(f"task list not changed: {exc}") from exc
    ctx.deps.emit(TodoUpdated(items=notebook.as_dicts()))
    return _render_list(notebook)


async def todo_read(ctx: RunContext[ToolDeps]) -> str:
    """Show the current task list with each task's status."""
    return _render_list(_notebook(ctx))


TOOLS: list[ToolSpec] = [
    ToolSpec(name="todo_write", function=todo_write, kind="meta"),
    ToolSpec(name="todo_read", function=todo_read, kind="read"),
]

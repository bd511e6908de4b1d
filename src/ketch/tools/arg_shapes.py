"""The typed-dict shapes of tool arguments (an ``edit_file`` edit, a ``todo_write`` task).

In a module of their own, and kept small, because of how their schema is made: pydantic-ai builds
tool schemas with attribute docstrings on, and pydantic reads a TypedDict's field docstrings by
parsing the whole file that defines it (``inspect.getsourcelines``) at every start; this file
costs well under a millisecond where ``files.py`` cost ~10 ms.
"""

from __future__ import annotations

from typing import Literal

from typing_extensions import NotRequired, TypedDict

Status = Literal["pending", "in_progress", "completed"]


class Edit(TypedDict):
    """One exact replacement inside a file."""

    old_string: str
    """Text to find, exactly as in the file (whitespace included)."""
    new_string: str
    """Text to put in its place."""
    replace_all: NotRequired[bool]
    """Replace every occurrence instead of requiring exactly one."""


class TodoInput(TypedDict):
    """One task as the model writes it."""

    id: NotRequired[str]
    content: str
    status: Status

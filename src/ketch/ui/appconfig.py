"""Everything the interactive UI is given by its caller (cli.py, tests, the demo)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ketch.protocol.frontend import SessionLike


def _no_history() -> list[str]:
    return []


def _drop_history(text: str) -> None:
    return None


@dataclass
class AppConfig:
    """The UI's collaborators, injected so tests can pass stand-ins."""

    session_factory: Callable[[], Awaitable[SessionLike]]
    """Builds the session. Runs concurrently with the first frames: it must do slow
    imports off the event loop (e.g. ``await asyncio.to_thread(...)``)."""
    load_history: Callable[[], list[str]] = _no_history
    """Earlier prompts of this project, oldest first."""
    save_history: Callable[[str], None] = _drop_history
    """Persist one submitted prompt."""
    candidates: Callable[[], Iterable[str]] | None = None
    """Workspace-relative paths ('/' separators, directories ending in '/') offered by
    ``@``; called once, in a worker thread, right after start-up."""
    commands: Any = None
    """The slash-command registry (``match(prefix)``, ``suggest(name)``) or None."""
    on_command: Callable[[str, str], Awaitable[Any]] | None = None
    """Runs a command the core owns (/model x, /compact, ...); returns text to print (or
    replay items, for /resume)."""
    command_choices: Callable[[str], Awaitable[list[str]]] | None = None
    """Options for a picker command (/model, /resume, ...) opened without arguments."""
    rewind: Any = None
    """``/rewind`` and Esc twice: ``prompts()``, ``plan(turn)``, ``apply(turn, what)``
    (``frontends.rewind_actions.SessionRewind``), or None where there is nothing to rewind."""
    on_ready: Callable[[], Awaitable[Any]] | None = None
    """Called once the session is ready; returns text to print first, or a list of
    ``ui/replay.py`` items (the conversation of a resumed session, printed as it was)."""
    startup_error: Callable[[Exception], int | None] | None = None
    """Called when ``session_factory`` raises: an exit code ends the app at once (the
    caller reports the error), None keeps it open with the error shown."""
    first_input: str | None = None
    """A prompt or slash command run as soon as the session is ready, as if typed then
    (``ketch --resume`` without an ID opens the ``/resume`` picker this way)."""
    program: str = "ketch"
    """How the farewell spells the resume command."""
    approval_grace: float = 0.3
    """Keys typed this soon after an overlay appears are ignored (seconds)."""
    flush_interval: float = 0.06
    """How often streamed text is turned into output (seconds)."""
    trust_question: Callable[[], Awaitable[Any]] | None = None
    """Returns the folder's trust question (``ui.trust_overlay.TrustQuestion``) when its
    repository config must be asked about, else None; asked before the session is built."""
    typeahead: bytes = b""
    """Keys typed before the app started (see ``ui/typeahead.py``), replayed into the
    input before the first frame."""
    tool_output: Callable[[str], str | None] | None = None
    """The full result of a finished call by its call id (what the model got), for the
    pager; None when not known (the pager then shows the live output or the summary)."""
    display_prompt: Callable[[str], str] | None = None
    """How a sent prompt is echoed (e.g. ``@shot.png`` as ``[image: shot.png, 640x480]``)."""
    setup: Any = None
    """The first-run setup (``ui/setup.py``): ``wanted(exc)``, ``choices()``, ``apply(...)``;
    None where there is none."""

"""Opening the store and the history a session starts from: a new session or the one
``--continue`` / ``--resume`` names. Errors become one-line ``ConfigError``s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ketch.protocol.exceptions import ConfigError


def open_store() -> Any:
    from ketch.state.store import Store, StoreError

    try:
        return Store.open()
    except StoreError as exc:
        raise ConfigError(str(exc)) from None


def resume_target(args: Any, store: Any, cwd: Path, *, interactive: bool = True) -> Any:
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


def open_history(args: Any, store: Any, cwd: Path, *, model_ref: str, agent: str, interactive: bool,
                 warnings: list[str]) -> tuple[str, list[Any], Any]:
    """The session id and history to start from: the resumed session's (a copy of it with
    ``--fork``), or a reserved new id (a row only once it stores a message) and an empty history;
    and the ``SessionLocks`` holding that session's write lock (``SessionBusy`` when another
    ketch holds it)."""
    from ketch.state.session_lock import SessionLocks
    from ketch.state.store import StoreError

    locks = SessionLocks(store.path.parent)
    row = resume_target(args, store, cwd, interactive=interactive)
    if row is None:
        if getattr(args, "fork", False) and getattr(args, "resume", None) is None:
            raise ConfigError("--fork copies the session --continue or --resume ID names; add one of them")
        try:  # an id handed out before the session was built (``ketch acp``'s session/new)
            session_id = store.reserve_session(str(cwd), model_ref, agent, session_id=getattr(args, "new_session_id", None))
        except StoreError as exc:
            raise ConfigError(str(exc)) from None
        locks.claim(session_id)
        return session_id, [], locks
    if row.cwd != str(cwd):
        warnings.append(
            f"session {row.id} was started in {row.cwd}; it continues here, in {cwd}, "
            "and its tools work in this directory"
        )
    try:
        session_id = store.fork(row.id) if getattr(args, "fork", False) else row.id
        locks.claim(session_id)
        return session_id, store.load_messages(session_id), locks
    except StoreError as exc:
        raise ConfigError(str(exc)) from None

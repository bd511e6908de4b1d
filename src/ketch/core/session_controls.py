"""What front ends change between turns and what they read: model, thinking, agent,
the session switched to, the title of a new session, and the status line's figures.

A mixin of ``Session``. Every change a front end asks for arrives as an operation
(``core.operations``) through ``apply``, the one entry point; the methods behind it are private.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage

from ketch.core.agents import AgentVariant
from ketch.config.settings import Connection
from ketch.protocol import operations as op
from ketch.protocol.frontend import SessionStatus
from ketch.state.history_writer import HistoryWriter


class SessionControls:
    """Switching and status of one session (needs the attributes ``Session`` sets)."""

    def _require_idle(self) -> None:
        if self._turn_running():
            raise RuntimeError("a turn is running; wait for it or press esc first")

    def apply(self, operation: op.Operation) -> str | None:
        """Carry out what a front end asked for between turns. Returns the line to show for a
        mode switch, the new or kept session id for ``Clear`` and ``Fork`` (None when there was
        nothing to keep), else None. A running turn raises ``RuntimeError``; a bad mode ``ValueError``."""
        match operation:
            case op.SetModel(model, connection, search):
                self._set_model(model, connection)
                if search is not None:
                    self.web_search = search
                    if self.live_search is not None:
                        self.live_search.current = search
            case op.SetThinking(level, settings):
                self._set_thinking(level, settings)
            case op.SetAgent(variant):
                self._set_variant(variant)
            case op.SetApprovalMode(mode):
                return self._set_approval_mode(mode)
            case op.SetSandboxMode(mode):
                self._require_idle()
                return self._set_sandbox_mode(mode)
            case op.Clear(directory, in_place):
                return self._clear_in_place() if in_place else self._clear(directory)
            case op.Fork(in_place):
                return self._fork(in_place)
            case op.Resume(session_id, history):
                self._switch_to(session_id, history)
            case op.Repair(history):
                self._switch_to(self.session_id, history)
                if self.store is not None:
                    self.store.set_pending(self.session_id, None)
                self.history_rewritten = True  # a message may have changed in place: compare them all
                self._persist(list(history))
            case op.Rewind(history):
                if self.store is not None:
                    self.store.replace_history(self.session_id, list(history))
                    self.store.set_pending(self.session_id, None)
                self._switch_to(self.session_id, history)
            case _:
                raise TypeError(f"not a session operation: {operation!r}")
        return None

    async def _make_title(self, prompt: str, session_id: str) -> str:
        """Name session ``session_id`` from its first prompt; any failure leaves it untitled.
        (The id is taken when the turn ends: ``/clear`` may switch sessions before the title comes.)"""
        from ketch.state.titles import generate_title

        try:
            title = await asyncio.wait_for(generate_title(self.model, prompt), 60)
            if title and self.store is not None:
                self.store.set_title(session_id, title)
            return title
        except Exception:  # noqa: BLE001 - a title is a nicety, never an error
            return ""

    def take_title_task(self) -> Any:
        """The task naming the session after its first turn, handed over once (None when none started)."""
        task, self.title_task = self.title_task, None
        return task

    def _clear(self, directory: str) -> str:
        """A new conversation under a new id (the terminal's ``/clear``); the task list empties."""
        new_id = self.store.reserve_session(directory, self.model_ref, self.variant.name)
        self._switch_to(new_id, [])
        self._empty_task_list()
        return str(new_id)

    def _clear_in_place(self) -> str | None:
        """Keep the conversation as a copy, then start afresh under the same id (an editor's
        ``/clear``): the stored history and title empty, and the next turn names it again."""
        sid, store = self.session_id, self.store
        kept = store.fork(sid) if store is not None and not store.is_reserved(sid) else None
        self._switch_to(sid, [])
        if kept is not None:
            store.replace_history(sid, [])
            store.set_title(sid, "")
        self._empty_task_list()
        self.auto_title = bool(getattr(self.config, "titles", False))
        return kept

    def _fork(self, in_place: bool) -> str | None:
        """Copy the stored conversation; unless ``in_place``, go on in the copy."""
        old, store = self.session_id, self.store
        if store is None or store.is_reserved(old):
            return None
        new_id = store.fork(old)
        if not in_place:
            self._switch_to(new_id, self.messages)
        return str(new_id)

    def _empty_task_list(self) -> None:
        notebook = self.deps.extras.get("notebook")
        if notebook is not None:
            notebook.write([])

    def _set_model(self, model: Any, connection: Connection | None) -> None:
        """Send the next requests to ``model`` (``/model``); the history stays."""
        self._require_idle()
        self.model, self.connection = model, connection
        self.agent.model = model
        for follower in self._model_followers:
            follower.follow_model(model, connection)  # the compactor's window, the Chat → Responses switch
        self.prefix.note_break(f"model changed to {self.model_ref}")
        self.prefix.forget()
        self._record_settings()

    def _set_thinking(self, level: str, settings: Any) -> None:
        """Use thinking ``level`` from the next request on; ``settings`` are its model settings."""
        self._require_idle()
        self.config = self.config.model_copy(update={"think": level})
        self.agent.model_settings = settings
        self.prefix.note_break(f"thinking level changed to {level}")
        self._record_settings()

    def _set_variant(self, variant: AgentVariant) -> None:
        """Switch the agent variant (``/agent``): tools and instructions follow it."""
        self._require_idle()
        self.variant = variant
        self._record_settings()

    def _record_settings(self) -> None:
        """Keep the model, agent and thinking level with the stored session (a load restores them)."""
        store = getattr(self, "store", None)
        if store is not None:
            store.set_settings(self.session_id, self.model_ref, self.variant.name, self.config.think)

    def _set_approval_mode(self, mode: str) -> str:
        """Switch the approval mode for the rest of the session (``/approval``, Shift-Tab);
        the line the transcript keeps."""
        from ketch.gate.approval import APPROVAL_MODES, describe_mode

        if mode not in APPROVAL_MODES:
            raise ValueError(f"unknown approval mode {mode!r}; use one of: {', '.join(APPROVAL_MODES)}")
        if getattr(self.gate, "yolo", False):
            return "approval: --yolo is on for this session, so nothing asks whatever the mode says"
        self.gate.approval = mode
        sandbox = getattr(self, "sandbox", None)
        if sandbox is not None:
            sandbox.approval = mode
        return f"approval mode: {describe_mode(mode)}"

    def _set_sandbox_mode(self, mode: str) -> str:
        """Switch the sandbox mode for the rest of the session (``/sandbox MODE``); the line
        the transcript keeps."""
        from ketch.sandbox.wiring import switch_mode

        sandbox = getattr(self, "sandbox", None)
        if sandbox is None:
            raise ValueError("this session has no sandbox")
        return switch_mode(sandbox, mode, self.config)

    def _switch_to(self, session_id: str, history: Sequence[ModelMessage]) -> None:
        """Continue as another stored session (``/clear``, ``/resume``, ``/fork``)."""
        self._require_idle()
        if self.claim is not None:
            self.claim(session_id)  # one writer per session: refuses one open in another ketch
        self.session_id = session_id
        self.messages = list(history)
        self.restore_task_list()
        self.prefix.forget()
        self._writer = HistoryWriter(self.store, session_id, self.messages)
        self._step_events = []
        from ketch.core.session_state import Usage
        from ketch.wire.pricing import price_known

        self.state.usage = Usage(cost_usd=0.0 if price_known(self.model) else None)

    def restore_task_list(self) -> None:
        """The task list follows the history: the one its last ``todo_write`` wrote."""
        notebook = self.deps.extras.get("notebook")
        if notebook is not None:
            notebook.restore(self.messages)

    def status(self) -> SessionStatus:
        notebook = self.deps.extras.get("notebook")
        window = self.compactor.window if self.compactor is not None else 0
        parts = self._context_parts()
        # no request measured since the history was loaded or rewritten (a rewind to the first
        # prompt included): the estimate of the next request, which /context shows by part
        used = self.last_request_tokens or sum(parts.values())
        return SessionStatus(
            session_id=self.session_id,
            stored=self.store is None or not self.store.is_reserved(self.session_id),
            model=self.model_ref,
            thinking=self._thinking_label(),
            agent=self.variant.name,
            approval="yolo" if getattr(self.gate, "yolo", False) else str(getattr(self.gate, "approval", "")),
            context_tokens=used,
            context_window=window,
            context_used_pct=(100.0 * used / window) if window else 0.0,
            cost_usd=self.cost_usd,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
            cwd=str(Path(self.workspace.root)),
            tools=self.active_tools(),
            todos=notebook.as_dicts() if notebook is not None else [],
            context_parts=parts,
            prefix_break=self.prefix.last_break,
            background=self.background_lines(),
        )

    def _thinking_label(self) -> str:
        """The level for the status line, with "(not sent)" when ``/think`` said it is not
        applied to this model (the same test as its notice; cached per model and level)."""
        level = str(self.config.think)
        key = (id(self.model), id(self.connection), level)
        cached = getattr(self, "_thinking_label_cache", None)
        if cached is None or cached[0] != key:
            try:
                from ketch.providers.thinking import thinking_notice

                shown = f"{level} (not sent)" if thinking_notice(level, self.model, self.connection) else level
            except Exception:  # noqa: BLE001 - the status line must not fail on a label
                shown = level
            cached = (key, shown)
            self._thinking_label_cache = cached
        return cached[1]

    def _context_parts(self) -> dict[str, int]:
        """Estimated tokens of the next request by part, for ``/context``: the instructions
        last sent, the history (estimate kept until it changes) and the tool schemas."""
        from ketch.context.budget import chars_to_tokens, estimate_messages, estimate_tools

        key = (id(self.messages), len(self.messages))
        if self._history_estimate[0] != key:
            self._history_estimate = (key, estimate_messages(self.messages))
        active = self.active_tools()
        parts = {
            "messages": self._history_estimate[1],
            "tool schemas": estimate_tools([self._tool_defs[n] for n in active if n in self._tool_defs]),
        }
        if self._instruction_chars is None:  # nothing sent yet: build them once
            try:
                self._instruction_chars = len(self.instructions_for(active))
            except Exception:  # noqa: BLE001 - a closed store (memory) must not break the status line
                return parts
        parts["instructions"] = chars_to_tokens(self._instruction_chars)
        return parts

"""The interactive app: one submit path, the prompt queue, turns, requests, exit.

State that the drain reads (``queue``, ``busy``) lives on this object and is mutated only
on the event loop, so a prompt submitted while a turn ends can never be lost.

It is one thing at this length: the app's state machine. One object owns the queue, the
turn, the overlays and the exit so their transitions happen on one loop; layout, keys,
slash, outputs and replay take it as a parameter.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.input import Input

from ketch.protocol.events import ApprovalRequested, AskRequested, Decision, ReasoningDelta, TextDelta
from ketch.protocol.frontend import SessionLike, SessionStatus
from ketch.ui.appconfig import AppConfig
from ketch.ui.background import poll_background
from ketch.ui.history import InputHistory, PasteStore
from ketch.ui.layout import STYLE, build_layout
from ketch.ui.menus import CommandSource, Menu, accept, menu_for
from ketch.ui.overlays import ApprovalOverlay, AskOverlay, Overlay
from ketch.ui.rich_render import AnsiRenderer
from ketch.ui.slash import UI_COMMANDS, SlashHandler
from ketch.ui.terminal import FrameOutput, RowWidths, ScrollbackCommitter, install_reflow_guard
from ketch.ui.transcript import TurnView
from ketch.ui.working import TurnMeter


QUIT_WINDOW_S = 1.0
"""A second ctrl-c on an empty idle prompt within this many seconds quits."""


class KetchApp:
    """Owns the prompt_toolkit application and everything the live region shows."""

    def __init__(self, config: AppConfig, *, input: Input | None = None,
                 output: FrameOutput | None = None) -> None:
        self.config = config
        self.output = output or FrameOutput.for_terminal()
        self.renderer = AnsiRenderer()
        self.buffer = Buffer(multiline=True, on_text_changed=lambda _: self._text_changed())
        self.history = InputHistory()
        self.pastes = PasteStore()
        self.commands = CommandSource(config.commands, UI_COMMANDS)
        self.queue: list[str] = []
        self.busy = False
        self.session: SessionLike | None = None
        self.status: SessionStatus | None = None
        self.session_error: str | None = None
        self.menu: Menu | None = None
        self._menu_closed_for: str | None = None
        self._overlays: deque[Overlay] = deque()
        self.overlay_shown_at = 0.0
        self.reasoning_expanded = False
        self.hint = ""
        self.ctrl_c_armed = False
        self._ctrl_c_at = 0.0
        self.first_run_hint = False
        self.meter = TurnMeter()
        self._files: list[str] | None = None
        self._dirty = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.background_seen = 0
        """The session's ``background_version`` the status line last showed."""
        from ketch.ui.keys import build_key_bindings

        self.app: Application[int] = Application(
            layout=build_layout(self), key_bindings=build_key_bindings(self), style=STYLE,
            full_screen=False, erase_when_done=True, input=input, output=self.output,
        )
        self.app.ttimeoutlen = 0.05
        self.app.timeoutlen = 0.15
        self._shape: tuple[Any, ...] = ()
        self._columns = self.output.get_size().columns
        install_reflow_guard(self.app, self.output)  # before the committer's hook
        self.app.before_render += self._check_shape  # before the committer's hook
        self.committer = ScrollbackCommitter(self.app, self.output)
        RowWidths(self.app, self.output)  # after the committer's hook
        self.view = TurnView(self.renderer, self.width, self.committer.commit)
        self.slash = SlashHandler(self)

    # -- properties the layout reads -------------------------------------------------
    @property
    def session_ready(self) -> bool:
        """True once the session factory finished."""
        return self.session is not None

    @property
    def overlay(self) -> Overlay | None:
        """The request or picker currently asking for keys."""
        return self._overlays[0] if self._overlays else None

    def width(self) -> int:
        """Terminal columns available for committed text."""
        return max(20, self.output.get_size().columns - 1)

    def reasoning_tokens(self) -> int:
        """A rough token estimate of the reasoning so far (4 characters a token)."""
        return max(1, round(len(self.view.reasoning) / 4))

    # -- lifecycle ---------------------------------------------------------------------
    async def run(self) -> int:
        """Run until the user quits; returns the exit code."""
        earlier = self._safe(self.config.load_history) or []
        self.history = InputHistory(earlier)
        self.first_run_hint = not earlier
        self._spawn(self._start_background())
        self._spawn(self._ticker())
        try:
            # no 'Press ENTER to continue' takeover for a stray background error: the
            # caller's loop exception handler (or asyncio's default) deals with it
            return await self.app.run_async(pre_run=self._replay_typeahead, set_exception_handler=False) or 0
        finally:
            for task in list(self._tasks):
                task.cancel()

    def _replay_typeahead(self) -> None:
        """Keys typed while the UI was importing go in first, exactly as typed."""
        if self.config.typeahead:
            from ketch.ui.typeahead import key_presses

            self.app.key_processor.feed_multiple(key_presses(self.config.typeahead))  # type: ignore[arg-type]

    def exit(self, code: int = 0) -> None:
        """Close the app (the farewell is printed by the caller); a running turn is
        cancelled and what it had written so far is kept."""
        if self.busy and self.session is not None:
            self.session.cancel_turn()
        self.view.end_answer()
        if self.app.is_running and not self.app.future.done():
            self.app.exit(result=code)

    def _check_shape(self, app: Any) -> None:
        """Before a frame: re-wrap after a resize, and repaint from the top when the
        region's parts changed (so it can shrink instead of leaving blank rows)."""
        columns = self.output.get_size().columns
        if columns != self._columns:
            self._columns = columns
            self.view.rerender()
        menu = self.menu
        shape = (menu.kind if menu else None, len(menu.items) if menu else 0, len(self._overlays),
                 len(self.view.tools), len(self.view.subagents), len(self.queue), self.busy,
                 bool(self.view.reasoning), self.reasoning_expanded, bool(self.hint),
                 self.buffer.document.line_count)
        if shape != self._shape:
            self._shape = shape
            self.committer.request_rewind(redraw=False)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _start_background(self) -> None:
        """Start the slow imports once the first frame is on screen and the input reads keys:
        threads importing modules hold the GIL for most of their time, and started earlier they
        would slow the first frame down. Rich's warm-up and the ``@`` file walk wait for the
        session (ready or failed): CPU work beside its build would only delay it."""
        drawn = asyncio.Event()

        def first_frame(_app: Any) -> None:
            drawn.set()

        if not self.app.render_counter:
            self.app.after_render += first_frame
            try:
                await drawn.wait()
            finally:
                self.app.after_render -= first_frame
        await asyncio.sleep(0)  # let keys already typed be read and echoed first
        loading = self._spawn(self._load_session())
        loading.add_done_callback(self._after_session)

    def _after_session(self, loading: asyncio.Task[Any]) -> None:
        if not loading.cancelled():  # cancelled: the app is closing
            self._spawn(self._warm_renderer())
            self._spawn(self._load_files())

    async def _warm_renderer(self) -> None:
        await asyncio.sleep(0)
        await asyncio.to_thread(self.renderer.warm_up)

    async def _ask_trust(self) -> None:
        """Before the session exists: ask whether the folder's repository config applies."""
        if self.config.trust_question is None:
            return
        from ketch.ui.trust_overlay import ask_each

        await ask_each(self.config.trust_question, self.push_overlay)

    async def _load_session(self) -> None:
        try:
            await self._ask_trust()
            self.session = await self.config.session_factory()
        except Exception as exc:  # noqa: BLE001 - shown to the user as one line
            self.session_error = str(exc) or type(exc).__name__
            self.queue.clear()
            if self.config.setup is not None and self._safe(self.config.setup.wanted, exc):
                from ketch.ui.setup import offer_setup

                await offer_setup(self, exc)
                return
            code = self._safe(self.config.startup_error, exc) if self.config.startup_error else None
            if code is not None:
                self.exit(code)
                return
            self.committer.commit([f"\x1b[31mCould not start the session: {self.session_error}\x1b[0m", ""])
            return
        if self.config.on_ready is not None:
            try:
                intro = await self.config.on_ready()
            except Exception as exc:  # noqa: BLE001 - an intro must not keep the session from starting
                intro = f"\x1b[31m{exc}\x1b[0m"
            if isinstance(intro, list):
                await self.play(intro)
            elif intro:
                self.committer.commit(intro.splitlines() + [""])
        self.refresh_status()
        self.invalidate()
        if self.config.first_input:
            self.queue.insert(0, self.config.first_input)
        has_pending = getattr(self.session, "has_pending", None)
        if has_pending is not None and self._safe(has_pending):
            # Calls left awaiting approval when the session was closed are asked again first.
            self.busy = True
            self._spawn(self.run_busy(self.stream_turn(None, echo=False)))
            return
        self.drain()

    async def play(self, items: list[Any]) -> None:
        """Print an earlier conversation as the live one printed it."""
        from ketch.ui.replay import play

        try:
            await play(self, items)
        except Exception as exc:  # noqa: BLE001 - a bad record must not keep the session from starting
            self.view.end_turn()
            self.committer.commit([f"\x1b[31mCould not show the earlier conversation: {exc}\x1b[0m", ""])

    def refresh_status(self) -> None:
        """Re-read the status line from the session."""
        if self.session is not None:
            try:
                self.status = self.session.status()
            except Exception:  # noqa: BLE001 - a status failure must not end the UI
                pass

    def invalidate(self) -> None:
        """Redraw now."""
        self.app.invalidate()

    def _safe(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - history is a convenience
            return None

    # -- the one submit path ----------------------------------------------------------
    def submit(self, text: str) -> None:
        """A prompt from the input: run it now, or queue it while busy or loading."""
        if not text.strip():
            return
        self.hint = ""
        self.first_run_hint = False
        self.history.add(text)
        self._safe(self.config.save_history, text)
        if text.strip() in ("/quit", "/exit"):
            self.exit(0)
            return
        if self.busy or self.session is None:
            if self.session_error is None:
                self.queue.append(text)
            self.invalidate()
            return
        self.dispatch(text)

    def dispatch(self, text: str) -> None:
        """Run a prompt or slash command now (also how the queue drains)."""
        self.busy = True
        if text.startswith("/"):
            self._spawn(self.run_busy(self.slash.run(text)))
        else:
            self._spawn(self.run_busy(self.stream_turn(text)))

    async def run_busy(self, work: Any) -> None:
        """Await ``work`` with the app busy (prompts queue meanwhile), then drain."""
        self.busy = True
        try:
            await work
        finally:
            self.busy = False
            self.refresh_status()
            self.drain()

    def drain(self) -> None:
        """Start the next queued prompt, if idle."""
        if self.queue and not self.busy and self.session is not None:
            self.dispatch(self.queue.pop(0))
        self.invalidate()

    def echo_prompt(self, text: str) -> None:
        """Commit the user's prompt to the transcript."""
        show = self.config.display_prompt
        if show is not None:
            text = self._safe(show, text) or text
        lines = text.splitlines() or [""]
        rows = ["\x1b[1m› \x1b[0m" + lines[0]] + ["  " + line for line in lines[1:]]
        self.committer.commit(rows + [""])

    async def stream_turn(self, prompt: str | None, *, echo: bool = True) -> None:
        """Stream one turn into the transcript (the caller holds ``busy``); ``None``
        continues the session's open tool calls instead of sending a prompt."""
        assert self.session is not None
        if echo and prompt is not None:
            self.echo_prompt(prompt)
        self.meter.start()
        try:
            async for event in self.session.run_turn(prompt):
                self.meter.apply(event)
                if isinstance(event, ApprovalRequested):
                    self.push_overlay(ApprovalOverlay(event, self._decider(event.request_id)))
                elif isinstance(event, AskRequested):
                    self.push_overlay(AskOverlay(event, self._answerer(event.request_id)))
                self.view.apply(event)
                if not isinstance(event, (TextDelta, ReasoningDelta)):
                    self._dirty = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - one line for the user, never a traceback
            self.view.commit_text(f"Error: {exc}", "31")
        finally:
            self.meter.stop()
            self.view.end_turn()
            self._overlays = deque(o for o in self._overlays if not _is_request(o))

    # -- requests and overlays ----------------------------------------------------------
    def push_overlay(self, overlay: Overlay) -> None:
        """Queue an overlay; the first one in line gets the keys."""
        self._overlays.append(overlay)
        if len(self._overlays) == 1:
            self.overlay_shown_at = time.monotonic()
        self.invalidate()

    def overlay_key(self, key: str) -> None:
        """Give a key to the active overlay (ignored during the grace period)."""
        overlay = self.overlay
        if overlay is None or time.monotonic() - self.overlay_shown_at < self.config.approval_grace:
            return
        if overlay.on_key(key):
            self._overlays.popleft()
            self.overlay_shown_at = time.monotonic()
            self.committer.request_rewind()
        self.invalidate()

    def _decider(self, request_id: str) -> Any:
        def decide(decision: Decision, reason: str) -> None:
            if self.session is not None:
                self.session.decide(request_id, decision, reason)
        return decide

    def _answerer(self, request_id: str) -> Any:
        def answer(text: str) -> None:
            if self.session is not None:
                self.session.answer(request_id, text)
        return answer

    # -- interrupting ------------------------------------------------------------------
    def cancel_turn(self) -> None:
        """Esc: abort the turn and forget the queue."""
        self.queue.clear()
        if self.busy and self.session is not None:
            self.session.cancel_turn()
            self.hint = "cancelled"
        self.invalidate()

    def ctrl_c(self) -> None:
        """Stop what runs (a command, else the turn); else clear the input; else quit on
        a second press within a second."""
        now = time.monotonic()
        if self.busy and self.session is not None:
            self.ctrl_c_armed = False
            if self.session.interrupt_command():
                self.hint = "stopped the running command; the turn goes on"
            else:
                self.session.cancel_turn()
                self.hint = "stopped; the turn ended"
        elif self.buffer.text:
            self.buffer.reset()
            self.ctrl_c_armed = False
        elif self.ctrl_c_armed and now - self._ctrl_c_at <= QUIT_WINDOW_S:
            self.exit(0)
            return
        else:
            self.ctrl_c_armed = True
            self._ctrl_c_at = now
            self.hint = "press ctrl-c again to quit (or ctrl-d)"
            self._spawn(self._disarm_later(now))
        self.invalidate()

    async def _disarm_later(self, armed_at: float) -> None:
        await asyncio.sleep(QUIT_WINDOW_S)
        if self.ctrl_c_armed and self._ctrl_c_at == armed_at:
            self.ctrl_c_armed = False
            self.hint = ""
            self.invalidate()

    # -- tool output: ctrl-o, /expand ------------------------------------------------------
    def open_output(self, number: int | None = None) -> str | None:
        """Open the pager on call ``number`` (the latest when None); an error text if none."""
        from ketch.ui.outputs import open_output

        return open_output(self, number)

    def open_call_list(self) -> None:
        """A picker of every finished call, newest first; the pick opens in the pager."""
        from ketch.ui.outputs import open_call_list

        open_call_list(self)

    # -- input and menus ---------------------------------------------------------------
    def _text_changed(self) -> None:
        self.ctrl_c_armed = False
        self.hint = ""
        self.update_menu()

    def update_menu(self) -> None:
        """Open, refresh or close the @ / / menu for the current input."""
        text = self.buffer.text
        if text == self._menu_closed_for:
            self.menu = None
            return
        self._menu_closed_for = None
        self.menu = menu_for(text, self.buffer.cursor_position, self._file_candidates, self.commands)

    def close_menu(self) -> None:
        """Esc on an open menu: hide it until the text changes."""
        self.menu = None
        self._menu_closed_for = self.buffer.text

    def accept_menu(self) -> None:
        """Put the highlighted menu item into the input."""
        if self.menu is None:
            return
        item = self.menu.current()
        text, cursor = accept(self.buffer.text, self.menu)
        is_file = self.menu.kind == "@" and item is not None and not item.insert.endswith("/")
        self._menu_closed_for = text if is_file else None
        self.menu = None
        self.buffer.set_document(self.buffer.document.__class__(text, cursor), bypass_readonly=True)

    async def _load_files(self) -> None:
        """Walk the workspace for ``@`` off the event loop, once, after the first frame."""
        provider = self.config.candidates
        if provider is None:
            return
        await asyncio.sleep(0)
        try:
            self._files = await asyncio.to_thread(lambda: [str(p) for p in provider()])
        except Exception:  # noqa: BLE001 - no file picker rather than a crash
            self._files = []
        self.update_menu()
        self.invalidate()

    def _file_candidates(self) -> list[str]:
        return self._files or []

    async def _ticker(self) -> None:
        """Turn buffered stream text into output every flush interval; skip idle frames."""
        shown_tokens = 0
        while True:
            await asyncio.sleep(self.config.flush_interval)
            changed = self.view.flush()
            tokens = self.reasoning_tokens() if self.view.reasoning else 0
            if tokens // 10 != shown_tokens // 10:
                shown_tokens, changed = tokens, True
            if self.meter.tick():
                changed = True
            if poll_background(self):
                changed = True
            if self.view.status_dirty:
                self.view.status_dirty = False
                self.refresh_status()
                changed = True
            if changed or self._dirty or self.committer.has_pending:
                self._dirty = False
                self.invalidate()


def _is_request(overlay: Overlay) -> bool:
    return isinstance(overlay, (ApprovalOverlay, AskOverlay))

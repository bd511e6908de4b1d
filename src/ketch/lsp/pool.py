"""The session's language servers: one per configured language, started on the first edit
of one of its files, restarted once when it dies, dropped for the session when it dies
again, hangs in its handshake or cannot start, each with one ``LanguageServerNotice``.

Every call here is bounded by ``wait_s`` from its start: an edit is never held longer than
that, whatever the server does. A server still starting when the wait runs out keeps
starting in the background (up to ``start_timeout_s``) and serves the next edit.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ketch.protocol.events import LanguageServerNotice
from ketch.lsp.client import LanguageClient, Launcher
from ketch.lsp.jsonrpc import ChannelClosed, ResponseError
from ketch.lsp.report import Diagnostic, after_edit_text, listing, problems
from ketch.lsp.servers import LspSettings, ServerSpec, server_for

MAX_RESTARTS = 1
"""Restarts after a death; the next death drops the server for the session."""
REAP_S = 1.0
"""How long a server whose output ended may take to exit, to name its exit code in the notice."""
MAX_SILENT = 3
"""Calls in a row a running server lets pass without a report before it counts as hung and is dropped."""

Emit = Callable[[Any], None]
T = TypeVar("T")


class LaunchRefused(Exception):
    """The launcher will not start a server here (the sandbox cannot confine it, say)."""


class _Died(Exception):
    """The server died while ketch waited on it."""


@dataclass
class _Entry:
    spec: ServerSpec
    client: LanguageClient | None = None
    starting: asyncio.Task[LanguageClient] | None = None
    deaths: int = 0
    said_dropped: bool = False
    """An edit's result already said the server is off."""
    silent: int = 0
    """Calls in a row that ran out of time waiting on the running server."""
    dropped: str = ""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class LanguageServers:
    """The pool the file tools and the ``diagnostics`` tool ask (``ToolDeps.extras['lsp']``)."""

    def __init__(self, settings: LspSettings | Callable[[], LspSettings], root: Path, launcher: Launcher) -> None:
        self._settings = settings
        self.root = root
        self._launcher = launcher
        self._entries: dict[str, _Entry] = {}
        self._retiring: set[asyncio.Task[None]] = set()

    @property
    def settings(self) -> LspSettings:
        """The settings, worked out on first use (the defaults look for programs on PATH)."""
        if callable(self._settings):
            self._settings = self._settings()
        return self._settings

    def serves(self, path: Path) -> bool:
        return self.settings.enabled and server_for(self.settings, path.suffix) is not None

    # ------------------------------------------------------------------ the two questions

    async def after_edit(self, path: Path, shown: str, old: str | None, new: str, emit: Emit) -> str:
        """What an edit's result gains: the errors and warnings the edit added to ``path`` (its
        text was ``old``, None for a new file, and is now ``new``), or a line saying why none
        could be had in time; '' where no server serves the file."""
        entry = self._entry(path)
        if entry is None:
            return ""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.wait_s
        client = await self._ready(entry, emit, deadline)
        if client is None:
            return self._absent(entry, once=True)
        uri = path.as_uri()

        async def exchange() -> str:
            async with entry.lock:
                if old is None:
                    before: tuple[Diagnostic, ...] = ()
                elif client.held_text(uri) == old and client.known(uri) is not None:
                    before = client.known(uri) or ()
                else:
                    mark = client.arrivals()
                    before = await client.diagnostics_for(uri, await client.sync(path, old), mark)
                mark = client.arrivals()
                after = await client.diagnostics_for(uri, await client.sync(path, new), mark)
            return after_edit_text(entry.spec.name, shown, before, after)

        return await self._bounded(entry, client, exchange, deadline, emit, once=True)

    async def current(self, path: Path, shown: str, text: str, emit: Emit) -> str:
        """The errors and warnings the server reports for ``path`` as it is now (``text``)."""
        entry = self._entry(path)
        if entry is None:
            return f"No language server is configured or installed for {path.suffix or 'these'} files."
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.wait_s
        client = await self._ready(entry, emit, deadline)
        if client is None:
            return self._absent(entry)
        uri = path.as_uri()

        async def exchange() -> str:
            async with entry.lock:
                if client.held_text(uri) == text and client.known(uri) is not None:
                    found = client.known(uri) or ()
                else:
                    mark = client.arrivals()
                    found = await client.diagnostics_for(uri, await client.sync(path, text), mark)
            shown_items = problems(found)
            if not shown_items:
                return f"The {entry.spec.name} language server reports no errors or warnings in {shown}."
            return f"The {entry.spec.name} language server reports {len(shown_items)} problem{'s' if len(shown_items) != 1 else ''} in {shown}:\n{listing(shown_items, shown)}"

        return await self._bounded(entry, client, exchange, deadline, emit)

    # ------------------------------------------------------------------ servers

    def _entry(self, path: Path) -> _Entry | None:
        if not self.settings.enabled:
            return None
        spec = server_for(self.settings, path.suffix)
        if spec is None:
            return None
        return self._entries.setdefault(spec.name, _Entry(spec))

    async def _ready(self, entry: _Entry, emit: Emit, deadline: float) -> LanguageClient | None:
        """The entry's running client, starting (or restarting) it; None when it is dropped or
        still starting at ``deadline``."""
        if entry.dropped:
            return None
        if entry.client is not None and not entry.client.alive:
            await self._died(entry, None, emit, deadline)
            if entry.dropped:
                return None
        if entry.client is not None:
            return entry.client
        if entry.starting is None:
            entry.starting = asyncio.get_running_loop().create_task(self._start(entry.spec))
        loop = asyncio.get_running_loop()
        task = entry.starting
        done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - loop.time()))
        if not done:
            return None
        if entry.starting is not task:  # a call running beside this one took the outcome
            return entry.client
        entry.starting = None
        try:
            entry.client = task.result()
        except LaunchRefused as exc:
            self._drop(entry, str(exc), emit)
        except TimeoutError:
            self._drop(entry, f"it did not answer the LSP handshake within {self.settings.start_timeout_s:g} s", emit)
        except OSError as exc:
            self._drop(entry, f"it could not be started ({exc.strerror or exc})", emit)
        except (ChannelClosed, ResponseError) as exc:
            await self._died(entry, f"it failed during the LSP handshake ({exc})", emit, deadline)
            if not entry.dropped:
                return await self._ready(entry, emit, deadline)
        return entry.client

    async def _start(self, spec: ServerSpec) -> LanguageClient:
        if shutil.which(spec.command[0]) is None:
            raise LaunchRefused(f"its command {spec.command[0]!r} is not on PATH")
        client = LanguageClient(spec, self.root, self._launcher(spec.command, self.root))
        try:
            await client.spawn()
            await asyncio.wait_for(client.initialize(), self.settings.start_timeout_s)
        except BaseException as exc:
            await client.aclose()
            if isinstance(exc, ChannelClosed):
                raise ChannelClosed(client.death() or str(exc)) from None
            raise
        return client

    async def _died(self, entry: _Entry, why: str | None, emit: Emit, deadline: float) -> None:
        """The entry's server died (``why``: None to ask the client, until ``deadline`` at most):
        restart it once, then drop it."""
        client, entry.client = entry.client, None
        if client is not None:
            if why is None:
                await client.reap(min(REAP_S, max(0.0, deadline - asyncio.get_running_loop().time())))
                why = client.death()
            self._retire(client)
        entry.deaths += 1
        if entry.deaths > MAX_RESTARTS:
            self._drop(entry, f"it died again ({why})", emit)
            return
        emit(LanguageServerNotice(
            server=entry.spec.name, state="restarted",
            text=f"Language server {entry.spec.name} ({entry.spec.command[0]}) died ({why}); starting it again.",
        ))

    def _drop(self, entry: _Entry, why: str, emit: Emit) -> None:
        if entry.dropped:
            return
        entry.dropped = why
        emit(LanguageServerNotice(
            server=entry.spec.name, state="dropped",
            text=f"Language server {entry.spec.name} ({entry.spec.command[0]}) is off for this session: {why}.",
        ))

    def _absent(self, entry: _Entry, *, once: bool = False) -> str:
        """Why there are no diagnostics; with ``once``, a dropped server is said in one edit's
        result only (the edits after it add nothing, rather than the same line each time)."""
        if entry.dropped and once and entry.said_dropped:
            return ""
        if entry.dropped:
            entry.said_dropped = entry.said_dropped or once
            return f"(no diagnostics: language server {entry.spec.name} is off for this session; {entry.dropped}.)"
        return (f"(no diagnostics yet: language server {entry.spec.name} is still starting; "
                "the diagnostics tool can ask again later.)")

    async def _bounded(self, entry: _Entry, client: LanguageClient, exchange: Callable[[], Awaitable[str]],
                       deadline: float, emit: Emit, *, once: bool = False) -> str:
        """``exchange()`` until ``deadline``, or until the server dies (then it is restarted on
        the next call, or dropped)."""
        loop = asyncio.get_running_loop()
        work = loop.create_task(exchange())
        closed = loop.create_task(client.wait_closed())
        try:
            done, _ = await asyncio.wait({work, closed}, timeout=max(0.0, deadline - loop.time()),
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
        if work in done:
            try:
                text = work.result()
                entry.silent = 0
                return text
            except (ChannelClosed, ResponseError):
                pass
        else:
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
            if not (closed in done or not client.alive):
                entry.silent += 1
                if entry.silent < MAX_SILENT:
                    return (f"(no diagnostics: language server {entry.spec.name} did not report within "
                            f"{self.settings.wait_s:g} s; the diagnostics tool can ask again later.)")
                entry.client = None
                self._retire(client)
                self._drop(entry, f"it let {MAX_SILENT} calls in a row pass without a report (it seems hung)", emit)
                return self._absent(entry, once=once)
        if entry.client is client:
            await self._died(entry, None, emit, deadline)
        return self._absent(entry, once=once) if entry.dropped else f"(no diagnostics: language server {entry.spec.name} died during this edit; it will be started again.)"

    def _retire(self, client: LanguageClient) -> None:
        """Stop a dead or hung server in the background: its shutdown must not hold an edit."""
        task = asyncio.get_running_loop().create_task(client.aclose())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def aclose(self) -> None:
        """Stop every server (the session's closer)."""
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)
        for entry in self._entries.values():
            if entry.starting is not None:
                entry.starting.cancel()
                with contextlib.suppress(BaseException):
                    client = await entry.starting
                    await client.aclose()
            if entry.client is not None:
                await entry.client.aclose()
                entry.client = None

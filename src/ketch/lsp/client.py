"""One running language server: its process, the LSP handshake, the files it holds open and
the diagnostics it reported for them.

The client sends whole-file text on every change (valid for full and incremental sync), a
save after each change when the server asks for saves, and takes diagnostics both ways: the
pushed ``textDocument/publishDiagnostics`` and, when the server offers it, the pulled
``textDocument/diagnostic``. Every wait is bounded by the caller's deadline; nothing here
decides about restarts (the pool does).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ketch.lsp.jsonrpc import Channel, ChannelClosed, ResponseError
from ketch.lsp.report import Diagnostic, parse_diagnostics
from ketch.lsp.servers import ServerSpec, section

STDERR_TAIL = 2000
"""Characters of a server's stderr kept to say why it died."""
SHUTDOWN_WAIT_S = 1.0


@dataclass(frozen=True)
class LaunchPlan:
    """How to start a server: the argv to execute (the sandbox's), its environment, and
    whether it is confined (a confined server cannot see ketch's process id)."""

    argv: list[str]
    env: dict[str, str]
    confined: bool


Launcher = Callable[[Sequence[str], Path], LaunchPlan]


def _die_with_parent() -> Callable[[], None] | None:
    """Linux: what the child runs between fork and exec so that it gets SIGKILL when ketch dies,
    even by kill -9. libc is looked up here, in the parent: loading it in the child of a
    threaded process could wait forever on a lock some other thread held at the fork."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def arm() -> None:  # pragma: no cover - runs in the child
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG

    return arm


@dataclass
class _Document:
    version: int
    text: str
    mark: int = 0
    """Diagnostics that arrived before this number are not about ``text``."""


class LanguageClient:
    """A started server for one workspace root; ``start`` must be awaited before the rest."""

    def __init__(self, spec: ServerSpec, root: Path, plan: LaunchPlan) -> None:
        self.spec = spec
        self.root = root
        self._plan = plan
        self._process: asyncio.subprocess.Process | None = None
        self._channel: Channel | None = None
        self._stderr = ""
        self._stderr_task: asyncio.Task[None] | None = None
        self._capabilities: dict[str, Any] = {}
        self._documents: dict[str, _Document] = {}
        self._pushed: dict[str, tuple[int, int | None, tuple[Diagnostic, ...]]] = {}
        """Unquoted uri of an open document: (arrival number, version the server named, diagnostics).
        Unquoted, because servers spell a file's uri their own way (``%40`` or ``@``)."""
        self._open_keys: set[str] = set()
        self._arrivals = 0
        self._changed = asyncio.Condition()

    # ------------------------------------------------------------------ life

    async def spawn(self) -> None:
        """Start the process (OSError when it cannot start)."""
        self._process = await asyncio.create_subprocess_exec(
            *self._plan.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=str(self.root), env=self._plan.env,
            start_new_session=True, preexec_fn=_die_with_parent(), limit=1 << 20,
        )
        assert self._process.stdout is not None and self._process.stdin is not None
        self._channel = Channel(self._process.stdout, self._process.stdin, self._on_notification, self._on_request)  # type: ignore[arg-type]
        self._stderr_task = asyncio.get_running_loop().create_task(self._keep_stderr())

    async def initialize(self) -> None:
        """The handshake; the caller bounds it (ChannelClosed or ResponseError on failure)."""
        uri = self.root.as_uri()
        result = await self._request("initialize", {
            "processId": None if self._plan.confined else os.getpid(),
            "clientInfo": {"name": "ketch"},
            "rootUri": uri,
            "rootPath": str(self.root),
            "workspaceFolders": [{"uri": uri, "name": self.root.name or str(self.root)}],
            "initializationOptions": dict(self.spec.initialization_options) or None,
            "capabilities": {
                "textDocument": {
                    "synchronization": {"didSave": True, "dynamicRegistration": False},
                    "publishDiagnostics": {"versionSupport": True, "relatedInformation": False},
                    "diagnostic": {"dynamicRegistration": False, "relatedDocumentSupport": False},
                },
                "workspace": {"configuration": True, "workspaceFolders": True},
            },
        })
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        self._capabilities = capabilities if isinstance(capabilities, dict) else {}
        await self._notify("initialized", {})
        if self.spec.settings:
            await self._notify("workspace/didChangeConfiguration", {"settings": dict(self.spec.settings)})

    @property
    def alive(self) -> bool:
        return (self._process is not None and self._process.returncode is None
                and self._channel is not None and not self._channel.closed.is_set())

    def death(self) -> str:
        """Why the server is gone, in a few words with the end of its stderr."""
        parts = []
        if self._process is not None and self._process.returncode is not None:
            parts.append(f"exited with code {self._process.returncode}")
        elif self._channel is not None and self._channel.closed.is_set():
            parts.append(self._channel.close_reason)
        tail = " ".join(self._stderr.split())[-300:]
        if tail:
            parts.append(f"stderr: {tail}")
        return "; ".join(parts) or "not running"

    async def reap(self, within: float = 1.0) -> None:
        """Give a server whose output ended a moment to exit, so ``death`` can name its code."""
        if self._process is None:
            return
        ends = [self._process.wait()]
        if self._stderr_task is not None:
            ends.append(asyncio.shield(self._stderr_task))
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(*ends), within)

    async def wait_closed(self) -> None:
        """Until the server's output ends (it exited or broke the protocol)."""
        assert self._channel is not None
        await self._channel.closed.wait()

    async def aclose(self) -> None:
        """Ask the server to shut down (briefly), then kill its whole process group."""
        if self.alive:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._request("shutdown", None), SHUTDOWN_WAIT_S)
                await self._notify("exit", None)
        process = self._process
        if process is not None:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait(), 5.0)
        if self._channel is not None:
            await self._channel.aclose()
        if self._stderr_task is not None:
            self._stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._stderr_task

    # ------------------------------------------------------------------ files

    def held_text(self, uri: str) -> str | None:
        document = self._documents.get(uri)
        return None if document is None else document.text

    async def sync(self, path: Path, text: str) -> int:
        """Give the server ``text`` as the content of ``path``; returns the document version."""
        uri = path.as_uri()
        document = self._documents.get(uri)
        if document is None:
            document = self._documents[uri] = _Document(1, text, self._arrivals)
            self._open_keys.add(unquote(uri))
            await self._notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": self.spec.language_of(path.suffix), "version": 1, "text": text}})
        else:
            document.version += 1
            document.text = text
            document.mark = self._arrivals
            await self._notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": document.version}, "contentChanges": [{"text": text}]})
        save = self._save_option()
        if save is not None:
            params: dict[str, Any] = {"textDocument": {"uri": uri}}
            if save:
                params["text"] = text
            await self._notify("textDocument/didSave", params)
        return document.version

    def _save_option(self) -> bool | None:
        """None: the server wants no saves; else whether it wants the text with them."""
        sync = self._capabilities.get("textDocumentSync")
        if not isinstance(sync, dict):
            return None
        save = sync.get("save")
        if save is True:
            return False
        if isinstance(save, dict):
            return save.get("includeText") is True
        return None

    def arrivals(self) -> int:
        return self._arrivals

    def known(self, uri: str) -> tuple[Diagnostic, ...] | None:
        """The diagnostics the server gave for the text it holds of ``uri`` (None: none yet)."""
        document = self._documents.get(uri)
        if document is None or not self._fresh(uri, document.version, document.mark):
            return None
        return self._pushed[unquote(uri)][2]

    async def diagnostics_for(self, uri: str, version: int, after: int) -> tuple[Diagnostic, ...]:
        """The diagnostics of ``uri`` at ``version``: pulled when the server offers that, else the
        first push naming that version (or, unversioned, arriving after push number ``after``).
        Unbounded here: the caller's deadline cancels it."""
        if self._capabilities.get("diagnosticProvider"):
            try:
                return await self._pull(uri)
            except ResponseError:
                pass  # fall back to what the server pushes
        async with self._changed:
            await self._changed.wait_for(lambda: self._fresh(uri, version, after))
        return self._pushed[unquote(uri)][2]

    def _fresh(self, uri: str, version: int, after: int) -> bool:
        pushed = self._pushed.get(unquote(uri))
        if pushed is None:
            return False
        number, named, _ = pushed
        return named == version if named is not None else number > after

    async def _pull(self, uri: str) -> tuple[Diagnostic, ...]:
        result = await self._request("textDocument/diagnostic", {"textDocument": {"uri": uri}})
        if not isinstance(result, dict) or result.get("kind") != "full":
            raise ResponseError(None, "no full report")
        items = parse_diagnostics(result.get("items"))
        self._arrivals += 1
        self._pushed[unquote(uri)] = (self._arrivals, self._documents[uri].version if uri in self._documents else None, items)
        return items

    # ------------------------------------------------------------------ wire

    async def _request(self, method: str, params: Any) -> Any:
        if self._channel is None:
            raise ChannelClosed("the server was not started")
        return await self._channel.request(method, params)

    async def _notify(self, method: str, params: Any) -> None:
        if self._channel is None:
            raise ChannelClosed("the server was not started")
        await self._channel.notify(method, params)

    def _on_notification(self, method: str, params: Any) -> None:
        if method != "textDocument/publishDiagnostics" or not isinstance(params, dict):
            return
        uri = params.get("uri")
        if not isinstance(uri, str) or unquote(uri) not in self._open_keys:
            return  # only the files ketch opened are ever asked about (and kept)
        version = params.get("version")
        named = version if isinstance(version, int) and not isinstance(version, bool) else None
        self._arrivals += 1
        self._pushed[unquote(uri)] = (self._arrivals, named, parse_diagnostics(params.get("diagnostics")))
        asyncio.get_running_loop().create_task(self._wake())

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _on_request(self, method: str, params: Any) -> Any:
        if method == "workspace/configuration":
            items = params.get("items") if isinstance(params, dict) else None
            return [section(self.spec.settings, i.get("section") if isinstance(i, dict) else None) for i in items or []]
        if method == "workspace/workspaceFolders":
            return [{"uri": self.root.as_uri(), "name": self.root.name or str(self.root)}]
        if method in ("client/registerCapability", "client/unregisterCapability", "window/workDoneProgress/create",
                      "window/showMessageRequest", "workspace/diagnostic/refresh"):
            return None
        raise LookupError(method)

    async def _keep_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        while chunk := await self._process.stderr.read(4096):
            self._stderr = (self._stderr + chunk.decode("utf-8", "replace"))[-STDERR_TAIL:]

"""``ketch`` without ``-p``: the inline UI wired to the real session.

Start-up order matters more than anything here. The prompt marker is drawn and the tty
quieted before anything heavy is imported; the UI takes keys at once, while the core
(pydantic-ai, most of a second of imports) loads in a worker thread and the session is built behind it.
Everything this module imports at the top is cheap; the core comes in lazily.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ketch.context.collector import pause_collector

if TYPE_CHECKING:
    from ketch.extensions.commands import CommandRegistry
    from ketch.frontends.slash_actions import SlashActions
    from ketch.ui.appconfig import AppConfig

EXIT_USAGE = 2
MAX_CANDIDATES = 20_000
"""Paths offered by ``@`` at most (a huge tree still opens the picker quickly)."""

_CORE_MODULES = (
    "ketch.core.session", "ketch.frontends.assemble", "ketch.tools.memory", "ketch.tools.notebook", "ketch.tools.skills", "ketch.extensions.hooks",
    "ketch.extensions.plugins", "ketch.core.prompt", "ketch.gate.rules", "ketch.tools", "ketch.tools.shell", "ketch.tools.workspace",
    "ketch.providers.models", "ketch.state.store", "ketch.providers.fallback", "ketch.context.budget", "ketch.context.compaction", "ketch.websearch.wiring",
    "ketch.core.subagent", "ketch.frontends.slash_actions",
)
"""Imported in a worker thread before the session is built on the event loop (what
``build_session`` imports lazily; a module missing here only costs a pause of the UI)."""


def project_root(cwd: Path) -> Path:
    """The nearest ancestor holding ``.git`` or ``.ketch`` (``config.find_project_root``'s
    rule, repeated here so that loading prompt history does not import pydantic)."""
    for candidate in (cwd, *cwd.parents):
        if (candidate / ".git").exists() or (candidate / ".ketch").is_dir():
            return candidate
    return cwd


def _preload(args: Any, cwd: Path) -> None:
    """Import the core and the model module of the configured wire (runs in a thread).

    Resolving the connection here also surfaces configuration errors (missing key,
    unknown model) before anything is built. The sandbox's probes (child processes) run
    meanwhile in a thread of their own."""
    from ketch.wire.sdk_pins import quiet_imports

    quiet_imports()  # cli.main did, unless the session is built without it (tests)
    from ketch.frontends.assemble import config_from_args, connection_from_args
    from ketch.sandbox.wiring import detect_ahead

    config = config_from_args(args, cwd)
    detected = detect_ahead(config, yolo=bool(getattr(args, "yolo", False)), flag_mode=getattr(args, "sandbox", None))
    for name in _CORE_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # renamed or gone: build_session imports what it really needs
    conn = connection_from_args(args, config)
    from ketch.providers.models import wire_module

    importlib.import_module(wire_module(conn))
    from types import SimpleNamespace

    from ketch.wire.pricing import price_known

    price_known(SimpleNamespace(model_name=conn.model_name, system=None))  # loads the price data here, not on the loop
    if config.mcp.get("servers"):
        importlib.import_module("ketch.extensions.mcp")
    detected()


def _trust_question(args: Any, cwd: Path) -> Any:
    from ketch.config import trust
    from ketch.config.settings import find_project_root, project_split
    from ketch.ui.trust_overlay import TrustQuestion

    split = project_split(cwd)
    root = find_project_root(cwd)
    standing = trust.standing_of(root, split, flag=bool(getattr(args, "trust", False)))
    if not standing.needs_answer:
        return _mcp_server_question(args, cwd) if standing.applied else None
    return TrustQuestion(
        folder=str(root),
        config_file=str(split.path.relative_to(root)),
        items=[(item.text, item.marked) for item in split.additions],
        changed=standing.standing == "changed",
        answer=lambda trusted: trust.remember(root, trusted, split.digest),
    )


def _mcp_server_question(args: Any, cwd: Path) -> Any:
    """The next MCP server of a trusted folder's config not yet answered for its exact launch
    (``extensions.mcp_approval``), or None: asked one server at a time, after the folder."""
    from ketch.extensions import mcp_approval
    from ketch.frontends.assemble import config_from_args
    from ketch.ui.trust_overlay import TrustQuestion

    config = config_from_args(args, cwd)
    waiting = [a for a in mcp_approval.project_servers(config) if a.state in ("unknown", "changed")]
    if not waiting:
        return None
    approval = waiting[0]
    return TrustQuestion(
        folder=str(approval.folder),
        config_file=str(config.project_trust.split.path.relative_to(approval.folder)),
        items=[(line, False) for line in approval.lines()],
        changed=approval.state == "changed",
        answer=lambda ok: mcp_approval.remember(approval, ok),
        heading=f"MCP server {approval.name} " + ("changed since you approved it" if approval.state == "changed" else "wants to start"),
        labels=("Start this server (y)", "Do not start it (n)"),
    )


class Interactive:
    """What the UI is given: the session factory, history, ``@`` candidates, commands."""

    def __init__(self, args: Any, cwd: Path, resume_collector: Callable[[], None] | None = None) -> None:
        self.args = args
        self._resume_collector = resume_collector  # ends run_interactive's pause of the collector
        self.cwd = cwd
        self.root = project_root(cwd)
        self.session: Any = None
        self.error: Exception | None = None
        self._store: Any = None
        self.registry = _builtin_registry()
        self.actions: SlashActions | None = None

    # -- the session -------------------------------------------------------------------
    async def build_session(self) -> Any:
        """The ``session_factory``: imports off the loop, then the session on it. The cyclic collector
        stays paused until then (by ``run_interactive``, or here): imports and the session build
        long-lived objects, and its passes over them found nothing to free (``context.collector``)."""
        resume, self._resume_collector = self._resume_collector or pause_collector(), None
        try:
            await asyncio.to_thread(_preload, self.args, self.cwd)
            from ketch.frontends.assemble import build_session

            session = await build_session(self.args, interactive=True, titles=True)
        finally:
            resume()
        from ketch.extensions.commands import command_dirs, load_user_commands
        from ketch.config.settings import user_config_dir
        from ketch.frontends.slash_actions import SlashActions

        self.session = session
        self.actions = SlashActions(lambda: self.session, self.args, self.cwd)
        warn = session.startup_notices.append
        self.registry.add_user_commands(load_user_commands(command_dirs(self.root, user_config_dir()), warn), warn)
        return session

    async def trust_question(self) -> Any:
        """The trust question for this folder, or None when its config needs no answer."""
        return await asyncio.to_thread(_trust_question, self.args, self.cwd)

    def startup_failed(self, exc: Exception) -> int:
        """A session that cannot start ends the app; ``run`` prints the one-line reason."""
        self.error = exc
        from ketch.protocol.exceptions import ConfigError

        return EXIT_USAGE if isinstance(exc, ConfigError) else 1

    async def intro(self) -> list[Any] | None:
        """What a resumed session shows first: its conversation so far, as it was shown."""
        session = self.session
        if session is None or not session.messages:
            return None
        from ketch.frontends.slash_actions import resumed_transcript

        return await resumed_transcript(session)

    # -- prompt history, per project ------------------------------------------------
    def _history_store(self) -> Any:
        if self._store is None:
            from ketch.state.store import Store

            self._store = Store.open()
        return self._store

    def load_history(self) -> list[str]:
        return self._history_store().prompt_history(str(self.root))

    def save_history(self, text: str) -> None:
        self._history_store().add_prompt(str(self.root), text)

    # -- @ candidates ---------------------------------------------------------------
    def candidates(self) -> Iterator[str]:
        """Workspace-relative paths for ``@`` (called in a worker thread)."""
        from ketch.tools.workspace import Workspace

        root = str(self.root)
        for path in Workspace(self.root).iter_paths(root, include_dirs=True, limit=MAX_CANDIDATES):
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            yield rel + "/" if os.path.isdir(path) and not os.path.islink(path) else rel

    # -- slash commands -------------------------------------------------------------
    async def on_command(self, name: str, args: str) -> str | None:
        if self.actions is None:
            return "The session is still loading."
        return await self.actions.run(name, args)

    async def command_choices(self, name: str) -> list[str]:
        if self.actions is None:
            return []
        return await self.actions.choices(name)

    def display_prompt(self, text: str) -> str:
        """A prompt as echoed: the images it attaches shown as ``[image: name, WxH]``."""
        if "." not in text:
            return text
        from ketch.core.attachments import echo_text

        return echo_text(text, self.root)

    def tool_output(self, call_id: str) -> str | None:
        """The full result the model got for ``call_id`` (for the pager), newest first."""
        session = self.session
        if session is None:
            return None
        from pydantic_ai.messages import ModelRequest, RetryPromptPart, ToolReturnPart

        for message in reversed(session.messages):
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                if isinstance(part, (ToolReturnPart, RetryPromptPart)) and part.tool_call_id == call_id:
                    if isinstance(part.content, str):
                        return part.content
                    return part.model_response_str() if isinstance(part, ToolReturnPart) else part.model_response()
        return None

    # -- wiring ---------------------------------------------------------------------
    def app_config(self) -> AppConfig:
        from ketch.frontends.rewind_actions import SessionRewind
        from ketch.ui.appconfig import AppConfig

        return AppConfig(
            session_factory=self.build_session,
            trust_question=self.trust_question,
            load_history=self.load_history,
            save_history=self.save_history,
            candidates=self.candidates,
            commands=self.registry,
            on_command=self.on_command,
            command_choices=self.command_choices,
            rewind=SessionRewind(lambda: self.session),
            on_ready=self.intro,
            first_input="/resume" if getattr(self.args, "resume", None) == "" else None,
            startup_error=self.startup_failed,
            program=resume_program(self.args),
            tool_output=self.tool_output,
            display_prompt=self.display_prompt,
            setup=FirstRun(),
        )

    async def close(self) -> None:
        """Close the session (MCP servers, hooks) and the history store."""
        if self._resume_collector is not None:  # an app closed before its session was built
            self._resume_collector()
        if self.session is not None:
            from ketch.frontends.slash_actions import close_model

            try:
                await self.session.aclose()
            except Exception:  # noqa: BLE001 - closing must not turn a clean exit into an error
                pass
            await close_model(self.session.model)
        if self._store is not None:
            self._store.close()


class FirstRun:
    """``AppConfig.setup``: the first-run choices and writing them (``first_run.py``)."""

    def wanted(self, exc: BaseException) -> bool:
        from ketch.frontends.first_run import needs_setup

        return needs_setup(exc)

    def choices(self) -> list[Any]:
        from ketch.frontends.first_run import choices

        return choices()

    def apply(self, choice: Any, model: str, key: str) -> Path:
        from ketch.frontends.first_run import apply

        return apply(choice, model, key)


def resume_program(args: Any) -> str:
    """How the farewell spells ketch so that ``… --resume ID`` reaches the same model
    (an ad-hoc ``--base-url`` endpoint is not stored with the session)."""
    import shlex

    parts = ["ketch"]
    if getattr(args, "base_url", None):
        parts += ["--base-url", args.base_url, "--wire", str(args.wire), "--model", str(args.model)]
        if getattr(args, "api_key_env", None):
            parts += ["--api-key-env", args.api_key_env]
    else:
        if getattr(args, "model", None):
            parts += ["-m", args.model]
        if getattr(args, "wire", None):
            parts += ["--wire", args.wire]
    for flag in ("agent", "think"):  # every other flag that shaped the session
        if getattr(args, flag, None):
            parts += [f"--{flag}", str(getattr(args, flag))]
    for directory in getattr(args, "add_dir", None) or []:
        parts += ["--add-dir", directory]
    for flag, name in (("web_search", "--web-search"), ("privacy", "--privacy"), ("yolo", "--yolo")):
        if getattr(args, flag, False) is True:
            parts.append(name)
    if getattr(args, "max_steps", None):
        parts += ["--max-steps", str(args.max_steps)]
    return shlex.join(parts)


def _builtin_registry() -> CommandRegistry:
    from ketch.extensions.commands import CommandRegistry, builtin_commands

    return CommandRegistry(builtin_commands())


async def run_with(runtime: Interactive, config: AppConfig, **io: Any) -> int:
    """Run the app with ``config`` (``io``: input/output for tests), then close the runtime."""
    from ketch.ui.app import run_app

    stray: list[str] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: stray.append(str(ctx.get("exception") or ctx.get("message"))))
    try:
        return await run_app(config, **io)
    finally:
        await runtime.close()
        if stray and os.environ.get("KETCH_DEBUG"):
            print("ketch: background errors: " + "; ".join(stray), file=sys.stderr)


def _import_ui() -> None:
    try:
        importlib.import_module("ketch.ui.controller")
    except Exception:  # noqa: BLE001 - imported again on the main thread, where it fails loudly
        pass


def _echo_while_importing_the_ui() -> bytes:
    """Import the UI in a worker while keys typed meanwhile are echoed; returns them."""
    import shutil
    import threading

    from ketch.ui.typeahead import collect_while

    loading = threading.Thread(target=_import_ui, name="ketch-ui-import", daemon=True)
    loading.start()
    if not sys.stdout.isatty():
        loading.join()
        return b""
    return collect_while(loading, sys.stdin.fileno(), sys.stdout, columns=shutil.get_terminal_size().columns)


def run_interactive(args: Any, resume_collector: Callable[[], None] | None = None) -> int:
    """The interactive UI in this terminal; returns the exit code. The cyclic collector stays paused
    (by ``cli.main``, or here) until the session is built or failed (``context.collector``)."""
    resume = resume_collector or pause_collector()
    try:
        if not sys.stdin.isatty():
            print("ketch: the interactive UI needs a terminal on stdin; for one task run ketch -p PROMPT "
                  "(or -p - to read the prompt from stdin)", file=sys.stderr)
            return EXIT_USAGE
        from ketch.ui.app import early_prompt, quiet_tty

        with quiet_tty():
            early_prompt()
            typed = _echo_while_importing_the_ui()
            runtime = Interactive(args, Path(getattr(args, "cwd", None) or os.getcwd()).resolve(), resume)
            config = runtime.app_config()
            config.typeahead = typed
            try:
                code = asyncio.run(run_with(runtime, config))
            except KeyboardInterrupt:
                code = 130
            except EOFError:  # the terminal went away: leave as on /quit
                code = 0
    finally:
        resume()
    if runtime.error is not None:
        from ketch.providers.errors import redact

        print(f"ketch: {redact(str(runtime.error) or type(runtime.error).__name__)}", file=sys.stderr)
    return code

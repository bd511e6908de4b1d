"""Slash commands as the UI runs them: panels, pickers, and hand-offs to the core."""

from __future__ import annotations

from typing import Any

from ketch.ui.overlays import ListPicker
from ketch.ui.panels import command_help, context_panel, cost_panel, help_panel, todos_panel, tools_panel

KetchApp = Any
"""The app (``ui.controller.KetchApp``) is passed in, not imported: it imports this module."""

UI_COMMANDS: dict[str, str] = {
    "help": "show commands and keys",
    "tools": "list the tools offered on the next step",
    "cost": "show the session cost",
    "context": "show context use by part",
    "todos": "show the task list",
    "expand": "show a tool call's full output: /expand N (ctrl-o: the latest)",
    "clear": "start a new conversation and clear the screen",
    "model": "switch the model",
    "think": "set the thinking level",
    "agent": "switch the agent",
    "resume": "resume an earlier session",
    "rewind": "put the files or the conversation back to before a prompt (esc esc)",
    "bashes": "list the background commands; pick one to stop it",
    "quit": "exit ketch",
}
PICKER_COMMANDS = ("model", "think", "agent", "resume")
DEFAULT_CHOICES = {"think": ["off", "low", "medium", "high"], "agent": ["build", "plan"]}


def parse(text: str) -> tuple[str, str]:
    """'/model gpt-5' → ('model', 'gpt-5')."""
    head, _, rest = text.strip()[1:].partition(" ")
    return head.lower(), rest.strip()


class SlashHandler:
    """Runs one slash command for the app."""

    def __init__(self, app: KetchApp) -> None:
        self._app = app

    def _print(self, lines: list[str]) -> None:
        self._app.committer.commit(lines + [""])

    async def run(self, text: str) -> None:
        """Run ``text`` as typed (also when it comes off the queue)."""
        app = self._app
        name, args = parse(text)
        name, command = app.commands.resolve(name)
        app.echo_prompt(text)
        known = app.commands.names()
        if name not in known:
            hint = app.commands.suggest(name)
            self._print([f"\x1b[31mUnknown command /{name}.\x1b[0m"
                         + (f" Did you mean /{hint}?" if hint else " Type /help for the list.")])
            return
        if command is not None and getattr(command, "template", None) is not None:
            from ketch.extensions.commands import expand_user_command

            await app.stream_turn(expand_user_command(command, args), echo=False)
            return
        status = app.status
        panels = {"tools": tools_panel, "cost": cost_panel, "context": context_panel, "todos": todos_panel}
        if name in panels:
            if status is None:
                self._print(["The session is still loading."])
            else:
                self._print(panels[name](status))
            return
        if name == "expand":
            self._expand(args)
            return
        if name == "help":
            self._help(args, known)
            return
        if name in ("quit", "exit"):
            app.exit(0)
            return
        if name == "clear":
            await self.hand_off(name, args)
            app.output.write_raw("\x1b[2J\x1b[H")
            app.committer.request_rewind()
            return
        if name == "rewind":
            from ketch.ui.rewind import open_rewind

            await open_rewind(app)
            return
        if name in PICKER_COMMANDS and not args:
            await self._open_picker(name)
            return
        if name == "bashes" and not args and status is not None and status.background:
            await self._open_picker(name)
            return
        await self.hand_off(name, args)

    def _help(self, args: str, known: dict[str, str]) -> None:
        """``/help``: every command and key; ``/help NAME``: that command only."""
        if not args:
            self._print(help_panel(known))
            return
        wanted, command = self._app.commands.resolve(args.split()[0].lstrip("/").lower())
        if wanted not in known:
            hint = self._app.commands.suggest(wanted)
            self._print([f"\x1b[31mUnknown command /{wanted}.\x1b[0m" + (f" Did you mean /{hint}?" if hint else "")])
            return
        self._print(command_help(wanted, getattr(command, "help", "") or known[wanted],
                                 getattr(command, "args_hint", ""), tuple(getattr(command, "aliases", ()))))

    def _expand(self, args: str) -> None:
        app = self._app
        if not args:
            if not app.view.calls:
                self._print(["No tool call has finished yet."])
            else:
                app.open_call_list()
            return
        try:
            number = int(args.lstrip("#"))
        except ValueError:
            self._print([f"\x1b[31m/expand takes a call number, e.g. /expand 3 (got {args!r}).\x1b[0m"])
            return
        problem = app.open_output(number)
        if problem:
            self._print([problem])

    async def _open_picker(self, name: str) -> None:
        app = self._app
        options: list[str] = []
        source = app.config.command_choices
        if source is not None:
            try:
                options = list(await source(name))
            except Exception as exc:  # noqa: BLE001 - one line for the user
                self._print([f"\x1b[31m/{name}: {exc}\x1b[0m"])
                return
        options = options or DEFAULT_CHOICES.get(name, [])
        if not options:
            self._print([f"Nothing to choose for /{name}."])
            return

        def choose(option: str) -> None:
            app._spawn(app.run_busy(self.hand_off(name, option)))

        app.push_overlay(ListPicker(f"/{name}", options, choose))

    async def hand_off(self, name: str, args: str) -> None:
        """Give a command to the core (``AppConfig.on_command``) and print its reply."""
        app = self._app
        handler = app.config.on_command
        if handler is None:
            self._print([f"/{name} is not available here."])
            return
        try:
            reply = await handler(name, args)
        except Exception as exc:  # noqa: BLE001 - one line for the user
            reply = f"\x1b[31m/{name} failed: {exc}\x1b[0m"
        if isinstance(reply, list):
            await app.play(reply)
        elif reply:
            self._print(reply.splitlines())

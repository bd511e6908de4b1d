"""The slash-command registry: built-ins, user prompt templates, parsing, menu matching.

The registry is data. Front ends attach handlers to built-ins after building it; user
commands are Markdown prompt templates expanded by ``expand_user_command``.

User commands live in ``<project>/.ketch/commands/*.md`` and ``<config>/commands/*.md``
(a project command shadows a user command of the same name; neither may shadow a
built-in). The file name is the command name. Optional front matter::

    ---
    description: Review the staged diff
    argument-hint: [focus]
    ---
    Review the staged changes, focusing on $ARGUMENTS.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ketch.config.frontmatter import FrontMatterError, split_front_matter

COMMAND_NAME = re.compile(r"[a-z0-9][a-z0-9\-_]{0,63}")
MAX_TEMPLATE_BYTES = 64 * 1024
ARGUMENTS = "$ARGUMENTS"


@dataclass
class Command:
    """One slash command. ``handler`` is attached by the front end (None for templates)."""

    name: str
    aliases: tuple[str, ...] = ()
    args_hint: str = ""
    help: str = ""
    handler: Callable[..., Any] | None = None
    template: str | None = None
    """The prompt template of a user command (None for built-ins)."""
    source: str = "builtin"
    """``builtin``, or the path of the Markdown file a user command came from."""

    @property
    def description(self) -> str:
        """The help text (the name menus and pickers read)."""
        return self.help

    @property
    def names(self) -> tuple[str, ...]:
        """The name and every alias."""
        return (self.name, *self.aliases)


_BUILTINS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("help", ("h", "?"), "[command]", "Show commands and keys, or help for one command"),
    ("model", (), "[provider:model]", "Show or switch the model"),
    ("think", (), "[off|low|medium|high]", "Set the thinking level"),
    ("agent", (), "[name]", "Show or switch the agent (build, plan, custom)"),
    ("clear", ("new",), "", "Start a fresh conversation"),
    ("compact", (), "[focus]", "Summarize the conversation to free context"),
    ("resume", (), "[session]", "Resume an earlier session"),
    ("sessions", (), "[N|all]", "List saved sessions (the newest 20, N, or all)"),
    ("fork", (), "", "Continue in a copy of this session"),
    ("repair", (), "", "Drop the last exchange when the provider keeps rejecting the session"),
    ("tools", (), "", "List the tools the model can use"),
    ("cost", ("usage",), "", "Show token usage and cost"),
    ("context", (), "", "Show what fills the context window"),
    ("todos", ("todo",), "", "Show the task list"),
    ("memory", (), "[add <note>]", "Show or edit durable notes"),
    ("skills", (), "", "List available skills"),
    ("mcp", (), "", "Show MCP servers and their tools"),
    ("sandbox", ("permissions",), "[read-only|workspace-write|full-access]", "Show what ketch may change, or switch the sandbox mode"),
    ("approval", (), "[ask|auto|plan|never]", "Show or switch the approval mode (shift-tab cycles ask, auto, plan)"),
    ("registry", (), "[list|show|install|remove] [name]", "Browse and install skills and plugins"),
    ("commit", (), "[hint]", "Write a commit message and commit staged changes"),
    ("export", (), "[path]", "Export the conversation as Markdown"),
    ("bashes", (), "[kill <id>]", "List the background commands; pick one (or kill ID) to stop it"),
    ("quit", ("exit", "q"), "", "Leave ketch"),
)


def builtin_commands() -> list[Command]:
    """Fresh ``Command`` objects for every built-in (without handlers)."""
    return [Command(name, aliases, hint, text) for name, aliases, hint, text in _BUILTINS]


@dataclass(frozen=True)
class ParsedFrontMatter:
    description: str = ""
    args_hint: str = ""
    body: str = ""


class CommandFileError(ValueError):
    """A user command file cannot be used; the message says why."""


def parse_command_file(text: str) -> ParsedFrontMatter:
    """Split optional ``---`` front matter (see ``frontmatter``) from the template."""
    try:
        parsed = split_front_matter(text)
    except FrontMatterError as exc:
        raise CommandFileError(str(exc)) from None
    if parsed is None:
        return ParsedFrontMatter(body=text)
    meta, body = parsed
    return ParsedFrontMatter(meta.get("description", ""), meta.get("argument-hint", ""), body.lstrip("\n"))


def load_command_file(path: Path) -> Command:
    """Read one user command; raise ``CommandFileError`` when it is unusable."""
    name = path.stem
    if not COMMAND_NAME.fullmatch(name):
        raise CommandFileError(f"{name!r} is not a command name (lowercase letters, digits, '-', '_')")
    try:
        if path.stat().st_size > MAX_TEMPLATE_BYTES:
            raise CommandFileError(f"larger than {MAX_TEMPLATE_BYTES // 1024} KB")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandFileError(f"cannot read it: {exc}") from exc
    parsed = parse_command_file(text.replace("\r\n", "\n"))
    if not parsed.body.strip():
        raise CommandFileError("the prompt template is empty")
    first_line = parsed.body.strip().splitlines()[0]
    return Command(
        name,
        args_hint=parsed.args_hint,
        help=parsed.description or first_line[:80],
        template=parsed.body,
        source=str(path),
    )


def command_dirs(project_dir: Path | None, config_dir: Path | None) -> list[Path]:
    """Where user commands live, highest precedence first."""
    dirs = []
    if project_dir is not None:
        dirs.append(project_dir / ".ketch" / "commands")
    if config_dir is not None:
        dirs.append(config_dir / "commands")
    return dirs


def load_user_commands(dirs: Iterable[Path], warn: Callable[[str], None] = lambda _m: None) -> list[Command]:
    """Load ``*.md`` commands from ``dirs`` (earlier dirs win); bad files are skipped via ``warn``."""
    found: dict[str, Command] = {}
    for directory in dirs:
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.md")):
            try:
                command = load_command_file(path)
            except CommandFileError as exc:
                warn(f"skipped command file {path}: {exc}")
                continue
            found.setdefault(command.name, command)
    return list(found.values())


def expand_user_command(cmd: Command, args: str) -> str:
    """The prompt a user command sends: ``$ARGUMENTS`` replaced by ``args``, or the
    arguments appended on their own paragraph when the template does not mention them."""
    template = cmd.template or ""
    args = args.strip()
    if ARGUMENTS in template:
        return template.replace(ARGUMENTS, args)
    return f"{template.rstrip()}\n\n{args}" if args else template


@dataclass
class CommandRegistry:
    """Every slash command by name and alias."""

    commands: list[Command] = field(default_factory=list)

    def __post_init__(self) -> None:
        initial, self.commands = self.commands, []
        self._by_name: dict[str, Command] = {}
        for command in initial:
            self.register(command)

    def register(self, command: Command) -> None:
        """Add a command; raise ``ValueError`` if a name or alias is taken."""
        taken = [n for n in command.names if n in self._by_name]
        if taken:
            raise ValueError(f"/{taken[0]} is already a command")
        self.commands.append(command)
        for name in command.names:
            self._by_name[name] = command

    def add_user_commands(self, commands: Iterable[Command], warn: Callable[[str], None] = lambda _m: None) -> None:
        """Register user commands, skipping (with a warning) any that clash with a built-in."""
        for command in commands:
            try:
                self.register(command)
            except ValueError:
                warn(f"skipped command file {command.source}: /{command.name} is a built-in command")

    def get(self, name: str) -> Command | None:
        """The command called ``name`` (or aliased so), without the slash."""
        return self._by_name.get(name.lstrip("/"))

    def parse(self, text: str) -> tuple[Command, str] | None:
        """``(command, args)`` for input like ``/model gpt-5``; None if not a known command."""
        m = re.match(r"/(\S+)\s*(.*)", text, re.DOTALL)
        command = self._by_name.get(m.group(1)) if m else None
        if m is None or command is None:
            return None
        return command, m.group(2).strip()

    def match(self, prefix: str) -> list[Command]:
        """Commands for the menu: name prefixes, then alias prefixes, then names that
        contain the text, then fuzzy (subsequence) matches; shorter names first. An
        empty prefix lists every command in registration order."""
        query = prefix.lstrip("/").lower()
        if not query:
            return list(self.commands)
        ranked = [(tier, len(c.name), c.name, c) for c in self.commands if (tier := _tier(query, c)) is not None]
        return [item[3] for item in sorted(ranked, key=lambda k: k[:3])]

    def suggest(self, name: str, limit: int = 3) -> list[str]:
        """The closest command names to an unknown one (aliases map to their command)."""
        name = name.lstrip("/").lower()
        close = difflib.get_close_matches(name, list(self._by_name), n=limit * 2, cutoff=0.5)
        return list(dict.fromkeys(self._by_name[c].name for c in close))[:limit]


def _is_subsequence(query: str, text: str) -> bool:
    it = iter(text)
    return all(ch in it for ch in query)


def _tier(query: str, command: Command) -> int | None:
    if not query:
        return 0
    if command.name.startswith(query):
        return 0
    if any(a.startswith(query) for a in command.aliases):
        return 1
    if any(query in n for n in command.names):
        return 2
    if any(_is_subsequence(query, n) for n in command.names):
        return 3
    return None


def default_registry(
    project_dir: Path | None, config_dir: Path | None, warn: Callable[[str], None] = lambda _m: None
) -> CommandRegistry:
    """Built-ins plus the user's and the project's command files."""
    registry = CommandRegistry(builtin_commands())
    registry.add_user_commands(load_user_commands(command_dirs(project_dir, config_dir), warn), warn)
    return registry

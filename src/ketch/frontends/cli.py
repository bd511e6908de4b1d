"""Command line: argv parsing, wiring and lifecycle.

Importing this module must stay cheap: ``ketch --version`` and ``--help`` import neither
the model SDK nor the UI. Everything heavy is imported inside the command that needs it.
"""

from __future__ import annotations

import os
import sys
TYPE_CHECKING = False  # typing itself costs ~10 ms at start-up

from ketch import __version__

if TYPE_CHECKING:
    import argparse
    from pathlib import Path
    from typing import Any, NoReturn

EXIT_OK, EXIT_PROVIDER, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
SUBCOMMANDS = ("models", "auth", "sessions", "export", "repair", "mcp", "registry", "rewind", "checkpoints", "sandbox", "trust")


def _parser_class() -> type[argparse.ArgumentParser]:
    import argparse

    class Parser(argparse.ArgumentParser):
        """Usage errors as one line (argparse prints the whole usage block first)."""

        def error(self, message: str) -> NoReturn:
            self.exit(EXIT_USAGE, f"ketch: {message} (see '{self.prog} --help')\n")

    return Parser


def _main_parser() -> argparse.ArgumentParser:
    import argparse

    p = _parser_class()(
        prog="ketch",
        description="ketch: a terminal AI coding agent. Without -p it opens the interactive UI in this repository.",
        epilog="Subcommands: ketch models [CONNECTION] [--capabilities] | ketch auth login NAME | "
        "ketch sessions [--limit N | --all] | ketch export ID --format md|json|atif | ketch repair ID | ketch mcp list|approve NAME|deny NAME | "
        "ketch registry list|show|install|remove | ketch rewind ID [--to N] [--code|--chat|--both] | ketch checkpoints list|prune | "
        "ketch acp [model flags] | ketch sandbox check | ketch trust list|add|remove [PATH]",
    )
    p.add_argument("--version", action="version", version=f"ketch {__version__}")
    p.add_argument(
        "-p", "--print", dest="prompt", metavar="PROMPT", nargs="?", const="-",
        help="run one task headless and print the answer ('-' or no PROMPT reads stdin)",
    )
    p.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text", help="headless output format")
    p.add_argument("-m", "--model", help="model as CONNECTION:MODEL, e.g. openai:gpt-5, anthropic:claude-sonnet-5-5, ollama:qwen3")
    p.add_argument("--think", choices=("off", "low", "medium", "high", "max"), help="thinking level")
    p.add_argument("--agent", help="agent variant: build (default), plan, or one from config")
    p.add_argument("--yolo", action="store_true", help="approve every call that no guard refuses (and full access, unless --sandbox says otherwise)")
    p.add_argument(
        "--sandbox", choices=("read-only", "workspace-write", "full-access", "off"),
        help="where commands may write: read-only, workspace-write (default), full-access (off is the same)",
    )
    p.add_argument(
        "--approval", choices=("ask", "auto", "never"),
        help="ask (default): every command asks, sandboxed or not; auto: sandboxed commands run without asking; "
        "never: sandboxed commands and allowed writes run, whatever would still ask is denied (shift-tab and /approval switch inside a session)",
    )
    p.add_argument("--trust", action="store_true", help="apply what this folder's .ketch/config.toml widens (allow rules, hooks, MCP servers, ...) for this run")
    p.add_argument("--max-steps", "--max-turns", dest="max_steps", type=int,
                   help="model requests per turn before it stops (default 100; headless exit code 4)")
    p.add_argument("--max-cost", type=float, metavar="USD",
                   help="headless: stop once the session's cost reaches USD (exit code 6; needs a priced model)")
    p.add_argument("--time-limit", type=float, metavar="SECONDS",
                   help="headless: stop the run after SECONDS of wall time (exit code 7)")
    p.add_argument("--base-url", help="ad-hoc endpoint, with --wire and --model NAME (no config needed)")
    p.add_argument("--wire", choices=("openai-chat", "openai-responses", "anthropic-messages", "gemini"), help="wire protocol of --base-url or an override")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the key")
    p.add_argument("-c", "--continue", dest="continue_", action="store_true", help="continue the latest session in this directory")
    p.add_argument("-r", "--resume", nargs="?", const="", metavar="ID", help="resume a session (a picker without ID)")
    p.add_argument("--fork", action="store_true", help="with --continue or --resume ID: continue a copy of that session")
    p.add_argument("--compact", action="store_true", help="compact the history before the turn")
    p.add_argument("--web-search", action="store_true", help="allow web search in headless mode")
    p.add_argument("--privacy", action="store_true", help="privacy mode: no web search of any kind")
    p.add_argument("--add-dir", action="append", default=[], metavar="DIR", help="another directory file tools may touch")
    p.add_argument("--cwd", help=argparse.SUPPRESS)
    return p


def _acp_parser() -> argparse.ArgumentParser:
    """``ketch acp``: the model and safety flags of the main command; the editor sends the rest."""
    p = _main_parser()
    p.prog = "ketch acp"
    p.description = "Run ketch as an Agent Client Protocol agent on stdin/stdout, for editors (Zed, Neovim, JetBrains, Emacs)."
    return p


def _sub_parser() -> argparse.ArgumentParser:
    p = _parser_class()(prog="ketch")
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("models", help="list a connection's models")
    m.add_argument("connection", nargs="?")
    m.add_argument("--capabilities", action="store_true", help="print the web-search capability table")
    m.add_argument("--base-url")
    m.add_argument("--wire", choices=("openai-chat", "openai-responses", "anthropic-messages", "gemini"))
    m.add_argument("--api-key-env")
    a = sub.add_parser("auth", help="store a key")
    a.add_argument("action", choices=("login", "logout"))
    a.add_argument("name")
    ss = sub.add_parser(
        "sessions",
        help="list sessions in this directory",
        description="List the sessions started in this directory, most recently used first: "
        "the 50 most recent unless --limit or --all says otherwise.",
    )
    shown = ss.add_mutually_exclusive_group()
    shown.add_argument("-n", "--limit", type=_positive_int, metavar="N", help="list the N most recent sessions (default 50)")
    shown.add_argument("--all", action="store_true", help="list every session in this directory")
    e = sub.add_parser("export", help="export a session")
    e.add_argument("id")
    e.add_argument("--format", choices=("md", "json", "atif"), default="md", help="atif: an ATIF trajectory (Harbor's format)")
    rp = sub.add_parser("repair", help="drop the last exchange of a session a provider keeps rejecting")
    rp.add_argument("id")
    mc = sub.add_parser("mcp", help="MCP servers")
    mc.add_argument("action", choices=("list", "approve", "deny"))
    mc.add_argument("name", nargs="?", help="approve/deny: the server from this folder's config")
    mc.add_argument("--yes", action="store_true", help="approve without the interactive confirmation (after showing the command)")
    r = sub.add_parser("registry", help="skills and plugins from the registry")
    r.add_argument("action", choices=("list", "show", "install", "remove"))
    r.add_argument("name", nargs="?")
    r.add_argument("--yes", action="store_true", help="install without the interactive confirmation (after showing the text)")
    r.add_argument("--git", metavar="URL", help="install: from this git repository (https, or a local repository's path) instead of the index")
    r.add_argument("--commit", help="with --git: the full commit id to install from (no branch, tag or abbreviation)")
    r.add_argument("--path", dest="git_path", default="SKILL.md", help="with --git: the file in the repository (default SKILL.md)")
    r.add_argument("--kind", choices=("skill", "plugin"), default="skill", help="with --git: what the file is")
    r.add_argument("--sha256", help="with --git: the file's expected sha256 as well")
    from ketch.frontends.rewind_cmd import add_checkpoints_parser, add_parser as add_rewind

    add_rewind(sub)
    add_checkpoints_parser(sub)
    sb = sub.add_parser("sandbox", help="the OS sandbox: which mechanism confines commands here, and the policy")
    sb.add_argument("action", choices=("check",))
    sb.add_argument("--sandbox", choices=("read-only", "workspace-write", "full-access", "off"))
    t = sub.add_parser("trust", help="folders whose repository config may widen what ketch does")
    t.add_argument("action", choices=("list", "add", "remove"))
    t.add_argument("path", nargs="?", help="the project folder (default: this one)")
    return p


def _positive_int(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, not {text!r}")
    return value


def error(message: str) -> None:
    print(f"ketch: {message}", file=sys.stderr)


def _before_running() -> None:
    """Once the arguments parse (so ``--help`` stays as cheap as ``--version``): the cache of the
    methods dataclasses compile (``dataclass_code``; ahead of every import that creates
    dataclasses, about 30 % of an interactive start's CPU), then the checks of the config's
    [hooks]/[permissions]/[guards], which extensions own (config.tables imports pydantic)."""
    from ketch.config.dirs import user_data_dir
    from ketch.frontends import dataclass_code

    dataclass_code.install(str(user_data_dir()))
    from ketch.extensions import table_checks

    table_checks.install()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:  # the fast path: no argparse, no regex compile
        print(f"ketch {__version__}")
        return EXIT_OK
    from ketch.protocol.exceptions import ConfigError
    from ketch.wire.sdk_pins import quiet_imports

    quiet_imports()

    try:
        if argv and argv[0] == "acp":
            acp_args = _acp_parser().parse_args(argv[1:])
            _before_running()
            from ketch.frontends.acp_server import run_acp

            return run_acp(acp_args)
        if argv and argv[0] in SUBCOMMANDS:
            sub_args = _sub_parser().parse_args(argv)
            _before_running()
            from ketch.frontends.subcommands import run_subcommand

            return run_subcommand(sub_args)
        args = _main_parser().parse_args(argv)
        if args.prompt is not None:
            _before_running()
            from ketch.frontends.headless import run_headless

            return run_headless(args)
        from ketch.context.collector import pause_collector

        resume_collector = pause_collector()  # until the session is built (run_interactive)
        try:
            _before_running()
            from ketch.frontends.interactive import run_interactive
        except BaseException:
            resume_collector()
            raise
        return run_interactive(args, resume_collector)
    except ConfigError as exc:
        error(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        error("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - never a traceback for the user
        if os.environ.get("KETCH_DEBUG"):
            raise
        from ketch.providers.errors import redact

        error(redact(f"internal error: {type(exc).__name__}: {exc} (set KETCH_DEBUG=1 for details)"))
        return EXIT_PROVIDER


def cwd_of(args: Any) -> Path:
    from pathlib import Path

    return Path(getattr(args, "cwd", None) or os.getcwd()).resolve()


if __name__ == "__main__":
    sys.exit(main())

"""``ketch models | auth | sessions | export | repair | mcp | registry | sandbox``."""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
from pathlib import Path
from typing import Any

from ketch.protocol import strict_json
from ketch.protocol.exceptions import ConfigError

EXIT_OK, EXIT_PROVIDER, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a writer whose reader went away


def run_subcommand(args: Any) -> int:
    handler = {
        "models": _models,
        "auth": _auth,
        "sessions": _sessions,
        "export": _export,
        "repair": _repair,
        "mcp": _mcp,
        "registry": _registry,
        "sandbox": _sandbox,
        "rewind": _rewind,
        "checkpoints": _checkpoints,
        "trust": _trust,
    }[args.command]
    return handler(args)


def _rewind(args: Any) -> int:
    from ketch.frontends.rewind_cmd import run_rewind

    return run_rewind(args)


def _checkpoints(args: Any) -> int:
    from ketch.frontends.rewind_cmd import run_checkpoints

    return run_checkpoints(args)


def _cwd() -> Path:
    return Path(os.getcwd()).resolve()


def _config() -> Any:
    from ketch.config.settings import load_config

    config = load_config(_cwd())
    notice = config.project_trust.notice() if config.project_trust is not None else ""
    if notice:
        print(f"ketch: {notice}", file=sys.stderr)
    return config


def _trust(args: Any) -> int:
    from ketch.frontends.trust_command import run_trust

    return run_trust(args)


def _models(args: Any) -> int:
    from ketch.config.settings import PRESETS, known_connections, resolve_connection
    from ketch.config.presets import ModelListError, fetch_models

    if args.capabilities:
        from ketch.websearch.capability import capability_table

        rows = capability_table()
        columns = list(rows[0])
        widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
        print("  ".join(c.upper().ljust(widths[c]) for c in columns).rstrip())
        print("  ".join("-" * widths[c] for c in columns))
        for row in rows:
            print("  ".join(row[c].ljust(widths[c]) for c in columns).rstrip())
        return EXIT_OK
    config = _config()
    if not args.connection and not args.base_url:
        print("Connections (list one's models with 'ketch models NAME'):")
        for name in known_connections(config):
            preset = PRESETS.get(name)
            conn_cfg = config.connections.get(name)
            wire = (conn_cfg.wire if conn_cfg and conn_cfg.wire else None) or (preset.wire if preset else "openai-chat")
            print(f"  {name:<18} {wire}")
        return EXIT_OK
    conn = resolve_connection(
        config,
        f"{args.connection}:*" if args.connection else "adhoc",
        base_url=args.base_url,
        wire=args.wire,
        api_key_env=args.api_key_env,
    )
    try:
        models = fetch_models(conn.base_url, conn.wire, conn.api_key)
    except ModelListError as exc:
        print(f"ketch: {exc}", file=sys.stderr)
        return EXIT_PROVIDER
    for model in models:
        print(f"{conn.name}:{model}")
    return EXIT_OK


def _auth(args: Any) -> int:
    from ketch.config.settings import keys_file, store_key, stored_keys

    if args.action == "logout":
        keys = stored_keys()
        if keys.pop(args.name, None) is None:
            print(f"ketch: no stored key for '{args.name}'", file=sys.stderr)
            return EXIT_USAGE
        path = keys_file()
        path.write_text(strict_json.dumps(keys), encoding="utf-8")
        print(f"Removed the key for {args.name}.")
        return EXIT_OK
    if sys.stdin.isatty():
        key = getpass.getpass(f"API key for {args.name}: ")
    else:
        key = sys.stdin.readline()
    key = key.strip()
    if not key:
        raise ConfigError("no key given: paste it at the prompt or pipe it on stdin")
    path = store_key(args.name, key)
    print(f"Stored the key for {args.name} in {path} (readable by you only).")
    return EXIT_OK


def _open_store() -> Any:
    """The store for reading (a read-only file will do), or ``None`` when there is none yet
    (reading creates no file or folder); a ``StoreError`` is a one-line ``ConfigError``."""
    from ketch.state.store import Store

    return Store.open_existing()


def _write_out(text: str, what: str) -> int:
    """Write ``text`` to stdout and flush it; a reader that went away ends the command quietly."""
    if sys.stdout is None:
        raise ConfigError(f"standard output is closed; redirect the {what} to a file")
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Nothing more can be written; point stdout at /dev/null so the final flush stays quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        raise ConfigError(
            f"could not write the {what} to standard output ({exc.strerror or exc}); check the file it goes to and free disk space"
        ) from None
    return EXIT_OK


SESSIONS_LIMIT = 50
"""Sessions ``ketch sessions`` lists without ``--limit`` or ``--all``."""


SESSIONS_COLUMNS = 120
"""Each row of ``ketch sessions`` fits this many columns (model and title are cut)."""
SESSIONS_MODEL_COLUMNS = 24


def _fit(text: str, width: int) -> str:
    """One line of at most ``width`` characters, cut with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: max(1, width - 1)] + "…"


def _sessions(args: Any) -> int:
    import time

    limit = None if getattr(args, "all", False) else (getattr(args, "limit", None) or SESSIONS_LIMIT)
    rows: list[Any] = []
    total = 0
    store = _open_store()
    if store is not None:
        try:
            cwd = str(_cwd())
            rows = store.list_sessions(cwd, limit=limit)
            total = len(rows)
            if limit is not None and len(rows) >= limit:
                total = store.count_sessions(cwd)
        finally:
            store.close()
    lines = []
    for row in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(row.updated))
        head = f"{row.id}  {when}  {row.message_count:>5} msgs  {_fit(row.model, SESSIONS_MODEL_COLUMNS):<{SESSIONS_MODEL_COLUMNS}}  "
        lines.append(head + _fit(row.title or "(untitled)", SESSIONS_COLUMNS - len(head)))
    if total > len(rows):
        lines.append(f"The {len(rows)} most recent of {total} sessions here; "
                     "'ketch sessions --limit N' lists N, '--all' all of them.")
    if rows:
        lines.append("Resume one with 'ketch --resume ID' (a unique prefix of the ID will do).")
    else:
        lines.append("No sessions in this directory yet.")
    return _write_out("".join(line + "\n" for line in lines), "session list")


def _export(args: Any) -> int:
    missing = ConfigError(f"no session '{args.id}'; list them with 'ketch sessions'")
    store = _open_store()
    if store is None:  # no store yet, so no session either
        raise missing
    try:
        row = store.get_session(args.id)  # a StoreError for an ambiguous prefix or a damaged file
        if row is None:
            raise missing
        from ketch.state.export import export_session

        from ketch.config.keyring import collect_keys

        text = export_session(store, row.id, args.format, ring=collect_keys(_config()))
    finally:
        store.close()
    return _write_out(text, "export")


def _repair(args: Any) -> int:
    """``ketch repair ID``: rewrite the last exchange of a session a provider keeps rejecting."""
    from ketch.state.repair import describe, repair_session
    from ketch.state.store import StoreError

    missing = ConfigError(f"no session '{args.id}'; list them with 'ketch sessions'")
    store = _open_store()
    if store is None:
        raise missing
    try:
        row = store.get_session(args.id)
        if row is None:
            raise missing
        try:
            repair = repair_session(store, row.id)
        except StoreError as exc:
            raise ConfigError(str(exc)) from None
    finally:
        store.close()
    print(describe(row.id, repair))
    if repair is not None:
        print(f"Continue it with: ketch --resume {row.id}")
    return EXIT_OK


def _mcp(args: Any) -> int:
    from ketch.extensions.mcp_approval import approved_mcp
    from ketch.extensions.mcp import start_mcp_servers

    if getattr(args, "action", "list") != "list":
        from ketch.frontends.mcp_approve_command import run_mcp_approve

        return run_mcp_approve(args)
    config = _config()
    servers = config.mcp.get("servers", {})
    mcp, held = approved_mcp(config)
    for approval in held:  # listed, never started
        print(f"{approval.name:<16} {'held':<7} -  ({approval.refusal()})")
    if not servers:
        print("No MCP servers configured ([mcp.servers.NAME] in .ketch/config.toml).")
        return EXIT_OK

    from ketch.config.keyring import collect_keys
    from ketch.tools.child_env import ChildEnv

    ring = collect_keys(config)
    child_env = ChildEnv.of(ring.names, ring.values, config.tools.keep_env)

    async def probe() -> list[Any]:
        hub = await start_mcp_servers(mcp, child_env=child_env)
        try:
            return hub.status()
        finally:
            await hub.aclose()

    for status in asyncio.run(probe()):
        tools = ", ".join(status.tools) if status.tools else "-"
        line = f"{status.name:<16} {status.state:<7} {tools}"
        if status.error:
            line += f"  ({status.error})"
        print(line)
    return EXIT_OK


def _registry(args: Any) -> int:
    from ketch.extensions.registry import Registry, RegistryError

    config = _config()
    from ketch.config.settings import find_project_root, user_config_dir

    registry = Registry(config.registry_url, user_config_dir(), find_project_root(_cwd()))
    try:
        if args.action == "list":
            for entry in asyncio.run(registry.fetch_index()):
                print(f"{entry.kind:<7} {entry.name:<24} {entry.description}")
            return EXIT_OK
        if args.action == "remove":
            registry.remove(_need_name(args))
            print(f"Removed {args.name}.")
            return EXIT_OK
        name = _need_name(args)
        if getattr(args, "git", None):  # a pinned commit of a git repository, checked after fetching
            staged = registry.stage_git(args.kind, name, args.git, args.commit, args.git_path, allow_local=True, sha256=args.sha256)
            pin = staged.pinned
            print(f"{name}: {pin.path} at commit {pin.commit} of {pin.url} (sha256 {pin.sha256})")
            if staged.previous:
                print(f"This UPDATES {name}: installed from commit {staged.previous}, this is commit {pin.commit}.")
        else:
            entries = {e.name: e for e in asyncio.run(registry.fetch_index())}
            if name not in entries:
                raise ConfigError(f"the registry has no entry '{name}'; see 'ketch registry list'")
            staged = registry.stage(entries[name])
            _show_index_item(registry, staged, getattr(args, "sha256", None))
        print(staged.text)
        if args.action == "show":
            return EXIT_OK
        confirmed = args.yes
        if not confirmed and sys.stdin.isatty():
            confirmed = input(f"Install {name}? It becomes part of every future prompt. [y/N] ").strip().lower() == "y"
        if not confirmed:
            print("Not installed.")
            return EXIT_OK
        registry.install(staged, confirmed=True)
        print(f"Installed {name}.")
        return EXIT_OK
    except RegistryError as exc:
        print(f"ketch: {exc}", file=sys.stderr)
        return EXIT_PROVIDER


def _show_index_item(registry: Any, staged: Any, expected: str | None) -> None:
    """The digest of what would be written, checked against ``--sha256``; an item already
    installed is named as an update with both digests (nothing replaces an item silently)."""
    from ketch.extensions.registry import RegistryError, content_digest

    entry = staged.entry
    digest = content_digest(entry)
    if expected is not None and expected != digest:
        raise RegistryError(f"{entry.name} in the index has sha256 {digest}, not the pinned {expected}: not installed")
    print(f"{entry.name}: {entry.kind} from {registry.index_url} (sha256 {digest})")
    if staged.replaces:
        old = registry.installed_record(entry.kind, entry.name, staged.scope).get("sha256") or "(not recorded)"
        if old != digest:
            print(f"This UPDATES {entry.name}: installed sha256 {old}, this is sha256 {digest}.")


def _need_name(args: Any) -> str:
    if not args.name:
        raise ConfigError(f"'ketch registry {args.action}' needs a NAME")
    return str(args.name)


def _sandbox(args: Any) -> int:
    """``ketch sandbox check``: the mechanism that confines commands here, why, and the policy."""
    from ketch.config.settings import find_project_root
    from ketch.sandbox.wiring import session_sandbox

    config = _config()
    root = find_project_root(_cwd())
    added = [Path(d).expanduser() for d in config.added_dirs]
    sandbox, notices = session_sandbox(config, root, added, flag_mode=getattr(args, "sandbox", None))
    for line in sandbox.describe():
        print(line)
    for notice in notices:
        print(f"note: {notice}")
    return EXIT_OK if sandbox.confines or not sandbox.policy.confined else EXIT_PROVIDER

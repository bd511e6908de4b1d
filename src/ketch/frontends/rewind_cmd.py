"""``ketch rewind SESSION``: list a session's prompts, or put its files, its conversation or
both back to before one of them, without the UI.

Without ``--to`` it lists the prompts with the files each changed. With ``--to N`` it shows
what it would restore (the diff) and asks, unless ``--yes``; files that changed since ketch
last looked are left alone unless ``--include-changed``. ``--output-format json`` reports
what was done as one object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ketch.protocol.exceptions import ConfigError


def add_parser(sub: Any) -> None:
    r = sub.add_parser("rewind", help="put a session's files or conversation back to before a prompt")
    r.add_argument("session", help="the session ID (a unique prefix will do)")
    r.add_argument("--to", type=int, metavar="N", help="the prompt to go back to before (1 is the first)")
    r.add_argument("--step", type=int, metavar="S", help="only back to before step S of that prompt's turn (files only)")
    what = r.add_mutually_exclusive_group()
    what.add_argument("--code", dest="what", action="store_const", const="code", help="restore the files only")
    what.add_argument("--chat", dest="what", action="store_const", const="chat", help="restore the conversation only")
    what.add_argument("--both", dest="what", action="store_const", const="both", help="restore both (the default)")
    r.add_argument("--undo", action="store_true", help="undo the newest rewind of the session's files")
    r.add_argument("--yes", action="store_true", help="do it without asking (after printing the diff)")
    r.add_argument("--include-changed", action="store_true", help="also restore files changed since ketch last saw them")
    r.add_argument("--output-format", choices=("text", "json"), default="text")


def add_checkpoints_parser(sub: Any) -> None:
    c = sub.add_parser("checkpoints", help="list or prune the workspaces' checkpoints")
    c.add_argument("action", choices=("list", "prune"))
    c.add_argument("--days", type=float, default=30.0, metavar="N", help="prune: also drop checkpoints older than N days (default 30)")


def run_checkpoints(args: Any) -> int:
    from ketch.checkpoints.cleanup import list_workspaces, prune
    from ketch.config.settings import user_data_dir
    from ketch.state.store import Store

    data = user_data_dir()
    if args.action == "list":
        rows = list_workspaces(data)
        for row in rows:
            print(f"{row.root}  {row.count} checkpoints  {row.size_bytes / 1024**2:.1f} MiB")
        if not rows:
            print("No checkpoints yet.")
        return 0
    store = Store.open_existing()
    live: set[str] = set()
    if store is not None:
        try:
            live = {row.id for row in store.list_sessions(None, limit=None)}
        finally:
            store.close()
    report = prune(data, live, older_than_days=args.days)
    for root, count in report:
        print(f"{root}: {count} checkpoints removed")
    if not report:
        print("Nothing to prune.")
    return 0


def _open(session: str) -> tuple[Any, Any, Path]:
    from ketch.config.settings import find_project_root
    from ketch.state.store import Store

    from ketch.state.store import StoreError

    existing = Store.open_existing()
    if existing is None:
        raise ConfigError(f"no session '{session}'; list them with 'ketch sessions'")
    existing.close()
    try:
        store = Store.open()
    except StoreError as exc:
        raise ConfigError(str(exc)) from None
    row = store.get_session(session)
    if row is None:
        store.close()
        raise ConfigError(f"no session '{session}'; list them with 'ketch sessions'")
    return store, row, find_project_root(Path(row.cwd))


def run_rewind(args: Any) -> int:
    from ketch.checkpoints.rewind import Checkpointer, RewindError, ShadowError, list_prompts
    from ketch.config.settings import user_data_dir

    store, row, root = _open(args.session)
    cp = Checkpointer(root, user_data_dir())
    try:
        messages = store.load_messages(row.id)
        if args.to is None and not args.undo:
            return _list(args, row, list_prompts(cp, row.id, messages))
        try:
            return _rewind(args, store, row, root, cp, messages)
        except (RewindError, ShadowError) as exc:
            raise ConfigError(str(exc)) from None
    finally:
        cp.close()
        store.close()


def _list(args: Any, row: Any, prompts: list[Any]) -> int:
    if args.output_format == "json":
        print(json.dumps({"session_id": row.id, "prompts": [
            {"n": p.turn, "prompt": p.prompt, "conversation": p.in_history,
             "files": {f: {"added": a, "removed": r} for f, (a, r) in sorted(p.files.items())}} for p in prompts
        ]}, allow_nan=False))
        return 0
    if not prompts:
        print(f"Session {row.id} has no checkpoints (started before checkpoints, or with checkpoints = false).")
        return 0
    for p in prompts:
        first = " ".join(p.prompt.split())[:70]
        print(f"{p.turn:>3}. {first}{'' if p.in_history else '  (conversation summarized: files only)'}")
        for f, (a, r) in sorted(p.files.items()):
            print(f"       {f}  +{a} -{r}")
    print(f"Rewind with 'ketch rewind {row.id} --to N [--code|--chat|--both]'.")
    return 0


def _rewind(args: Any, store: Any, row: Any, root: Path, cp: Any, messages: list[Any]) -> int:
    from ketch.checkpoints.rewind import apply_code, cut_conversation, plan_code, plan_code_to, undo_target
    from ketch.tools.workspace import Workspace

    what = "code" if args.undo else (args.what or "both")
    report: dict[str, Any] = {"session_id": row.id, "to": args.to, "restored": [], "deleted": [], "left": [],
                              "unrestorable": [], "conversation": None}
    plan = None
    if what in ("code", "both"):
        if args.undo:
            plan = plan_code_to(cp, row.id, undo_target(cp, row.id))
        else:
            plan = plan_code(cp, row.id, args.to, step=args.step)
        if args.output_format == "text":
            if plan.diff:
                sys.stdout.write(plan.diff if plan.diff.endswith("\n") else plan.diff + "\n")
            else:
                print("The files are already as they were before that prompt.")
            if plan.outside and not args.include_changed:
                print("Changed since ketch last saw them, left alone (--include-changed restores them too): " + ", ".join(plan.outside))
    if not args.yes:
        if not sys.stdin.isatty():
            raise ConfigError("rewind changes files and the conversation; add --yes to do it without asking")
        where = "the newest rewind" if args.undo else f"before prompt {args.to}"
        answer = input(f"Rewind {'files and conversation' if what == 'both' else 'files' if what == 'code' else 'conversation'} to {where}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("Nothing was changed.")
            return 0
    if plan is not None:
        report.update(apply_code(cp, plan, Workspace(root), include_outside=args.include_changed))
        report["undo_checkpoint"] = plan.now.id
    if what in ("chat", "both"):
        kept, prompt = cut_conversation(cp, row.id, messages, args.to)
        store.replace_history(row.id, kept)
        store.set_pending(row.id, None)
        report["conversation"] = {"messages_kept": len(kept), "prompt": prompt}
    if args.output_format == "json":
        print(json.dumps(report, allow_nan=False))
    else:
        parts = [f"{len(report[k])} {k}" for k in ("restored", "deleted", "left", "unrestorable") if report[k]]
        if parts:
            print("Files: " + ", ".join(parts) + ".")
        if report["conversation"] is not None:
            print(f"Conversation: back to before prompt {args.to} ({report['conversation']['messages_kept']} messages kept); "
                  f"continue with 'ketch --resume {row.id}'.")
    return 0

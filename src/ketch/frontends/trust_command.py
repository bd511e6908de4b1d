"""``ketch trust list | add [PATH] | remove [PATH]``: the folders whose repository config applies.

``add`` shows what the folder's ``.ketch/config.toml`` would add and stores the answer with the
digest of exactly that; a later change to it is not trusted until added again.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from ketch.protocol.exceptions import ConfigError

EXIT_OK, EXIT_USAGE = 0, 2


def run_trust(args: Any) -> int:
    from ketch.config import trust

    if args.action == "list":
        return _list(trust)
    folder = _folder(args.path)
    if args.action == "remove":
        if not trust.forget(folder):
            print(f"ketch: {folder} is not in the trust list (see 'ketch trust list')", file=sys.stderr)
            return EXIT_USAGE
        print(f"Removed {folder}: its repository config no longer widens anything.")
        return EXIT_OK
    from ketch.config.settings import project_split

    split = project_split(folder)
    if split is None or not split.widens:
        print(f"{folder}: its repository config adds nothing that needs trust.")
    else:
        print(f"Trusting {folder}. Its {split.path.relative_to(folder)} adds:")
        for item in split.additions:
            print(f"  {'! ' if item.marked else '- '}{item.text}")
    digest = split.digest if split is not None else trust.widening_digest_of_nothing()
    trust.remember(folder, True, digest)
    print("Stored. A change to what it adds is asked about again.")
    return EXIT_OK


def _folder(path: str | None) -> Path:
    from ketch.config.settings import find_project_root

    target = Path(path).expanduser() if path else Path.cwd()
    if not target.is_dir():
        raise ConfigError(f"{target} is not a directory; give a project folder, or none for this one")
    return find_project_root(target.resolve())


def _list(trust: Any) -> int:
    from ketch.config.settings import project_split

    rows = trust.records()
    if not rows:
        print("No folders trusted or declined yet ('ketch trust add [PATH]' trusts one).")
        return EXIT_OK
    for record in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.at)) if record.at else "-"
        state = "trusted " if record.trusted else "declined"
        folder = Path(record.folder)
        note = ""
        if not folder.is_dir():
            note = "  (folder is gone)"
        else:
            try:
                split = project_split(folder)
            except ConfigError:
                split, note = None, "  (its config cannot be read)"
            current = split.digest if split is not None else trust.widening_digest_of_nothing()
            if not note and current != record.digest:
                note = "  (its config changed since; asked again)"
        print(f"{state}  {when}  {record.folder}{note}")
    return EXIT_OK

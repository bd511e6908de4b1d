"""Each MCP server a repository's config names is approved on its own, for its exact launch.

Trusting a folder does not start its MCP servers (neither does ``--trust``): every server the
project's ``.ketch/config.toml`` adds or changes is shown with what it will run (the program,
each argument, each env entry, the working directory and whether it gets the network; or the
URL and header names) and approved or declined by itself. The answer is stored in
``mcp_approvals.json`` in the user's data dir, per project folder and server name, with a
digest of the whole launch spec. A server whose spec differs in anything from the approved
one is asked about again (interactive, ``ketch mcp approve NAME``) and is not started until
then; a declined or unanswered server is never spawned. Servers from the user's own config
(or an editor's ``session/new``) are the user's and are not asked about.
"""

from __future__ import annotations

import hashlib
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ketch.protocol import strict_json
from ketch.config.folder_records import read_folders, write_folders

APPROVALS_FILE = "mcp_approvals.json"
_VERSION = 1
_NOT_LAUNCH = frozenset({"timeout"})
"""Spec keys that change nothing about what runs or where it connects."""

State = Literal["approved", "declined", "unknown", "changed"]


@dataclass(frozen=True)
class ServerApproval:
    """One project server as this run treats it."""

    folder: Path
    name: str
    spec: Any
    """The effective spec that would run (the user's entry of that name with the project's over it)."""
    state: State

    @property
    def runs(self) -> bool:
        return self.state == "approved"

    @property
    def digest(self) -> str:
        return launch_digest(self.spec)

    def lines(self) -> list[str]:
        return launch_lines(self.spec)

    def refusal(self) -> str:
        """Why the server was not started, and how to start it (one line)."""
        why = {
            "declined": "you declined it",
            "changed": "its command changed since you approved it",
            "unknown": "it comes from this folder's config and was not approved",
        }.get(self.state, "")
        return (
            f"not started: {why} ({'; '.join(self.lines())}); "
            f"'ketch mcp approve {self.name}' shows it and asks"
        )


def launch_spec(spec: Any) -> Any:
    """What of ``spec`` decides what runs: everything but the start timeout."""
    if not isinstance(spec, Mapping):
        return spec
    return {k: v for k, v in spec.items() if k not in _NOT_LAUNCH}


def launch_digest(spec: Any) -> str:
    text = strict_json.dumps(launch_spec(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _visible(text: str) -> str:
    """``text`` with control characters escaped, so what is shown is what runs."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def launch_lines(spec: Any) -> list[str]:
    """The exact launch, a line per part: program and arguments, env, cwd, network; or the URL."""
    from ketch.config.keyring import SECRET_NAME

    if not isinstance(spec, Mapping):
        return [f"malformed entry: {_visible(repr(spec))}"]
    if spec.get("url"):
        out = [f"connects to {_visible(str(spec['url']))}"]
        headers = spec.get("headers") or {}
        if headers:
            out.append("with headers " + ", ".join(_visible(str(h)) for h in sorted(map(str, headers))))
        return out
    argv = [str(spec.get("command", "")), *(str(a) for a in (spec.get("args") or []))]
    out = [f"runs {_visible(shlex.join(argv))}"]
    env = spec.get("env") or {}
    if isinstance(env, Mapping) and env:
        shown = [
            f"{_visible(str(k))}=" + ("<hidden>" if SECRET_NAME.search(str(k)) else _visible(shlex.quote(str(v))))
            for k, v in sorted(env.items(), key=lambda kv: str(kv[0]))
        ]
        out.append("with env " + " ".join(shown))
    if spec.get("cwd"):
        out.append(f"in {_visible(str(spec['cwd']))}")
    if spec.get("network") is False:
        out.append("without the network")
    extra = sorted(set(map(str, spec)) - {"command", "args", "env", "cwd", "network", "timeout"})
    if extra:
        out.append("also sets " + ", ".join(f"{k} = {_visible(repr(spec[k]))}" for k in extra))
    return out


def approvals_path() -> Path:
    from ketch.config.dirs import user_data_dir

    return user_data_dir() / APPROVALS_FILE


def _read() -> dict[str, Any]:
    return read_folders(approvals_path())  # an unreadable file approves nothing


def _write(folders: dict[str, Any]) -> None:
    write_folders(approvals_path(), folders, _VERSION)


def remember(approval: ServerApproval, approved: bool) -> None:
    """Store the answer for exactly the spec that was shown (``approval.spec``)."""
    folders = _read()
    servers = folders.setdefault(str(approval.folder), {})
    if not isinstance(servers, dict):
        servers = folders[str(approval.folder)] = {}
    servers[approval.name] = {"approved": approved, "digest": approval.digest, "at": round(time.time(), 3)}
    _write(folders)


def _state(folder: Path, name: str, spec: Any) -> State:
    entry = (_read().get(str(folder)) or {}).get(name)
    if not isinstance(entry, dict) or not isinstance(entry.get("digest"), str):
        return "unknown"
    if entry["digest"] != launch_digest(spec):
        return "changed"
    return "approved" if entry.get("approved") is True else "declined"


def project_servers(config: Any) -> list[ServerApproval]:
    """Every server of ``config`` that the project's config added or changed, with its standing."""
    standing = getattr(config, "project_trust", None)
    split = getattr(standing, "split", None)
    if standing is None or split is None or not standing.applied:
        return []
    named = ((split.widening.get("mcp") or {}).get("servers")) or {}
    servers = (config.mcp or {}).get("servers") or {}
    return [
        ServerApproval(standing.folder, str(name), servers[name], _state(standing.folder, str(name), servers[name]))
        for name in named
        if name in servers
    ]


def approved_mcp(config: Any) -> tuple[dict[str, Any], list[ServerApproval]]:
    """``config.mcp`` without the project servers that are not approved for their exact spec,
    and those left out."""
    held = [a for a in project_servers(config) if not a.runs]
    mcp = dict(config.mcp or {})
    if held:
        mcp["servers"] = {k: v for k, v in (mcp.get("servers") or {}).items() if k not in {a.name for a in held}}
    return mcp, held

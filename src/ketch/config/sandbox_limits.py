"""A repository's configuration may narrow the sandbox and the approval mode, never widen them.

``limit_project_layer`` takes the project's ``.ketch/config.toml`` data and the user's own
config (flags are applied after it, so they override either way) and drops what would widen:
a mode above the user's, the network, writable paths, tool caches, the mechanism choice, and
an approval mode other than ``ask``. Each dropped key becomes one notice. This holds in a
trusted folder too: where commands may write is the user's decision alone.
"""

from __future__ import annotations

from typing import Any

MODE_RANK = {"read-only": 0, "workspace-write": 1, "full-access": 2, "off": 2}
DEFAULT_MODE = "workspace-write"


def limit_project_layer(project: dict[str, Any], others: dict[str, Any], source: str, notes: list[str] | None = None) -> dict[str, Any]:
    """The project layer without widening sandbox/approval keys; a notice naming the dropped
    keys is appended to ``notes``."""
    notices: list[str] = []
    out = dict(project)
    their = out.get("sandbox")
    if isinstance(their, dict):
        ours = others.get("sandbox") if isinstance(others.get("sandbox"), dict) else {}
        kept = dict(their)
        mode = kept.get("mode")
        if mode is not None and MODE_RANK.get(str(mode), 9) > MODE_RANK.get(str(ours.get("mode", DEFAULT_MODE)), 1):
            del kept["mode"]
            notices.append(f"sandbox.mode = {mode!r}")
        if kept.get("network") is True and ours.get("network") is not True:
            del kept["network"]
            notices.append("sandbox.network = true")
        for key in ("writable", "caches", "mechanism"):
            if key in kept:
                notices.append(f"sandbox.{key} = {kept.pop(key)!r}")
        out["sandbox"] = kept
    approval = out.get("approval")
    if approval is not None and approval != "ask":
        del out["approval"]
        notices.append(f"approval = {approval!r}")
    if notices and notes is not None:
        notes.append(f"{source}: ignored {', '.join(notices)}: a repository's config can narrow the sandbox and approvals, never widen them")
    return out

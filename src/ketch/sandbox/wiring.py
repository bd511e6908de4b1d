"""From configuration and flags to a session's ``Sandbox``, and the notices it starts with.

``--yolo`` means full access unless ``--sandbox`` is given too (then the explicit mode holds).
``off`` is read as ``full-access``. The mechanism is detected once per process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ketch.sandbox.detect import Mechanism, detect
from ketch.sandbox.policy import build_policy
from ketch.sandbox.runtime import Sandbox


def effective_mode(config_mode: str, *, yolo: bool, flag_mode: str | None) -> str:
    mode = flag_mode or ("full-access" if yolo else config_mode)
    return "full-access" if mode == "off" else mode


def detect_ahead(config: Any, *, yolo: bool = False, flag_mode: str | None = None) -> Callable[[], None]:
    """Start detecting the mechanism ``session_sandbox`` will ask for, in a thread; returns the
    wait for it. Detection runs bwrap as child processes (tens of ms spent waiting on them),
    which overlap the imports a session start is busy with; the result is cached per process."""
    if effective_mode(config.sandbox.mode, yolo=yolo, flag_mode=flag_mode) == "full-access":
        return lambda: None
    import threading

    probing = threading.Thread(target=detect, args=(config.sandbox.mechanism,), name="ketch-sandbox-detect", daemon=True)
    probing.start()
    return probing.join


def session_sandbox(
    config: Any,
    workspace_root: Path,
    added_dirs: Sequence[Path],
    *,
    yolo: bool = False,
    flag_mode: str | None = None,
    detector: Callable[[str], Mechanism] = detect,
) -> tuple[Sandbox, list[str]]:
    """The session's sandbox and the start-up notices (the fail-closed one among them)."""
    cfg = config.sandbox
    mode = effective_mode(cfg.mode, yolo=yolo, flag_mode=flag_mode)
    try:
        policy = build_policy(
            mode,  # type: ignore[arg-type]
            workspace_root,
            added_dirs=added_dirs,
            writable=cfg.writable,
            caches=cfg.caches,
            network=cfg.network,
            scan_nested=False,  # the sandbox scans on first use
        )
    except ValueError as exc:
        from ketch.protocol.exceptions import ConfigError

        raise ConfigError(f"sandbox: {exc}") from None
    mechanism = detector(cfg.mechanism) if policy.confined else Mechanism("none", "full access: nothing confines commands")
    sandbox = Sandbox(policy, mechanism, approval=config.approval)
    notices = list(getattr(cfg, "_ignored", []) or [])
    notices.extend(policy.notes)
    if config.approval != "ask" and not policy.confined:
        notices.append(f"approval = {config.approval} with full access: nothing runs sandboxed, so commands still ask")
    if sandbox.fail_closed:
        notices.append(
            f"no sandbox works here ({mechanism.reason}): every shell command asks first "
            "(headless: denied unless --sandbox full-access or --yolo); hooks and MCP servers run unconfined"
        )
    return sandbox, notices


SESSION_MODES = ("read-only", "workspace-write", "full-access")


def switch_mode(sandbox: Sandbox, mode: str, config: Any, *, detector: Callable[[str], Mechanism] = detect) -> str:
    """Put the session's sandbox in ``mode`` (``/sandbox MODE``, typed by the user, who may
    widen it as the command line could): the policy is built again with the config's writable
    places, caches and network; a mechanism is detected when the session had none. The same
    object serves the gate, the tools and the launch sites, so the next call sees it. Returns
    the line the transcript keeps."""
    mode = "full-access" if mode == "off" else mode
    if mode not in SESSION_MODES:
        raise ValueError(f"unknown sandbox mode {mode!r}; use one of: {', '.join(SESSION_MODES)}")
    cfg = config.sandbox
    workspace = getattr(sandbox, "workspace", None)
    policy = build_policy(
        mode,  # type: ignore[arg-type]
        sandbox.policy.workspace,
        added_dirs=list(getattr(workspace, "extra_dirs", []) or []),
        writable=cfg.writable, caches=cfg.caches, network=cfg.network, scan_nested=False,
    )
    if policy.confined and not sandbox.mechanism.available:
        sandbox.mechanism = detector(cfg.mechanism)
    sandbox.policy = policy
    sandbox._scanned = False
    line = f"sandbox mode: {mode}"
    if mode == "full-access":
        return line + " — commands run unconfined: they may change anything you can"
    if sandbox.fail_closed:
        return line + f" — but no sandbox works here ({sandbox.mechanism.reason}): every command asks"
    return line + " — " + "; ".join(policy.describe()[1:3])

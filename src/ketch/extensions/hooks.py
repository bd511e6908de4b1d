"""User hooks: shell commands the user configured to run on agent events.

Configuration (TOML)::

    [[hooks.before_tool]]
    command = "./scripts/check-tool.sh"
    matcher = "shell|write_file"   # optional regex, matched against the whole tool name
    timeout = 10                   # seconds, optional

Each hook runs as ``bash -c <command>`` in the workspace with the event as JSON on stdin
(``{"event": ..., "cwd": ..., "tool": ..., "args": ...}``). For ``before_tool`` only exit 0
lets the call run: exit 2 refuses it, its stderr being the reason the model sees; a hook that
cannot do its job (its program missing, any other exit code, killed by a signal, past its
timeout, unable to start) fails closed: the call is refused too, and the failure is
reported (``report``: a warning line in the UI and a ``notice`` in stream-json) with the
hook and the reason. ``on_failure = "allow"`` on a hook lets the call run after such a
failure (still reported). A failing hook of the other events is reported the same way. A
hook that runs past its timeout is killed with its whole process tree.

Hooks come only from the user's own configuration or a trusted folder's (``config/trust.py``);
the registry never installs them. A hook's environment has no key ketch holds and no variable
whose name looks like a secret (``tools/child_env.py``).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ketch.protocol import strict_json
from ketch.tools.child_env import ChildEnv, child_environment
from ketch.sandbox.runtime import launch_argv

HOOK_EVENTS = ("before_tool", "after_tool", "prompt_submitted", "turn_stopped")
REFUSE_EXIT_CODE = 2
DEFAULT_TIMEOUT_S = 10.0
_MAX_STDERR = 2000


class HookConfigError(ValueError):
    """The ``[hooks]`` configuration is malformed; the message names the entry."""


@dataclass(frozen=True)
class HookSpec:
    """One configured hook."""

    event: str
    command: str
    matcher: re.Pattern[str] | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    on_failure: str = "block"
    """``block`` (the default): a ``before_tool`` hook that cannot run refuses the call;
    ``allow``: the call runs after the failure is reported."""

    def applies_to(self, tool_name: str | None) -> bool:
        """Whether the hook runs for this tool (hooks without a matcher run for all)."""
        return self.matcher is None or tool_name is None or self.matcher.fullmatch(tool_name) is not None


def parse_hooks(config: Mapping[str, Any] | None) -> list[HookSpec]:
    """Validate the ``hooks`` table: ``{event: [{command, matcher?, timeout?}, ...]}``."""
    specs: list[HookSpec] = []
    for event, entries in (config or {}).items():
        if event not in HOOK_EVENTS:
            raise HookConfigError(f"hooks.{event} is not a hook event: use one of {', '.join(HOOK_EVENTS)}")
        if isinstance(entries, Mapping):
            entries = [entries]
        if not isinstance(entries, Sequence) or isinstance(entries, str):
            raise HookConfigError(f"hooks.{event} must be a list of tables ([[hooks.{event}]])")
        for i, entry in enumerate(entries, 1):
            specs.append(_parse_entry(event, i, entry))
    return specs


def _parse_entry(event: str, index: int, entry: Any) -> HookSpec:
    where = f"hooks.{event} #{index}"
    if not isinstance(entry, Mapping):
        raise HookConfigError(f"{where} must be a table with a 'command'")
    unknown = set(entry) - {"command", "matcher", "timeout", "on_failure"}
    if unknown:
        raise HookConfigError(f"{where} has unknown key(s): {', '.join(sorted(map(str, unknown)))}")
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise HookConfigError(f"{where} needs a non-empty 'command'")
    matcher = None
    if "matcher" in entry and not isinstance(entry["matcher"], str):
        raise HookConfigError(f"{where} matcher must be a string (a regex), not {type(entry['matcher']).__name__}")
    if entry.get("matcher"):
        try:
            matcher = re.compile(entry["matcher"])
        except re.error as exc:
            raise HookConfigError(f"{where} matcher {entry['matcher']!r} is not a valid regex: {exc}") from exc
    timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise HookConfigError(f"{where} timeout must be a positive number of seconds")
    on_failure = entry.get("on_failure", "block")
    if on_failure not in ("block", "allow"):
        raise HookConfigError(f"{where} on_failure must be \"block\" or \"allow\", not {on_failure!r}")
    return HookSpec(event, command, matcher, float(timeout), on_failure)


@dataclass(frozen=True)
class HookOutcome:
    """What one hook run produced."""

    exit_code: int | None
    """None when the hook timed out or could not start."""
    stderr: str
    error: str = ""


def _kill_tree(pid: int) -> None:
    """Kill a process, its process group and every descendant (even those that left the group)."""
    import psutil  # here, not at the top: a session starts without it

    try:
        victims = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        victims = []
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for proc in victims:
        try:
            proc.kill()
        except psutil.Error:
            pass


class HookRunner:
    """Runs the configured hooks for each event and keeps the warnings they raise."""

    def __init__(self, hooks_config: Mapping[str, Any] | Sequence[HookSpec] | None, cwd: Path | str, sandbox: Any = None) -> None:
        if isinstance(hooks_config, Sequence) and not isinstance(hooks_config, str):
            self.hooks = list(hooks_config)
        else:
            self.hooks = parse_hooks(hooks_config)
        self.cwd = Path(cwd)
        self.sandbox = sandbox
        """A ``ketch.sandbox.runtime.Sandbox``: hooks run under the session's sandbox policy."""
        self.warnings: list[str] = []
        """Every failure reported so far (also handed to ``report``)."""
        self.report: Callable[[str], None] | None = None
        """Where a failure goes as it happens (the session: a warning notice in the UI and stream-json)."""
        self.child_env: ChildEnv | None = None
        """What hooks' environment leaves out (None: every variable whose name looks like a secret)."""

    def _for(self, event: str, tool_name: str | None = None) -> list[HookSpec]:
        return [h for h in self.hooks if h.event == event and h.applies_to(tool_name)]

    async def before_tool(self, name: str, args: Mapping[str, Any]) -> str | None:
        """Run ``before_tool`` hooks; the reason of the first refusal, else None.

        Exit 2 refuses with the hook's stderr; a hook that failed (see the module) refuses with
        what went wrong, unless it says ``on_failure = "allow"``."""
        payload = {"event": "before_tool", "tool": name, "args": dict(args)}
        for hook in self._for("before_tool", name):
            outcome = await self._run(hook, payload)
            if outcome.exit_code == REFUSE_EXIT_CODE:
                return outcome.stderr or f"refused by hook: {hook.command}"
            failure = self._failure(hook, outcome)
            if failure is None:
                continue
            if hook.on_failure == "block":
                self._report(f"{failure}; the {name} call was blocked")
                return f"{failure}, so the call was blocked (a hook that cannot run refuses what it guards)"
            self._report(f"{failure}; the {name} call ran anyway (on_failure = \"allow\")")
        return None

    async def after_tool(self, name: str, args: Mapping[str, Any], result_summary: str, is_error: bool) -> None:
        """Run ``after_tool`` hooks (their exit codes only produce warnings)."""
        payload = {"event": "after_tool", "tool": name, "args": dict(args), "result": result_summary, "is_error": is_error}
        await self._run_all("after_tool", payload, name)

    async def prompt_submitted(self, text: str) -> None:
        """Run ``prompt_submitted`` hooks with the prompt text."""
        await self._run_all("prompt_submitted", {"event": "prompt_submitted", "prompt": text})

    async def turn_stopped(self, reason: str) -> None:
        """Run ``turn_stopped`` hooks with why the turn ended."""
        await self._run_all("turn_stopped", {"event": "turn_stopped", "reason": reason})

    async def _run_all(self, event: str, payload: dict[str, Any], tool_name: str | None = None) -> None:
        for hook in self._for(event, tool_name):
            self._warn_if_failed(hook, await self._run(hook, payload))

    def _warn_if_failed(self, hook: HookSpec, outcome: HookOutcome) -> None:
        failure = self._failure(hook, outcome)
        if failure is not None:
            self._report(failure)

    @staticmethod
    def _failure(hook: HookSpec, outcome: HookOutcome) -> str | None:
        """What went wrong, naming the hook (None when it exited 0)."""
        name = f"the {hook.event} hook `{hook.command}`"
        if outcome.error:
            return f"{name} {outcome.error}"
        code = outcome.exit_code
        if not code:
            return None
        detail = outcome.stderr.splitlines()[-1] if outcome.stderr else "no output on stderr"
        if code < 0:
            return f"{name} was killed by signal {-code}: {detail}"
        if code == 127:
            return f"{name} could not run (exit 127, command not found): {detail}"
        if code == 126:
            return f"{name} could not run (exit 126, not executable): {detail}"
        if 128 < code < 128 + 65:  # the sandbox's launcher reports a killed child as 128 + signal
            return f"{name} failed (exit {code}, as when killed by signal {code - 128}): {detail}"
        return f"{name} failed (exit {code}): {detail}"

    def _report(self, text: str) -> None:
        self.warnings.append(text)
        if self.report is not None:
            self.report(text)

    async def _run(self, hook: HookSpec, payload: dict[str, Any]) -> HookOutcome:
        data = strict_json.dumps({**payload, "cwd": str(self.cwd)}, default=str).encode()
        env = {**child_environment(self.child_env), "KETCH_HOOK_EVENT": hook.event}
        if "tool" in payload:
            env["KETCH_TOOL_NAME"] = payload["tool"]
        # stderr goes to a file, not a pipe: a daemon a hook leaves behind cannot hold it open
        with tempfile.TemporaryFile() as stderr_file:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *launch_argv(self.sandbox, ["bash", "-c", hook.command], self.cwd),
                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=stderr_file,
                    cwd=self.cwd, env=env, start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                return HookOutcome(None, "", f"could not start: {exc}")
            try:
                await asyncio.wait_for(proc.communicate(data), hook.timeout_s)
            except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
                _kill_tree(proc.pid)
                await proc.wait()
                if isinstance(exc, asyncio.CancelledError):
                    raise
                return HookOutcome(None, "", f"timed out after {hook.timeout_s:g}s and was killed")
            stderr_file.seek(0)
            text = stderr_file.read(_MAX_STDERR * 4).decode("utf-8", "replace").strip()[:_MAX_STDERR]
        return HookOutcome(proc.returncode, text)

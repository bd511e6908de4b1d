"""The approval gate: one function decides every tool call.

Order: guard rules (plugins and config refusals; nothing bypasses them) → user hooks
that refuse (exit 2) → the sandbox's write policy (read-only mode: file writes refused) →
deny rules (in every mode, ``--yolo`` included) → ``--yolo`` → the other permission rules (with no sandbox mechanism, every shell
command asks; then ask rules, writes to run-later paths, the user's "allow for this
session" answers, allow rules) → the approval mode (``auto``/``never``: a shell command
that runs sandboxed, and a file write the sandbox's policy allows, need no prompt) →
defaults (reading tools allowed; writing, shell, network and MCP tools ask). Under
``never`` whatever would still ask is denied; under ``plan`` (first of all) every tool that
is not a reading one is denied. Under ``ask`` a sandboxed command asks too: ``ask`` means
the user sees each command; ``auto`` is the mode where the sandbox is the boundary. The session turns a decision into the SDK's
deferred approval, so a denied call never reaches the tool's function. Writes to run-later
paths ask whether or not a sandbox runs (judged on the written and the resolved path), and
when an allow rule for the shell could not vouch for a command (it writes on the side, or
cannot be parsed), the ask carries why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from ketch.protocol.events import DecidedBy

Action = Literal["allow", "deny", "ask"]

HEADLESS_DENIAL = (
    "This call needs the user's approval, and headless mode never asks. "
    "Re-run with --yolo, or add a permission rule that allows it."
)


@dataclass(frozen=True)
class GateDecision:
    action: Action
    by: DecidedBy
    reason: str = ""
    rule: str = ""


class GuardLike(Protocol):
    def check(self, tool_name: str, args: dict[str, Any]) -> Any: ...


class RulesLike(Protocol):
    def decide(self, tool_name: str, args: dict[str, Any], key_arg: str) -> Any: ...


class HooksLike(Protocol):
    async def before_tool(self, name: str, args: dict[str, Any]) -> str | None: ...


class SandboxLike(Protocol):
    """What the gate needs of ``ketch.sandbox.runtime.Sandbox``."""

    @property
    def confines(self) -> bool: ...
    @property
    def fail_closed(self) -> bool: ...
    def write_verdict(self, path: str) -> str: ...


ApprovalMode = Literal["ask", "auto", "plan", "never"]
APPROVAL_MODES: tuple[str, ...] = ("ask", "auto", "plan", "never")
CYCLE = ("ask", "auto", "plan")
"""What Shift-Tab steps through."""
_MODE_TEXT = {
    "ask": "ask — every command and file change asks, sandboxed or not, unless a rule allows it",
    "auto": "auto — commands that run sandboxed, and file changes the sandbox allows, run without asking",
    "plan": "plan — ketch only reads and proposes: writes, commands and other changing calls are refused",
    "never": "never — nothing asks: sandboxed commands and allowed writes run, whatever would ask is denied",
}
PLAN_DENIAL = ("Plan mode is on: this call would change something, so it is refused. Read what you need, "
               "then present the plan; the user leaves plan mode (Shift-Tab) when it should be carried out.")


def describe_mode(mode: str) -> str:
    """One line saying what an approval mode does."""
    return _MODE_TEXT.get(mode, mode)
FILE_WRITE_TOOLS = frozenset({"write_file", "edit_file"})
NO_SANDBOX_HEADLESS = (
    "No sandbox mechanism works here, so every shell command needs the user's approval, and headless "
    "mode never asks. Re-run with --sandbox full-access (commands then run unconfined) or --yolo."
)
NEVER_DENIAL = "approval = never: this call would need the user's approval, so it is denied."


_DEFAULT_ALLOWED_KINDS = frozenset({"read", "meta", "interactive"})
"""Kinds that run without asking: reading, bookkeeping, and ``ask`` (which is itself a
question to the user)."""


class ApprovalGate:
    """Decides allow / deny / ask for one tool call. Holds no UI."""

    def __init__(
        self,
        *,
        kinds: Mapping[str, str],
        key_args: Mapping[str, str],
        guard: GuardLike | None = None,
        rules: RulesLike | None = None,
        hooks: HooksLike | None = None,
        yolo: bool = False,
        approval: ApprovalMode = "ask",
        sandbox: SandboxLike | None = None,
        interactive: bool = True,
        root: Path | None = None,
    ) -> None:
        self.kinds = kinds
        self.key_args = key_args
        self.guard = guard
        self.rules = rules
        self.hooks = hooks
        self.yolo = yolo
        self.approval = approval
        self.sandbox = sandbox
        self.interactive = interactive
        self.root = root if root is not None else getattr(rules, "root", None)
        """The workspace root, against which run-later paths are judged."""
        self.session_allowed: set[tuple[str, str | None]] = set()
        """"Allow for this session" answers: (tool, exact shell command or None for the whole tool)."""

    def allow_for_session(self, tool_name: str, args: dict[str, Any]) -> None:
        """Remember an "allow for this session" answer for calls like this one."""
        self.session_allowed.add(session_key(tool_name, args, self.key_args.get(tool_name, "")))

    def _session_allowance(self, tool_name: str, args: dict[str, Any]) -> str:
        key = session_key(tool_name, args, self.key_args.get(tool_name, ""))
        if key not in self.session_allowed:
            return ""
        return f"allowed for this session: {tool_name}({key[1]})" if key[1] is not None else f"allowed for this session: {tool_name}"

    async def evaluate(self, tool_name: str, args: dict[str, Any]) -> GateDecision:
        decision = await self._evaluate(tool_name, args)
        if decision.action == "ask" and self.approval == "never" and not self.yolo:
            return GateDecision("deny", decision.by, f"{NEVER_DENIAL} {decision.reason}".strip(), decision.rule)
        return decision

    async def _evaluate(self, tool_name: str, args: dict[str, Any]) -> GateDecision:
        if self.approval == "plan" and self.kinds.get(tool_name, "mcp") not in _DEFAULT_ALLOWED_KINDS:
            return GateDecision("deny", "default", PLAN_DENIAL, "approval = plan")
        if self.guard is not None:
            refusal = self.guard.check(tool_name, args)
            if refusal is not None:
                reason = getattr(refusal, "reason", str(refusal))
                source = getattr(refusal, "source", "guard")
                return GateDecision("deny", "guard", f"Refused by {source}: {reason}", source)
        if self.hooks is not None:
            hook_reason = await self.hooks.before_tool(tool_name, args)
            if hook_reason is not None:
                return GateDecision("deny", "hook", f"Refused by a before-tool hook: {hook_reason}", "hook")
        write = self._file_write_verdict(tool_name, args)
        if write == "read_only":
            return GateDecision("deny", "sandbox", "The sandbox is read-only (--sandbox read-only): ketch changes no files.", "sandbox.mode = read-only")
        matched = self.rules.decide(tool_name, args, self.key_args.get(tool_name, "")) if self.rules is not None else None
        if matched is not None and matched[0] == "deny":  # a deny rule holds in every mode, --yolo too
            described = describe_rule(matched[1])
            return GateDecision("deny", "rule", f"Denied by permission rule {described}", described)
        if self.yolo:
            return GateDecision("allow", "yolo", rule="--yolo")
        unconfined = self._unconfined_shell(tool_name, args)
        if unconfined is not None:
            return unconfined
        if matched is not None and matched[0] != "allow":
            return GateDecision("ask", "rule", rule=describe_rule(matched[1]))
        run_later = self._run_later(tool_name, args)
        if run_later:
            return GateDecision("ask", "rule", run_later, "run-later path")
        if write == "run_later":
            return GateDecision("ask", "sandbox", "The path makes the repository run code later (.git, .ketch, workflows, ...).", "run-later path")
        allowance = self._session_allowance(tool_name, args)
        if allowance:
            return GateDecision("allow", "rule", rule=allowance)
        if matched is not None:
            return GateDecision("allow", "rule", rule=describe_rule(matched[1]))
        by_mode = self._approval_mode_step(tool_name, write)
        if by_mode is not None:
            return by_mode
        if self.kinds.get(tool_name, "mcp") in _DEFAULT_ALLOWED_KINDS:
            return GateDecision("allow", "default", rule="reading tools are allowed")
        note = self._shell_note(tool_name, args)
        return GateDecision("ask", "default", note)

    def _run_later(self, tool_name: str, args: dict[str, Any]) -> str:
        if self.kinds.get(tool_name) != "write":
            return ""
        from ketch.gate.rules import run_later_path

        values = args.get(self.key_args.get(tool_name, "") or "path")
        for value in values if isinstance(values, (list, tuple)) else [values]:
            if isinstance(value, str) and (hit := run_later_path(value, self.root)):
                return (
                    f"{hit} is a place that makes the repository run code later (git hooks and config, "
                    "ketch's config, CI, editor tasks ...); writes there always ask, whatever rule allows them"
                )
        return ""

    def _shell_note(self, tool_name: str, args: dict[str, Any]) -> str:
        note = getattr(self.rules, "shell_note", None)
        key = self.key_args.get(tool_name, "")
        if note is None or key != "command" or not isinstance(args.get(key), str):
            return ""
        return str(note(args[key]))

    # ------------------------------------------------------------ the sandbox's part
    def _file_write_verdict(self, tool_name: str, args: dict[str, Any]) -> str:
        """The sandbox's write policy for a file tool's target ('' for other tools)."""
        if self.sandbox is None or tool_name not in FILE_WRITE_TOOLS:
            return ""
        try:
            return self.sandbox.write_verdict(str(args.get("path", "")))
        except (OSError, ValueError):
            return ""

    def _unconfined_shell(self, tool_name: str, args: dict[str, Any]) -> GateDecision | None:
        """Fail closed: the policy wants a sandbox and none works, so every shell command asks,
        allow rules or not (the user's own "allow for this session" answer still holds)."""
        if tool_name != "shell" or self.sandbox is None or not self.sandbox.fail_closed:
            return None
        if self._session_allowance(tool_name, args):
            return None
        if not self.interactive:
            return GateDecision("deny", "sandbox", NO_SANDBOX_HEADLESS, "no sandbox mechanism")
        return GateDecision("ask", "sandbox", "No sandbox mechanism works here: this command would run unconfined.", "no sandbox mechanism")

    def _approval_mode_step(self, tool_name: str, write: str) -> GateDecision | None:
        """``auto`` and ``never``: what the sandbox confines needs no prompt."""
        if self.approval == "ask" or self.sandbox is None:
            return None
        if tool_name == "shell" and self.sandbox.confines:
            return GateDecision("allow", "sandbox", rule=f"approval = {self.approval}: runs in the sandbox")
        if write == "writable" and self.sandbox.confines:
            return GateDecision("allow", "sandbox", rule=f"approval = {self.approval}: a write the sandbox allows")
        return None


def describe_rule(rule: Any) -> str:
    tool = getattr(rule, "tool", "")
    pattern = getattr(rule, "pattern", None)
    action = getattr(rule, "action", "")
    text = f"{tool}({pattern})" if pattern else str(tool)
    return f"{text} = {action}" if action else text


def session_key(tool_name: str, args: dict[str, Any], key_arg: str) -> tuple[str, str | None]:
    """What an "allow for this session" answer covers: for the shell the exact command
    string, matched literally (``ls *.py`` is no wildcard, ``rm`` is not allowed because
    ``ls`` was, a compound command only as a whole); the whole tool otherwise."""
    if tool_name == "shell":
        return tool_name, str(args.get(key_arg or "command", "")).strip()
    return tool_name, None

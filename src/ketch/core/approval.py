"""The approval gate: one function decides every tool call.

Order: guard rules (plugins and config refusals; nothing bypasses them) → user hooks
that refuse (exit 2) → ``--yolo`` → permission rules (deny and ask first, then the user's
"allow for this session" answers, then allow) → defaults (reading tools allowed;
writing, shell, network and MCP tools ask). The session turns a decision into the SDK's
deferred approval, so a denied call never reaches the tool's function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ketch.core.events import DecidedBy

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
    ) -> None:
        self.kinds = kinds
        self.key_args = key_args
        self.guard = guard
        self.rules = rules
        self.hooks = hooks
        self.yolo = yolo
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
        if self.yolo:
            return GateDecision("allow", "yolo", rule="--yolo")
        matched = self.rules.decide(tool_name, args, self.key_args.get(tool_name, "")) if self.rules is not None else None
        if matched is not None and matched[0] != "allow":
            described = describe_rule(matched[1])
            if matched[0] == "deny":
                return GateDecision("deny", "rule", f"Denied by permission rule {described}", described)
            return GateDecision("ask", "rule", rule=described)
        allowance = self._session_allowance(tool_name, args)
        if allowance:
            return GateDecision("allow", "rule", rule=allowance)
        if matched is not None:
            return GateDecision("allow", "rule", rule=describe_rule(matched[1]))
        if self.kinds.get(tool_name, "mcp") in _DEFAULT_ALLOWED_KINDS:
            return GateDecision("allow", "default", rule="reading tools are allowed")
        return GateDecision("ask", "default")


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

"""The session's side of the gate: holding each tool call, asking the user, answering the SDK.

A mixin of ``Session``: the SDK's before-tool hook sends every call to ``ApprovalGate``; a
call the gate does not allow is deferred, and ``_handle_deferred`` answers it (denied with
the reason, or approved once the user decided through ``decide``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from ketch.protocol import events as ev
from ketch.core import telemetry
from ketch.gate.approval import HEADLESS_DENIAL, GateDecision
from ketch.core.arg_bytes import refuse_bad_bytes
from ketch.gate.user_rules import sandbox_note
from ketch.tools.base import ToolDeps


def _why_it_asks(decision: GateDecision) -> str:
    """The line the approval prompt shows under the call: why no rule let it through."""
    if decision.reason:
        return decision.reason
    if decision.by == "rule" and decision.rule:
        return f"The permission rule `{decision.rule}` says to ask."
    return ""


class ApprovalBridge:
    """Approval requests and answers of one session (needs the attributes ``Session`` sets)."""

    async def _gate_hook(self, ctx: RunContext[ToolDeps], *, call: Any, tool_def: Any, args: Any) -> Any:
        refuse_bad_bytes(call.tool_name, call.args_as_dict())  # a tool error the model sees, before anything reads them
        if ctx.tool_call_approved:
            await self._checkpoint_before_tool(call.tool_name, ctx.run_step)
            self._tool_started(ctx, call)  # last: the body runs next
            return args
        call_args = call.args_as_dict()
        preview = self._preview(call.tool_name, call_args)
        if preview:
            self._previews[call.tool_call_id] = preview
        decision = await self.gate.evaluate(call.tool_name, call_args)
        if decision.action == "allow":
            if decision.by in ("rule", "yolo", "sandbox"):
                self._resolved(call, "allow", decision)
            await self._checkpoint_before_tool(call.tool_name, ctx.run_step)
            self._tool_started(ctx, call)  # last: the body runs next
            return args
        raise ApprovalRequired({"action": decision.action, "by": decision.by, "reason": decision.reason, "rule": decision.rule})

    def _preview(self, name: str, args: dict[str, Any]) -> str:
        if name == "shell":
            return str(args.get("command", ""))
        if name in ("write_file", "edit_file"):
            try:
                from ketch.tools import files

                return files.preview_write(self.workspace, args) if name == "write_file" else files.preview_edit(self.workspace, args)
            except Exception as exc:  # noqa: BLE001 - a preview must never break the gate
                return f"(no preview: {exc})"
        return ""

    def _resolved(self, call: Any, decision: str, gd: GateDecision | None, *, by: str | None = None, reason: str = "") -> None:
        telemetry.event("ketch.gate", **{"ketch.tool": call.tool_name, "ketch.decision": decision,
                                         "ketch.by": by or (gd.by if gd else "user"), "ketch.rule": (gd.rule if gd else "") or None})
        self._emit(
            ev.ApprovalResolved(
                call_id=call.tool_call_id,
                name=call.tool_name,
                decision=decision,  # type: ignore[arg-type]
                by=(by or (gd.by if gd else "user")),  # type: ignore[arg-type]
                reason=reason or (gd.reason if gd else ""),
                rule=gd.rule if gd else "",
            )
        )

    async def _handle_deferred(self, ctx: RunContext[ToolDeps], requests: DeferredToolRequests) -> DeferredToolResults:
        approvals: dict[str, Any] = {}
        asked = False
        for call in requests.approvals:
            meta = requests.metadata.get(call.tool_call_id) or {}
            gd = GateDecision(meta.get("action", "ask"), meta.get("by", "default"), meta.get("reason", ""), meta.get("rule", ""))
            if gd.action == "deny":
                approvals[call.tool_call_id] = ToolDenied(gd.reason)
                self._resolved(call, "deny", gd)
            elif not self.interactive:
                denial = f"{HEADLESS_DENIAL} Why no rule allowed it: {gd.reason}" if gd.reason else HEADLESS_DENIAL
                approvals[call.tool_call_id] = ToolDenied(denial)
                self._resolved(call, "deny", gd, by="default", reason=denial)
            else:
                if not asked:
                    asked = True
                    self._record_pending(ctx, requests.approvals)
                approvals[call.tool_call_id] = await self._ask_user(call, _why_it_asks(gd))
        if asked and self.store is not None:
            self.store.set_pending(self.session_id, None)
        return DeferredToolResults(approvals=approvals)

    async def _ask_user(self, call: Any, why: str = "") -> Any:
        request_id = self._next_id("approval")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future  # registered before the request is visible
        args = call.args_as_dict()
        shell = call.tool_name == "shell" and isinstance(args.get("command"), str)
        from ketch.gate.rule_proposal import propose as propose_rule

        proposal, no_rule = propose_rule(args["command"]) if shell else (None, "")
        self._emit(
            ev.ApprovalRequested(
                request_id=request_id,
                call_id=call.tool_call_id,
                name=call.tool_name,
                args=args,
                preview=self._previews.get(call.tool_call_id, ""),
                reason=why,
                cwd=str(self.workspace.root) if shell else "",
                sandbox=sandbox_note(getattr(self.gate, "sandbox", None)) if shell else "",
                rule_proposal=proposal or "",
                no_rule_because=no_rule,
            )
        )
        decision, reason = await future
        if decision in ("allow_rule", "allow_rule_saved"):
            return self._allow_by_rule(call, decision, reason)
        self._resolved(call, decision, None, by="user", reason=reason)
        if decision == "deny":
            return ToolDenied(f"The user denied this call{': ' + reason if reason else '.'}")
        if decision == "allow_session":
            self.gate.allow_for_session(call.tool_name, args)
        return ToolApproved()

    def _allow_by_rule(self, call: Any, decision: str, pattern: str) -> Any:
        """"Allow commands like this": the (possibly edited) pattern becomes a session allow
        rule, and with ``allow_rule_saved`` a line of the user's config. A pattern that is not
        a valid rule, or one that does not cover this very command, allows nothing."""
        from ketch.gate.user_rules import add_session_rule, save_user_rule

        try:
            rule = add_session_rule(self.gate, pattern, call.args_as_dict())
        except ValueError as exc:
            self._emit(ev.Notice(level="warning", text=f"No rule added: {exc}"))
            self._resolved(call, "deny", None, by="user", reason=str(exc))
            return ToolDenied(f"The user's rule was not valid, so nothing was allowed: {exc}")
        where = "this session"
        if decision == "allow_rule_saved":
            try:
                where = f"this session and {save_user_rule(rule)}"
            except (OSError, ValueError) as exc:
                self._emit(ev.Notice(level="warning", text=f"Could not save shell({pattern}) to your config: {exc}"))
        self._emit(ev.Notice(text=f"Allowed shell({rule.pattern}) for {where}"))
        self._resolved(call, decision, None, by="user", reason=f"shell({rule.pattern})")
        return ToolApproved()

    async def _ask_outside_sandbox(self, call_id: str, command: str, reason: str) -> str:
        """Offer to run a command the sandbox refused once more outside it (the shell tool asks
        through this): ``allow``, ``allow_session`` or ``deny``; headless never asks."""
        if not self.interactive:
            return "deny"
        request_id = self._next_id("approval")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        preview = f"Run it again outside the sandbox? The sandbox refused {reason}.\n{command}"
        self._emit(ev.ApprovalRequested(
            request_id=request_id, call_id=call_id, name="shell", args={"command": command, "outside_sandbox": True},
            preview=preview, reason=f"the sandbox refused {reason}", cwd=str(self.workspace.root),
            sandbox="none if you allow it: it runs unconfined, able to change anything you can and to use the network",
        ))
        decision, why = await future
        self._emit(ev.ApprovalResolved(call_id=call_id, name="shell", decision=decision, by="user", reason=why, rule="outside the sandbox"))
        return str(decision)

    def decide(self, request_id: str, decision: str, reason: str = "") -> None:
        future = self._pending.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result((decision, reason))

    async def _ask(self, call_id: str, question: str, choices: list[str]) -> str:
        request_id = self._next_id("ask")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._emit(ev.AskRequested(request_id=request_id, call_id=call_id, question=question, choices=choices))
        return str(await future)

    def answer(self, request_id: str, text: str) -> None:
        future = self._pending.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(text)

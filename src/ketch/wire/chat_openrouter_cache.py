"""The ``cache_control`` breakpoints OpenRouter forwards to the routed provider, placed as
pydantic-ai's ``OpenRouterModel`` placed them for the unified ``cache`` setting.

Anthropic routes: after the tool definitions (``wire.chat_openrouter`` marks the last tool), the
static instructions and the conversation (the newest message, and the end of the previous request
where Bedrock's 20-block lookback needs it), at most four, with a TTL, a 1h breakpoint never after
a 5m one. Gemini routes: instructions and conversation, without a TTL, the conversation's breakpoint
never at the request's end or on a tool result (it would bill the prompt twice). Other routes cache
by themselves: nothing is placed. Breakpoints go on copies of the encoded messages (those are
memoized across requests).
"""

from __future__ import annotations

from itertools import chain
from typing import Any


class CacheMarks:
    """The breakpoints of one request, by the route's profile."""

    def __init__(self, profile: Any) -> None:
        self.profile = profile

    def place(self, out: list[dict[str, Any]], messages: list[Any], settings: dict[str, Any], params: Any,
              instructions: list[Any]) -> None:
        """The breakpoints of the unified ``cache`` setting on ``out`` (the request's messages)."""
        profile = self.profile
        if not profile.get("openrouter_supports_cache_control", False):
            return
        if out and (ttl := settings.get("openrouter_cache_messages")):
            from pydantic_ai.models import _request_scoped_suffix_start, _request_scoped_tail_texts
            from pydantic_ai.models._prompt_cache import previous_tail_needing_breakpoint

            tail = previous_tail_needing_breakpoint([m["role"] for m in out], [_block_count(m) for m in out])
            if tail is not None:
                self._mark(out, tail, ttl)
            end, _ = _request_scoped_suffix_start(out, _request_scoped_tail_texts(messages), _scoped_text)
            if end:
                self._mark(out, end - 1, ttl)
        if ttl := settings.get("openrouter_cache_instructions"):
            self._mark_instructions(out, instructions, ttl)
        if not profile.get("openrouter_supports_trailing_cache_control", True):
            self._move_trailing(out)
        tool_point = bool(settings.get("openrouter_cache_tool_definitions") and params.declared_tool_defs
                          and profile.get("openrouter_supports_tool_cache", False))
        self._limit(out, tool_point)

    def control(self, ttl: Any) -> dict[str, str]:
        out = {"type": "ephemeral"}
        if self.profile.get("openrouter_supports_cache_ttl", False):
            out["ttl"] = "5m" if isinstance(ttl, bool) else ttl
        return out

    def _mark(self, out: list[dict[str, Any]], index: int, ttl: Any) -> None:
        """A breakpoint on the last block of ``out[index]``, on copies (the encoded history is memoized)."""
        message = out[index]
        content = message.get("content")
        if isinstance(content, str):
            out[index] = {**message, "content": [{"type": "text", "text": content, "cache_control": self.control(ttl)}]}
        elif isinstance(content, list) and content and "cache_control" not in content[-1]:
            out[index] = {**message, "content": [*content[:-1], {**content[-1], "cache_control": self.control(ttl)}]}

    def _mark_instructions(self, out: list[dict[str, Any]], instructions: list[Any], ttl: Any) -> None:
        if not instructions:
            if count := system_prefix_count(out):
                self._mark(out, count - 1, ttl)
            return
        role = self.profile.get("openai_system_prompt_role", None) or "system"
        if role not in ("system", "developer"):
            return
        prefix_cache = self.profile.get("openrouter_supports_dynamic_instruction_cache", False)
        if not prefix_cache and any(p.dynamic for p in instructions):
            return
        prefix = next((i for i, m in enumerate(out) if m.get("role") != role), len(out))
        if not prefix_cache:
            self._mark(out, prefix - 1, ttl)
            return
        from pydantic_ai.models._prompt_cache import instruction_cache_boundaries

        first = prefix - len(instructions)
        static, stable = instruction_cache_boundaries(instructions)
        if first + static:
            self._mark(out, first + static - 1, ttl)
        if stable > static:
            self._mark(out, first + stable - 1, ttl)

    def _move_trailing(self, out: list[dict[str, Any]]) -> None:
        """Gemini routes: only the last conversation breakpoint counts, and never at the request's end
        or on a tool result (it would bill the prompt twice), so it moves to an earlier message."""
        carriers = [(mi, pi) for mi, m in enumerate(out) if m["role"] not in ("system", "developer")
                    and isinstance(m.get("content"), list) for pi, p in enumerate(m["content"]) if "cache_control" in p]
        if not carriers:
            return
        last_mi, last_pi = carriers[-1]
        control = out[last_mi]["content"][last_pi]["cache_control"]
        for mi, pi in carriers:
            content = list(out[mi]["content"])
            content[pi] = {k: v for k, v in content[pi].items() if k != "cache_control"}
            out[mi] = {**out[mi], "content": content}
        message = out[last_mi]
        at_end = last_mi == len(out) - 1 and last_pi == len(message["content"]) - 1
        if message["role"] != "tool" and not at_end:
            content = list(message["content"])
            content[last_pi] = {**content[last_pi], "cache_control": control}
            out[last_mi] = {**message, "content": content}
            return
        for i in range(last_mi - 1, -1, -1):
            earlier = out[i]
            content = earlier.get("content")
            if earlier["role"] in ("user", "assistant") and content:
                if isinstance(content, str):
                    out[i] = {**earlier, "content": [{"type": "text", "text": content, "cache_control": control}]}
                else:
                    out[i] = {**earlier, "content": [*content[:-1], {**content[-1], "cache_control": control}]}
                return

    def _limit(self, out: list[dict[str, Any]], tool_point: bool) -> None:
        """At most the downstream's number of breakpoints (Anthropic: 4): the tools' and the first
        instructions' stay, the oldest message breakpoints go."""
        most = self.profile.get("openrouter_max_cache_points")
        if most is None:
            return
        from pydantic_ai.models._prompt_cache import excess_cache_points, split_instruction_cache_points

        prefix = system_prefix_count(out)
        reserved, optional = split_instruction_cache_points(
            [p for m in out[:prefix] if isinstance(m.get("content"), list) for p in m["content"] if "cache_control" in p])
        reserved += int(tool_point)
        parts = (p for m in reversed(out[prefix:]) if isinstance(m.get("content"), list) for p in reversed(m["content"]))
        # every part carrying a breakpoint is a copy made by _mark/_move_trailing: safe to change in place
        for part in excess_cache_points(chain(parts, optional), max_points=most, reserved=reserved,
                                        is_cache_point=lambda p: "cache_control" in p, description="downstream provider"):
            del part["cache_control"]

    def finalize_ttls(self, tools: list[Any], out: list[dict[str, Any]]) -> None:
        """Anthropic refuses a 1h breakpoint after a 5m one: each takes the longest TTL after it."""
        if not self.profile.get("openrouter_supports_cache_ttl", False):
            return
        from pydantic_ai.models._prompt_cache import raise_earlier_cache_ttls

        blocks = [*tools, *(b for m in out if isinstance(m.get("content"), list) for b in m["content"])]
        carriers = [b for b in blocks if isinstance(b, dict) and b.get("cache_control")]
        ttls = [c["cache_control"].get("ttl", "5m") for c in carriers]
        for carrier, ttl, raised in zip(carriers, ttls, raise_earlier_cache_ttls(ttls), strict=True):
            if raised != ttl:
                carrier["cache_control"] = self.control(raised)

    # ------------------------------------------------------------ answers


def _block_count(message: dict[str, Any]) -> int:
    content = message.get("content")
    count = len(content) if isinstance(content, list) else int(bool(content))
    if message["role"] == "assistant":
        count += len(message.get("tool_calls") or [])
    return count


def _scoped_text(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    return content if message["role"] in ("user", "system") and isinstance(content, str) else None


def system_prefix_count(messages: list[dict[str, Any]]) -> int:
    return next((i for i, m in enumerate(messages) if m["role"] not in ("system", "developer")), len(messages))


__all__ = ["CacheMarks", "system_prefix_count"]

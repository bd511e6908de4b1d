"""Where the input a prompt cache did not serve comes from, request by request (``prompt_cache.py --breakdown``).

For each request after the first, the tokens not read from the cache (``total - read``, from the
caching fake's accounting) are split into:

- ``unchanged prefix not read back``: the part this request shares with the previous one that
  the cache did not give back (OpenAI's 128-token increments, a minimum length, a TTL; after a
  break on Anthropic, the stretch between the last breakpoint and the point of change);
- ``prefix break``: content the previous request already held, sent again after a change before it;
- ``instructions + tools (changed)``: tool definitions or instructions that differ from the
  previous request's;
- the new segments (what this request appends), by what their text is: the tool outputs, the
  model's own messages (text, reasoning, tool calls), what the user typed, ketch's state reminders
  (their frame and lead sentence, and each section by title), and the wire's framing (the JSON
  structure, roles and ids around that text).

Segments are cut and serialized as ``tests/fake_cache.py`` does (the same canonical JSON, its
characters counted as text, 4 a token), so the parts add up to the fake's own counts; a
category's tokens are its share of the characters of the new segments.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fake_cache import Counts, anthropic_segments, gemini_segments, openai_segments, text_chars, tokens

REMINDER_OPEN = "<system-reminder>"
ID_KEYS = frozenset({"id", "call_id", "tool_call_id", "tool_use_id", "type", "role", "status", "m"})
"""Keys whose string values are structure, not content (counted as framing)."""

TOOL_OUTPUT, MODEL, USER, FRAMING = "tool outputs", "model's own messages", "user prompt", "framing"
WORDING = "reminder frame + lead"
REMINDER_FRAMING = "reminder's own message framing"
PREFIX = "instructions + tools (changed)"
LOST, BREAK = "unchanged prefix not read back", "prefix break (re-sent)"


@dataclass
class Breakdown:
    """One run's uncached input over requests 2..N, by cause (tokens), and the reminders sent."""

    total: int = 0
    read: int = 0
    parts: Counter[str] = field(default_factory=Counter)
    reminders: int = 0
    reminder_sections: Counter[str] = field(default_factory=Counter)
    """How many reminders carried each section."""
    mismatch: str = ""

    @property
    def uncached(self) -> int:
        return self.total - self.read


def _owner(value: dict[str, Any], inherited: str) -> str:
    """Who wrote the text under ``value``: a tool, the model, or the user side (the default)."""
    role, kind = value.get("role"), value.get("type")
    if role in ("tool",) or kind in ("function_call_output", "tool_result") or "functionResponse" in value:
        return TOOL_OUTPUT
    if role in ("assistant", "model") or kind in ("reasoning", "function_call", "tool_use", "thinking") or "functionCall" in value:
        return MODEL
    return inherited


def _reminder_parts(text: str, out: Counter[str], sections: Counter[str]) -> None:
    """Split a reminder's characters into its frame and lead, and each ``# Title`` section."""
    body = text.split("\n")
    frame = 0
    current = ""
    for n, line in enumerate(body):
        size = len(line) + (1 if n < len(body) - 1 else 0)  # the "\n" after it
        if line.startswith("# "):
            current = line[2:]
            sections[current] += 1
        if not current or line == "</system-reminder>":
            frame += size
        else:
            out[f"reminder: {current}"] += size
    out[WORDING] += frame


def _walk(value: Any, owner: str, key: str, out: Counter[str], sections: Counter[str]) -> int:
    """Add the content characters under ``value`` to ``out``; returns how many reminders it held."""
    found = 0
    if isinstance(value, dict):
        owner = _owner(value, owner)
        for k, v in value.items():
            found += _walk(v, owner, k, out, sections)
    elif isinstance(value, list):
        for v in value:
            found += _walk(v, owner, key, out, sections)
    elif isinstance(value, str) and key not in ID_KEYS:
        if owner == USER and value.startswith(REMINDER_OPEN):
            _reminder_parts(value, out, sections)
            return 1
        out[owner] += len(value)  # as text, as the fake counts it
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and key not in ID_KEYS and owner == MODEL:
        out[owner] += len(json.dumps(value))
    return found


def segments(wire: str, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The request's cache segments (labels, canonical texts), as the fake cuts them."""
    if wire == "anthropic":
        cut = anthropic_segments(body)[0]
    elif wire in ("chat", "responses"):
        cut = openai_segments(wire, body)
    else:
        cut = gemini_segments(body)
    return cut.labels, cut.texts


def _is_prefix(label: str) -> bool:
    """Whether a segment is part of the tools or the instructions (not the conversation)."""
    return label.startswith(("tools", "system", "instructions")) or label.endswith(("(system)", "(developer)"))


def breakdown(wire: str, bodies: Sequence[dict[str, Any]], counts: Sequence[Counts]) -> Breakdown:
    """The uncached input of requests 2..N of one run, by cause (``bodies`` and ``counts`` in order)."""
    result = Breakdown()
    if len(bodies) != len(counts):
        result.mismatch = f"{len(bodies)} request bodies, {len(counts)} cache entries: no breakdown"
        return result
    last: dict[bool, list[str]] = {}
    """The previous request of each kind (with tools: a step; without: a side request such as a
    summary), as the fake compares them; the first of a kind is compared with the request before it."""
    texts: list[str] = []
    for n, (body, count) in enumerate(zip(bodies, counts)):
        kind = bool(body.get("tools"))
        previous = last.get(kind, texts)
        labels, texts = segments(wire, body)
        last[kind] = texts
        if n == 0:
            continue
        common = next((k for k, (a, b) in enumerate(zip(previous, texts)) if a != b), min(len(previous), len(texts)))
        before = set(previous[common:])
        result.total += count.total
        result.read += count.read
        prefix = tokens(sum(text_chars(t) for t in texts[:common]))
        result.parts[LOST] += max(0, prefix - count.read)
        chars: Counter[str] = Counter()
        for label, text in zip(labels[common:], texts[common:]):
            as_text = text_chars(text)
            if text in before:  # held by the previous request, after the point where this one departs
                chars[BREAK] += as_text
                continue
            if _is_prefix(label):
                chars[PREFIX] += as_text
                continue
            content: Counter[str] = Counter()
            result.reminders += _walk(json.loads(text), USER, "", content, result.reminder_sections)
            chars.update(content)
            only_reminder = bool(content) and all(k == WORDING or k.startswith("reminder: ") for k in content)
            chars[REMINDER_FRAMING if only_reminder else FRAMING] += as_text - sum(content.values())
        new_tokens = count.total - max(prefix, count.read)
        size = sum(chars.values())
        shares = _apportion(new_tokens, chars, size)
        result.parts.update(shares)
    return result


def _apportion(amount: int, weights: Counter[str], size: int) -> Counter[str]:
    """``amount`` split over ``weights`` in proportion, in whole tokens that add up to ``amount``."""
    if size <= 0 or amount <= 0:
        return Counter()
    exact = {k: amount * w / size for k, w in weights.items()}
    whole = {k: int(v) for k, v in exact.items()}
    rest = amount - sum(whole.values())
    for k in sorted(exact, key=lambda k: exact[k] - whole[k], reverse=True)[:rest]:
        whole[k] += 1
    return Counter({k: v for k, v in whole.items() if v})


ORDER = (TOOL_OUTPUT, MODEL, USER, WORDING)


def lines(name: str, result: Breakdown) -> Iterable[str]:
    """The printed table of one run."""
    if result.mismatch:
        yield f"{name}: {result.mismatch}"
        return
    total, uncached = result.total, result.uncached
    carrying = ", ".join(f"{title} x{n}" for title, n in result.reminder_sections.most_common())
    yield (f"{name}: input 2..N {total:,} tokens, read {result.read:,}, not read {uncached:,} "
           f"({uncached / total if total else 0:.2%} of input; reminders sent {result.reminders}"
           + (f", carrying {carrying}" if carrying else "") + ")")
    keys = [*ORDER, *sorted(k for k in result.parts if k.startswith("reminder: ")), REMINDER_FRAMING, FRAMING, PREFIX, LOST, BREAK]
    for key in keys:
        amount = result.parts.get(key, 0)
        yield f"    {key:34} {amount:8,} tokens  {amount / uncached if uncached else 0:6.1%} of not read  {amount / total if total else 0:6.2%} of input"

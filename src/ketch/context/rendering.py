"""Text the pruning ladder writes: one-line placeholders for tool results and the compact
transcript a summary call is given."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_core import to_json

from ketch.context.budget import content_chars

SUMMARY_HEADER = "[Summary of the earlier conversation, written when it was compacted]\n"
PLACEHOLDER_PREFIX = "[pruned: "

_KEY_ARGS = ("path", "file_path", "command", "pattern", "query", "url", "name")
_SUMMARY_PART_CHARS = 1_500
SUMMARY_TOTAL_CHARS = 300_000
"""Default cap of a summary transcript; callers size it to the summarizing model's window."""


def _clip(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters (an ellipsis marks a cut)."""
    if len(text) <= limit and "\n" not in text and "\t" not in text and "  " not in text:
        return text.strip()
    flat = " ".join(text[: limit * 2].split())
    if len(flat) > limit:
        return flat[: limit - 1] + "…"
    return flat + "…" if len(text) > limit * 2 else flat


def _key_arg(call: ToolCallPart | NativeToolCallPart | None) -> str:
    """The argument that says what a call was about (a path, a command, a query)."""
    if call is None:
        return ""
    args = call.args
    if args.__class__ is not dict:
        args = call.args_as_dict()  # malformed JSON comes back as {"INVALID_JSON": raw}
    for key in _KEY_ARGS:
        value = args.get(key)
        if isinstance(value, str):
            return _clip(value, 80)
    for value in args.values():
        if isinstance(value, str) and value:
            return _clip(value, 80)
    return ""


def _size_text(content: Any) -> tuple[str, int]:
    if isinstance(content, str):
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        return f"{lines} lines, {len(content):,} chars", len(content)
    chars = content_chars(content)
    return f"{chars:,} chars", chars


_SHORTEST_PLACEHOLDER = len(PLACEHOLDER_PREFIX) + len(" → 0 chars]")
"""Characters of the shortest placeholder :func:`placeholder_for` writes, besides the tool
name (no key argument, a one-digit size without lines)."""


def placeholder_for(part: ToolReturnPart, call: ToolCallPart | None) -> str | None:
    """A one-line stand-in for a tool result, or None when it would not be shorter.

    For example ``[pruned: read_file src/a.py → 412 lines, 13,020 chars]``. A result that
    is already a placeholder (from an earlier step's pruning) keeps it.
    """
    content = part.content
    if content.__class__ is str:  # nearly every result: _size_text inlined
        if content.startswith(PLACEHOLDER_PREFIX):
            return None
        chars = len(content)
        lines = content.count("\n") + (0 if not content or content[-1] == "\n" else 1)
        key = _key_arg(call)
        # One f-string (no separate size string); below 1,000 the thousands separator
        # changes nothing, and plain str() is much cheaper.
        text = (
            f"{PLACEHOLDER_PREFIX}{part.tool_name}{' ' if key else ''}{key}"
            f" → {lines} lines, {chars if chars < 1000 else format(chars, ',')} chars]"
        )
    else:
        size, chars = _size_text(content)
        key = _key_arg(call)
        text = f"{PLACEHOLDER_PREFIX}{part.tool_name}{' ' if key else ''}{key} → {size}]"
    return text if len(text) < chars else None


def render_native_part(part: NativeToolCallPart | NativeToolReturnPart) -> str:
    """A provider-executed call or result as one line of plain text."""
    if isinstance(part, NativeToolCallPart):
        key = _key_arg(part)
        return f"[{part.tool_name} call{': ' + key if key else ''}]"
    content = part.content
    if isinstance(content, dict):
        sources = content.get("sources") or content.get("results") or []
        urls = [s.get("url") for s in sources if isinstance(s, dict) and s.get("url")]
        status = content.get("status")
        detail = ", ".join(str(u) for u in urls[:8]) if urls else str(status or "done")
    elif isinstance(content, list):
        urls = [s.get("url") for s in content if isinstance(s, dict) and s.get("url")]
        detail = ", ".join(str(u) for u in urls[:8]) if urls else f"{len(content)} items"
    else:
        detail = _clip(str(content), 200)
    return f"[{part.tool_name} result: {_clip(detail, 600)}]"


def _attachment_placeholder(item: Any) -> str:
    """What stands for an attachment in a summary: the whole image goes, its name stays."""
    media = str(getattr(item, "media_type", "") or "")
    if media.startswith("image/"):
        return f"[image: {getattr(item, 'identifier', None) or 'attached'}, not kept]"
    return f"[{type(item).__name__}]"


def _render_part(part: Any) -> str | None:
    cls = part.__class__
    # Exact classes first: they are nearly every part of a long history.
    if cls is ThinkingPart:
        return None
    if cls is TextPart:
        return "Assistant: " + _clip(part.content, _SUMMARY_PART_CHARS)
    if cls is ToolCallPart:
        args = part.args
        # ``args_as_json_str`` of non-empty dict arguments, without its two method calls.
        text = to_json(args).decode() if args and args.__class__ is dict else part.args_as_json_str()
        return f"Tool call: {part.tool_name} {_clip(text, 300)}"
    if cls is ToolReturnPart and part.content.__class__ is str:
        return f"Tool result ({part.tool_name}): {_clip(part.content, 600)}"
    if isinstance(part, UserPromptPart):
        content = part.content if isinstance(part.content, str) else " ".join(
            c if isinstance(c, str) else _attachment_placeholder(c) for c in part.content
        )
        return "User: " + _clip(content, _SUMMARY_PART_CHARS)
    if isinstance(part, TextPart):
        return "Assistant: " + _clip(part.content, _SUMMARY_PART_CHARS)
    if isinstance(part, (NativeToolCallPart, NativeToolReturnPart)):
        return render_native_part(part)
    if isinstance(part, ToolCallPart):
        return f"Tool call: {part.tool_name} {_clip(part.args_as_json_str(), 300)}"
    if isinstance(part, ToolReturnPart):
        content = part.content if isinstance(part.content, str) else repr(part.content)[:1_200]
        return f"Tool result ({part.tool_name}): {_clip(content, 600)}"
    return None


EARLIER_SUMMARY_HEADING = "Summary of the conversation before this transcript:\n"
TRANSCRIPT_HEADING = "\n\nThe conversation since:\n"


def is_summary_part(part: Any) -> bool:
    """Whether ``part`` is a summary an earlier compaction wrote."""
    return isinstance(part, UserPromptPart) and isinstance(part.content, str) and part.content.startswith(SUMMARY_HEADER)


def compacted(message: ModelMessage) -> bool:
    """Whether a compaction rewrote ``message``: it holds a placeholdered tool result or a summary.
    A later pruning placeholders only newer results, so the history through the newest such message
    stays as it is until a summary replaces the start: a prefix a prompt cache can keep."""
    if message.__class__ is not ModelRequest:
        return False
    for part in message.parts:
        content = getattr(part, "content", None)
        if isinstance(part, ToolReturnPart) and content.__class__ is str and content.startswith(PLACEHOLDER_PREFIX):
            return True
        if is_summary_part(part):
            return True
    return False


def earlier_summary(message: ModelMessage) -> str | None:
    """The text of a summary an earlier compaction left in ``message``, or None. The summary
    is the message alone, or follows the prompt of a turn whose older steps it replaced."""
    if message.__class__ is ModelRequest:
        for part in message.parts:
            if is_summary_part(part):
                return part.content[len(SUMMARY_HEADER) :].strip()
    return None


def render_for_summary(messages: Sequence[ModelMessage], cap: int = SUMMARY_TOTAL_CHARS) -> str:
    """A compact transcript of ``messages`` for the summarizing call, at most about ``cap``
    characters.

    Reasoning is left out, long parts are clipped, and when the whole exceeds the cap the
    oldest lines are dropped first. A summary an earlier compaction left at the start is
    never dropped: it leads the transcript whole (clipped only past half the cap), so what
    it held is carried into the new summary however long the conversation since has been.
    """
    earlier = earlier_summary(messages[0]) if messages else None
    if earlier is not None:
        first = messages[0]
        others = [p for p in first.parts if not is_summary_part(p)]
        messages = ([ModelRequest(parts=others)] if others else []) + list(messages[1:])
        if len(earlier) > cap // 2:
            earlier = earlier[: cap // 2] + "…"
    cap = cap - (len(earlier) if earlier is not None else 0)
    # Rendered newest first, so the parts that would be dropped are never rendered.
    total = 0
    kept: list[str] = []
    newest_first = (
        line for m in reversed(messages) for p in reversed(m.parts) if (line := _render_part(p)) is not None
    )
    for line in newest_first:
        total += len(line) + 1
        if total > cap:
            kept.append("[older conversation omitted]")
            break
        kept.append(line)
    body = "\n".join(reversed(kept))
    return body if earlier is None else EARLIER_SUMMARY_HEADING + earlier + TRANSCRIPT_HEADING + body


_PATH_KEYS = ("path", "file_path")
_EXIT = re.compile(r"exit(?:ed with)?(?: code| status)?[:= ]+(-?\d+)", re.IGNORECASE)


def _outcome(result: Any) -> str:
    """One short phrase for a command's result: its exit status where it says one, and its
    first line."""
    if result is None:
        return "no result"
    text = result.content if isinstance(result.content, str) else str(result.content)
    if text.startswith(PLACEHOLDER_PREFIX):
        return "output pruned"
    status = _EXIT.search(text)
    first = _clip(next((line for line in text.splitlines() if line.strip()), ""), 80)
    return f"exit {status[1]}: {first}" if status else first or "no output"


def step_digest(messages: Sequence[ModelMessage], max_chars: int) -> str:
    """A mechanical record of what the summarized steps did: the files touched and the
    commands run with their outcome, newest last, at most ``max_chars`` (oldest dropped).

    Written by ketch, not the summarizing model, so it holds even when the summary is vague."""
    results = {
        p.tool_call_id: p for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    }
    files: dict[str, None] = {}
    commands: list[str] = []
    earlier = earlier_summary(messages[0]) if messages else None
    if earlier is not None and "Steps recorded by ketch:" in earlier:  # carried from the last digest
        recorded = earlier.rsplit("Steps recorded by ketch:", 1)[1].splitlines()  # ketch's own comes last
        for line in recorded:
            if line.startswith("Files touched: "):
                files.update(dict.fromkeys(f for f in line[len("Files touched: ") :].split(", ") if f))
            elif line.startswith("- `"):
                commands.append(line)
    for m in messages:
        if not isinstance(m, ModelResponse):
            continue
        for p in m.parts:
            if not isinstance(p, ToolCallPart):
                continue
            args = p.args if isinstance(p.args, dict) else p.args_as_dict()
            for key in _PATH_KEYS:
                if isinstance(args.get(key), str):
                    files[_clip(args[key], 120)] = None
            if isinstance(args.get("command"), str):
                commands.append(f"- `{_clip(args['command'], 120)}` → {_outcome(results.get(p.tool_call_id))}")
    if max_chars <= 0 or not (files or commands):
        return ""
    lines = ["Steps recorded by ketch:"]
    if files:
        # the newest first, within what the commands leave of the room (at least a third of it)
        file_room = max(max_chars // 3, max_chars - sum(len(c) + 1 for c in commands) - 60)
        names, used = [], 0
        for name in reversed(files):
            used += len(name) + 2
            if used > file_room:
                break
            names.append(name)
        lines.append("Files touched: " + ", ".join(reversed(names)))
    budget = max_chars - sum(len(line) + 1 for line in lines) - 20
    kept: list[str] = []
    for line in reversed(commands):
        budget -= len(line) + 1
        if budget < 0:
            kept.append(f"- ({len(commands) - len(kept)} earlier commands not listed)")
            break
        kept.append(line)
    if kept:
        lines.append("Commands run:")
        lines.extend(reversed(kept))
    return "\n".join(lines)[:max_chars]


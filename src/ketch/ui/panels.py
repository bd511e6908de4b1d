"""Panels the UI prints into scrollback for /tools, /cost, /context, /todos, /help."""

from __future__ import annotations

from ketch.protocol.frontend import SessionStatus
from ketch.ui.statusline import format_cost

_TODO_MARKS = {"done": "✓", "completed": "✓", "in_progress": "▸", "pending": "○"}


def tools_panel(status: SessionStatus) -> list[str]:
    """Names of the tools on the next step."""
    if not status.tools:
        return ["No tools are offered on the next step."]
    return [f"Tools ({len(status.tools)}):"] + [f"  {name}" for name in status.tools]


def cost_panel(status: SessionStatus) -> list[str]:
    """Session cost and token totals, with the share of input the provider's prompt cache served."""
    share = f" ({100 * status.cache_read_tokens / status.input_tokens:.1f}% of input)" if status.input_tokens else ""
    return [
        f"Session cost: {format_cost(status.cost_usd)}",
        f"  input tokens:  {status.input_tokens:,}",
        f"    cache reads:  {status.cache_read_tokens:,}{share}",
        f"    cache writes: {status.cache_write_tokens:,}",
        f"  output tokens: {status.output_tokens:,}",
    ]


def context_panel(status: SessionStatus) -> list[str]:
    """Context use, by part."""
    rows = [f"Context: {status.context_tokens:,} / {status.context_window:,} tokens "
            f"({status.context_used_pct:.0f}%, as the status line shows: the last request, or the estimate before one)"]
    parts = status.context_parts
    if not parts:
        return rows
    total = sum(parts.values())
    rows.append("The next request, estimated by part:")
    for part, tokens in sorted(parts.items(), key=lambda kv: -kv[1]):
        bar = "█" * max(1, round(20 * tokens / (total or 1))) if tokens else ""
        rows.append(f"  {part:<14} {tokens:>8,}  {bar}")
    pct = f" ({100.0 * total / status.context_window:.0f}%)" if status.context_window else ""
    rows.append(f"  {'total':<14} {total:>8,}{pct}")
    rows.append(f"Last prefix break: {status.prefix_break or 'none in this session so far'}")
    return rows


def todos_panel(status: SessionStatus) -> list[str]:
    """The task list."""
    if not status.todos:
        return ["No todos."]
    rows = ["Todos:"]
    for item in status.todos:
        mark = _TODO_MARKS.get(item.get("status", ""), "○")
        rows.append(f"  {mark} {item.get('content') or item.get('text') or item.get('title', '')}")
    return rows


def command_help(name: str, description: str, hint: str = "", aliases: tuple[str, ...] = ()) -> list[str]:
    """``/help NAME``: that command only."""
    rows = [f"/{name}" + (f" {hint}" if hint else ""), f"  {description}"]
    if aliases:
        rows.append("  also: " + ", ".join(f"/{a}" for a in aliases))
    return rows


def help_panel(commands: dict[str, str]) -> list[str]:
    """Commands and keys."""
    rows = ["Commands:"]
    width = max((len(n) for n in commands), default=4) + 2
    rows += [f"  /{name:<{width}}{desc}" for name, desc in sorted(commands.items())]
    rows += [
        "Keys:",
        "  enter submit · alt-enter / ctrl-j newline · ↑/↓ history · @ file · / command",
        "  esc cancel the turn and clear the queue · ctrl-c stop the running command",
        "  ctrl-r show/hide thinking · ctrl-c twice on an empty prompt quits",
        "  shift-tab cycle the approval mode (ask, auto, plan) · esc esc rewind",
    ]
    return rows

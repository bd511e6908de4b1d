"""Exporting a stored session: a readable Markdown transcript or the full JSON record.

Markdown shows prompts, answers, and tool calls with their arguments and a short result
(the ``tool_call_finished`` summary when the events hold one). JSON is the session row,
every message in the SDK's own serialized form, and every stored event.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

from ketch.protocol import strict_json
from ketch.protocol.search_rows import annotated_search

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

    from ketch.state.store import SessionRow, Store


def export_session(store: Store, session_id: str, fmt: Literal["md", "json", "atif"] = "md", ring: Any = None) -> str:
    """The session ``session_id`` (an id or unique prefix) rendered as ``md``, ``json`` or
    ``atif`` (an ATIF trajectory, ``state.atif``); each
    key of ``ring`` (a ``KeyRing``) removed, as from the tool output it may have come from (a
    call's arguments as the model wrote them are in the history as sent)."""
    text = _export(store, session_id, fmt)
    if ring is None:
        return text
    from ketch.state.redaction import redact_keys

    return redact_keys(text, ring)


def _export(store: Store, session_id: str, fmt: Literal["md", "json", "atif"]) -> str:
    from ketch.state.store import StoreError

    if fmt not in ("md", "json", "atif"):
        raise StoreError(f"unknown export format {fmt!r}; use 'md', 'json' or 'atif'")
    session = store.get_session(session_id)
    if session is None:
        raise StoreError(f"no session {session_id!r} to export; list sessions with 'ketch sessions'")
    messages = store.load_messages(session.id)
    if fmt == "atif":
        from ketch.state.atif import render

        return render(session, messages)
    events = store.load_events(session.id)
    if fmt == "json":
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        record = {
            "session": asdict(session),
            "messages": json.loads(ModelMessagesTypeAdapter.dump_json(messages)),
            "events": events,
        }
        return strict_json.dumps(record, indent=2, ensure_ascii=False) + "\n"
    return render_markdown(session, messages, events)


_ARGS_CAP = 400
_RESULT_CAP = 600


def _clip(text: str, cap: int) -> str:
    text = text.strip()
    return text if len(text) <= cap else text[:cap].rstrip() + " …"


def _as_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "\n".join(_as_text(c) for c in content if isinstance(c, str) or not hasattr(c, "url"))
    try:
        return strict_json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(content)


def _args_text(args: Any) -> str:
    if args is None:
        return "{}"
    if isinstance(args, str):
        return args
    return strict_json.dumps(args, ensure_ascii=False, default=str)


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines())


def render_markdown(session: SessionRow, messages: Sequence[ModelMessage], events: Sequence[dict[str, Any]]) -> str:
    """A readable transcript: prompts, answers, tool calls with arguments and result summaries."""
    summaries = {
        e["call_id"]: (e.get("summary", ""), bool(e.get("is_error")))
        for e in events
        if e.get("type") == "tool_call_finished" and e.get("call_id")
    }
    created = time.strftime("%Y-%m-%d %H:%M", time.localtime(session.created))
    out = [
        f"# {session.title or 'Session ' + session.id}",
        "",
        f"- session: `{session.id}`" + (f" (forked from `{session.parent_id}`)" if session.parent_id else ""),
        f"- directory: `{session.cwd}`",
        f"- model: `{session.model}`, agent: `{session.agent}`",
        f"- started: {created}",
        "",
    ]
    speaker = ""

    def heading(who: str) -> None:
        nonlocal speaker
        if who != speaker:
            out.extend([f"## {who}", ""])
            speaker = who

    from pydantic_ai import messages as m

    from ketch.context.reminders import is_reminder

    for message in messages:
        for part in message.parts:
            if isinstance(part, m.UserPromptPart) and not is_reminder(part):
                heading("User")
                out.extend([_as_text(part.content).strip(), ""])
            elif isinstance(part, m.ThinkingPart) and part.content.strip():
                heading("Assistant")  # the reasoning is kept, folded (the UI's ctrl-r)
                out.extend(["<details><summary>Thinking</summary>", "", part.content.strip(), "", "</details>", ""])
            elif isinstance(part, m.TextPart) and part.content.strip():
                heading("Assistant")
                out.extend([part.content.strip(), ""])
                if (searched := annotated_search(part)) is not None:  # OpenRouter: sources on the text
                    rows = "; ".join(f"{s['title'] or s['url']} <{s['url']}>" for s in searched["sources"])
                    out.extend([_quote(f"web_search → {_clip(rows, _RESULT_CAP)}"), ""])
            elif isinstance(part, m.BaseToolCallPart):
                heading("Assistant")
                label = "hosted tool" if isinstance(part, m.NativeToolCallPart) else "tool"
                out.extend([f"**{label}** `{part.tool_name}` `{_clip(_args_text(part.args), _ARGS_CAP)}`", ""])
            elif isinstance(part, m.BaseToolReturnPart):
                summary, is_error = summaries.get(part.tool_call_id, ("", part.outcome != "success"))
                text = summary or _clip(_as_text(part.content), _RESULT_CAP)
                out.extend([_quote(f"{'error: ' if is_error else ''}{part.tool_name} → {text}"), ""])
    return "\n".join(out).rstrip() + "\n"

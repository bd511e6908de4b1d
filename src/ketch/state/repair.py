"""Repairing a session a provider keeps rejecting for its history.

Some answers, once in the history, make every later request fail (a server that cannot
parse a call it produced itself, a part the provider refuses on replay). ``/repair`` and
``ketch repair SESSION`` rewrite the last exchange the model answered, from its user prompt on:
the prompt stays, everything the model did after it (answers, tool calls, their results) is
replaced by one short answer that tells the model what happened, and prompts sent after it
that never got an answer (the rejected ones) go too. Every earlier message stays as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

REPAIR_NOTE = (
    "(ketch repair: my answer to this request, with its tool calls and their results, was removed "
    "because the provider could no longer accept the conversation with it. Whatever those tool calls "
    "did to files may still be in place; check before redoing it.)"
)


@dataclass(frozen=True)
class Repair:
    messages: list[Any]
    removed: int
    """Messages of the last exchange that were replaced."""
    prompt: str


def _prompt_text(message: Any) -> str | None:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from ketch.context.reminders import is_reminder

    if not isinstance(message, ModelRequest):
        return None
    texts = [p.content if isinstance(p.content, str) else " ".join(str(c) for c in p.content if isinstance(c, str))
             for p in message.parts if isinstance(p, UserPromptPart) and not is_reminder(p)]
    return "\n".join(texts) if texts else None


def _is_note(message: Any) -> bool:
    from pydantic_ai.messages import TextPart

    return any(isinstance(p, TextPart) and p.content == REPAIR_NOTE for p in getattr(message, "parts", ()))


def repair_last_exchange(messages: Sequence[Any]) -> Repair | None:
    """The history with its last answered exchange rewritten, or None when nothing was answered.

    The last exchange is the newest prompt the model answered (a repair note is no answer), with
    everything after it: prompts sent later that never got an answer (the rejected requests) are
    dropped with it. Repairing again goes one exchange further back."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    answered = False
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, ModelResponse) and not _is_note(message):
            answered = True
            continue
        prompt = _prompt_text(message)
        if prompt is None or not answered:
            continue
        request = ModelRequest(parts=[UserPromptPart(content=prompt)], instructions=getattr(message, "instructions", None))
        note = ModelResponse(parts=[TextPart(content=REPAIR_NOTE)])
        return Repair([*messages[:index], request, note], len(messages) - index, prompt)
    return None


def repair_session(store: Any, session_id: str) -> Repair | None:
    """Rewrite the stored history of ``session_id``; None when it had nothing to repair."""
    messages = store.load_messages(session_id)
    repair = repair_last_exchange(messages)
    if repair is not None:
        store.replace_history(session_id, repair.messages)
        store.set_pending(session_id, None)
    return repair


def describe(session_id: str, repair: Repair | None) -> str:
    if repair is None:
        return f"Session {session_id} has no exchange to repair."
    prompt = " ".join(repair.prompt.split())
    prompt = prompt if len(prompt) <= 60 else prompt[:59] + "…"
    return (
        f"Repaired session {session_id}: the answer to “{prompt}” and what followed it ({repair.removed} message(s)) "
        "were replaced by a note to the model; everything before it is kept."
    )


__all__ = ["REPAIR_NOTE", "Repair", "describe", "repair_last_exchange", "repair_session"]

"""What a turn stopped before its end leaves in the history: a valid history on every wire.

Two moments need a history the SDK did not build:

* **While tools run** (``interim_history``): the response holding the calls is complete, the
  request holding their results is not. The store gets that response followed by a request
  answering every call: the real result of each call that finished, and for the others a note
  that ketch stopped while (or before) they ran. A process killed mid-command therefore
  leaves a history in which the model learns that the command ran and was cut off.
* **After a cancel** (``cancelled_history``): the user's prompt (even when no request was
  sent yet), the partial answer with ``CANCELLED_MARKER`` (a text the model and the replay
  both see), and for a step cut during its tools the same closing request, with notes that
  the user cancelled. The result never ends in unanswered calls, never holds two responses in
  a row, and the next prompt follows it on every wire.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai.messages import (
    INTERRUPTED_TOOL_RETURN_CONTENT,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolReturnPart,
    UserPromptPart,
)

CANCELLED_MARKER = "[cancelled by the user: this answer stops here]"
"""Ends the text of an answer the user cancelled (``is_cancelled_answer`` finds it)."""

CUT_OFF_BY_EXIT = (
    "ketch stopped while this tool was running (the process ended before the tool finished): it ran "
    "at least in part and was cut off, so its effects are unknown; check them before relying on them."
)
NOT_RUN_BY_EXIT = "ketch stopped before this tool ran; it did not run."
CUT_OFF_BY_USER = (
    "The user cancelled the turn while this tool was running; it was stopped before it finished, "
    "so its effects are unknown."
)
NOT_RUN_BY_USER = "The user cancelled the turn before this tool ran; it did not run."


@dataclass
class StepRecord:
    """What is known of the step in progress beyond the SDK's history (kept by ``Session``)."""

    live: list[ModelMessage] | None = None
    """The run's own history list (``ctx.messages``), as the SDK grows it."""
    prompt_sent: bool = False
    """Whether a model request of this turn was built (the prompt is then in ``live``)."""
    answer: list[str] = field(default_factory=list)
    """Text of the response streaming now."""
    started: set[str] = field(default_factory=set)
    """Calls of the newest response whose tool body began."""
    results: dict[str, Any] = field(default_factory=dict)
    """Finished calls of the newest response: call id -> the SDK's result part."""
    awaiting_approval: bool = False
    """The newest response's calls wait for the user's decision (stored as pending)."""

    def new_response(self) -> None:
        self.answer.clear()

    def new_calls(self) -> None:
        self.started.clear()
        self.results.clear()


def open_calls(messages: Sequence[ModelMessage]) -> ModelResponse | None:
    """The last message when it is a response whose tool calls have no results yet."""
    last = messages[-1] if messages else None
    return last if isinstance(last, ModelResponse) and last.tool_calls else None


def closing_request(
    response: ModelResponse, results: Mapping[str, Any], started: set[str], *, by_user: bool
) -> ModelRequest:
    """A request answering each call of ``response``: its result, or a note of why there is none."""
    parts: list[Any] = []
    for call in response.tool_calls:
        part = results.get(call.tool_call_id)
        if part is None:
            if call.tool_call_id in started:
                note = CUT_OFF_BY_USER if by_user else CUT_OFF_BY_EXIT
            else:
                note = NOT_RUN_BY_USER if by_user else NOT_RUN_BY_EXIT
            part = ToolReturnPart(tool_name=call.tool_name, content=note, tool_call_id=call.tool_call_id, outcome="interrupted")
        parts.append(part)
    return ModelRequest(parts=parts)


def interim_history(step: StepRecord) -> list[ModelMessage] | None:
    """The history to store while the newest response's tools run, or None when none is open."""
    live = list(step.live or [])
    response = open_calls(live)
    if response is None:
        return None
    return [*live, closing_request(response, step.results, step.started, by_user=False)]


def cancelled_history(history: Sequence[ModelMessage], step: StepRecord, prompt: str | None) -> list[ModelMessage]:
    """The history a cancelled turn leaves: ``history`` is the newest one the session knows."""
    messages: list[ModelMessage] = list(step.live) if step.live is not None else list(history)
    last = messages[-1] if messages else None
    partial = "".join(step.answer)
    if isinstance(last, ModelResponse) and last.state in ("interrupted", "incomplete") and not is_cancelled_answer(last):
        messages[-1] = marked_answer(last)  # the SDK kept what had streamed of the cut response
        partial = ""
    if isinstance(last, ModelRequest) and last.state == "interrupted":  # the SDK closed the calls it cut
        messages[-1] = _said_by_user(messages, step)
    response = open_calls(messages)
    if response is not None:  # cut during its tools, while asking to run them, or left open before
        messages.append(closing_request(response, step.results, step.started, by_user=True))
    if prompt is not None and not step.prompt_sent:
        messages.append(ModelRequest(parts=[UserPromptPart(prompt)]))
    if isinstance(messages[-1] if messages else None, ModelRequest):
        messages.append(cancelled_answer("" if _stale(partial, messages) else partial))
    return messages


def _said_by_user(messages: list[ModelMessage], step: StepRecord) -> ModelRequest:
    """The SDK's request closing what a cancel cut (its results so far, marked interrupted),
    completed: a call without a real result gets ketch's note of why."""
    request = messages[-1]
    assert isinstance(request, ModelRequest)
    response = messages[-2] if len(messages) > 1 else None
    if not isinstance(response, ModelResponse) or not response.tool_calls:
        return request
    real = {
        part.tool_call_id: part
        for part in request.parts
        if isinstance(part, (ToolReturnPart, RetryPromptPart)) and part.tool_call_id
        and not (isinstance(part, ToolReturnPart) and part.content == INTERRUPTED_TOOL_RETURN_CONTENT)
    }
    closing = closing_request(response, {**step.results, **real}, step.started, by_user=True)
    others = [part for part in request.parts if not isinstance(part, (ToolReturnPart, RetryPromptPart))]
    return replace(request, parts=[*closing.parts, *others])


def marked_answer(response: ModelResponse) -> ModelResponse:
    """``response`` (cut while it streamed) as its text so far ending in ``CANCELLED_MARKER``.

    Only the text stays, without provider ids: its tool calls never ran (tools start once a
    response is whole) and their arguments may be cut; its reasoning has no complete signature;
    and a provider keeps no items of a response it never finished, so none is referred to."""
    text = "".join(part.content for part in response.parts if isinstance(part, TextPart))
    return replace(cancelled_answer(text), model_name=response.model_name, provider_name=response.provider_name,
                   timestamp=response.timestamp)


def _stale(partial: str, messages: Sequence[ModelMessage]) -> bool:
    """Whether ``partial`` is the text of the newest stored response (its events were read late)."""
    previous = next((m for m in reversed(messages) if isinstance(m, ModelResponse)), None)
    return bool(partial) and previous is not None and partial == previous.text


def cancelled_answer(partial: str) -> ModelResponse:
    """The response standing for an answer the user cancelled after ``partial`` was streamed."""
    text = f"{partial.rstrip()}\n\n{CANCELLED_MARKER}" if partial.strip() else CANCELLED_MARKER
    return ModelResponse(parts=[TextPart(text)], state="interrupted")


def is_cancelled_answer(message: ModelMessage) -> bool:
    """Whether ``message`` is an answer the user cancelled (for a replay that marks it)."""
    return (
        isinstance(message, ModelResponse)
        and bool(message.parts)
        and isinstance(message.parts[-1], TextPart)
        and message.parts[-1].content.endswith(CANCELLED_MARKER)
    )

"""The pruning ladder and the provider-item repairs that must follow any pruning.

Everything here is a pure function over pydantic-ai messages: inputs are never mutated,
changed messages and parts are new objects (shallow copies, see ``_evolve`` and ``_copier``),
unchanged ones are shared. The ladder, tried in order until the history fits its budget:

1. ``reasoning`` — drop ``ThinkingPart``s of turns before the current one. The text and
   tool-call parts of a response that lost its reasoning lose their provider item ids too,
   so they are sent inline rather than as items that depended on the dropped reasoning.
2. ``tool_results`` — keep the widest recent run of tool results whole and replace the
   content of older ``ToolReturnPart``s with a one-line placeholder. The call and its
   (placeholder) result stay paired.
3. ``summary`` — replace the oldest whole turns by a summary from an auxiliary model call
   (``summarize``), as many as it takes for the turns kept, as they are, to fit half the
   budget (:data:`SUMMARY_TAIL_SHARE`). Whole turns only, so provider-executed call/result
   pairs never split. When the current turn alone is too big, every earlier turn goes and
   the current turn's older results are placeholdered as in stage 2.

A turn starts at a ``ModelRequest`` holding a ``UserPromptPart``. The current turn's
prompt and any call still awaiting its result (a suspended approval) always stay.

After any stage, :func:`repair` runs: results whose call is gone are dropped and every
provider item id is stripped (:func:`strip_item_ids`), so nothing sent refers to an item
the provider may no longer hold or that depended on a dropped reasoning item.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
import re
from dataclasses import dataclass, field, replace

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from ketch.context.budget import message_tokens
from ketch.context.collector import collector_paused
from ketch.context.prune_plan import (
    MIN_SUMMARY_CHARS,
    SUMMARY_RESERVE_TOKENS,
    SUMMARY_TAIL_SHARE,
    Stage,
    _Decision,
    _Plan,
    _decide,
    _plan,
    _Stopwatch,
    _tail_cut,
)
from ketch.context.rebuild import ITEM_REPLAY_PROVIDERS, _rebuild, turn_starts
from ketch.context.rendering import (
    SUMMARY_TOTAL_CHARS,
    is_summary_part,
    step_digest,
    EARLIER_SUMMARY_HEADING,
    PLACEHOLDER_PREFIX,
    SUMMARY_HEADER,
    TRANSCRIPT_HEADING,
    earlier_summary,
    placeholder_for,
    render_for_summary,
)
from ketch.context.repairs import is_item_not_found, repair, strip_item_ids

Summarize = Callable[[str], Awaitable[str]]


@dataclass(frozen=True)
class PruneResult:
    """What the ladder did: the messages to send and the estimate before and after."""

    # Kept out of repr: asyncio (3.11) reprs a finished task's result when it restores the
    # SIGINT handler, and the repr of thousands of messages costs more than the pruning.
    messages: list[ModelMessage] = field(repr=False)
    tokens_before: int
    tokens_after: int
    stage: Stage
    summary_error: str | None = None
    """Why a summary the ladder needed could not be written (the history was then pruned by
    the lower rungs only); None when no summary was needed or it was written."""
    summary_refused: str | None = None
    """Why a summary that was written was not kept: with it the request came out no smaller
    than placeholders alone make it (the history was then pruned by the lower rungs only)."""
    summary_empty: bool = False
    """The model's summary came back empty, and ketch's own record of the summarized steps
    (or, with none, a note of what went) stands in for it: a summary is never empty."""

    @property
    def changed(self) -> bool:
        """Whether any pruning happened (the session reports one compaction per turn)."""
        return self.stage != "none"


def _summary_request(body: str, max_chars: int, prompt: ModelMessage | None = None) -> ModelRequest:
    """The message that stands for what a summary replaced. With ``prompt`` (the current turn's
    opening request, when its older steps were summarized too), the turn's own prompt leads it
    verbatim, so the user's words are never only paraphrased."""
    summary = UserPromptPart(SUMMARY_HEADER + body.strip()[:max_chars])
    if prompt is None:
        return ModelRequest(parts=[summary])
    kept = [p for p in prompt.parts if isinstance(p, UserPromptPart) and not is_summary_part(p)]
    return ModelRequest(parts=[*kept, summary])


async def _written_summary(summarize: Summarize, transcript: str) -> tuple[str | None, str | None]:
    """(summary, None) — the empty string for an empty answer — or (None, why it failed)."""
    try:
        text = (await summarize(transcript) or "").strip()
    except Exception as exc:  # noqa: BLE001 - any failure leaves the history as it was
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, first[:300]
    return text, None


RECORD_HEADING = "Steps recorded by ketch:"
"""The heading of ketch's own record of summarized steps (``rendering.step_digest``)."""

_TEMPLATE_LINE = re.compile(r"(?=<)(?:<\|?[A-Za-z_]{1,24}\|?>\s*)*(?:<\|?[A-Za-z_]{0,24}\|?)?(?:user|assistant|system|model|tool)?")
"""A line of chat-template markup alone (``<|im_end|>assistant``, ``<start_of_turn>model``, or
``<|im`` where the output cap cut one): a small model's summary can be nothing else."""


def _without_repeats(text: str) -> str:
    """``text`` with each line it repeats (beyond the first occurrence), each line of
    chat-template markup alone, and anything from a copy of ketch's record heading on, left
    out; blank lines stay."""
    seen: set[str] = set()
    kept = []
    text = text.split(RECORD_HEADING, 1)[0]  # ketch's record is ketch's to write (a model copied it, with files never read)
    for line in text.splitlines():
        key = line.strip()
        if key and (key in seen or _TEMPLATE_LINE.fullmatch(key)):
            continue
        seen.add(key)
        kept.append(line)
    return "\n".join(kept)


def _removed_note(head: Sequence[ModelMessage]) -> str:
    """The summary's body when there is no summarizer: how many turns went."""
    return f"({len(turn_starts(head)) or 1} earlier turn(s) were removed to fit the context window.)"


async def prune(
    messages: Sequence[ModelMessage],
    *,
    limit: int,
    reserved: int = 0,
    summarize: Summarize | None = None,
    inline_native_from: Collection[str] = ITEM_REPLAY_PROVIDERS,
    timings: dict[str, float] | None = None,
    summary_chars: int = SUMMARY_TOTAL_CHARS,
    summarize_above: int | None = None,
    summary_tokens: int = SUMMARY_RESERVE_TOKENS,
    record_first: bool = False,
) -> PruneResult:
    """Run the ladder until the request fits ``limit`` tokens, then repair.

    The rungs are decided from token arithmetic over one pass, and the new history is
    built in one more pass, so a long history costs two walks rather than one per rung.
    Tool results are priced (their placeholders written) newest first, only as far back as
    the decision needs; the summary transcript is rendered newest first up to its cap.
    Both walks allocate thousands of objects and free almost none, so they run with the
    cyclic collector paused (``collector_paused``); the summarize call does not.

    Args:
        messages: The history about to be sent; not modified.
        limit: Tokens the whole request may hold (context window × threshold).
        reserved: Tokens of the rest of the request (instructions, tool schemas).
        summarize: Awaitable auxiliary call (no tools, no search) turning a rendered
            transcript into a summary; without it, stage 3 removes turns with a short note.
            When it raises, no summary replaces anything: the history is pruned by the lower
            rungs and ``summary_error`` says why. When it answers nothing, ketch's own record of
            the steps stands in for it (``summary_empty``).
        inline_native_from: Passed to :func:`strip_item_ids`.
        timings: When given, CPU seconds are added to it under "plan" (counting every
            message), "price" (tool-result placeholders), "summary" (transcript and the
            summarize call) and "rebuild" (the new history); for benchmarks.
        summary_chars: The most characters of transcript the summary call is sent (the
            caller sizes it to the window of the model that writes the summary).
        summarize_above: With it, ``limit`` is a low-water mark the cheap rungs (reasoning,
            placeholders) aim for: a summary is written only when those rungs, as far as they
            go, leave the request above ``summarize_above`` tokens; otherwise they go as far as
            they can (a best effort toward ``limit``) and no summary call is made.
        summary_tokens: The most tokens the kept summary message may take (the caller sizes it
            to the history's room; a summary is cut to it).
        record_first: ketch's own record of the summarized steps (files, commands) may take
            two thirds of the room, and all the model's text leaves, not only a third of it (a
            small window, where a small model's summary is often empty or junk).

    A line the summary repeats is kept once (a small model can repeat one line to its cap), and
    a line of chat-template markup alone is left out.

    A summary that was written but leaves the request no smaller than placeholders alone do
    is not kept (``summary_refused`` says so): the lower rungs' result is returned instead.

    Returns:
        A :class:`PruneResult`; ``stage`` is the last rung used ("none" when it fit).
    """
    lap = _Stopwatch(timings) if timings is not None else None
    transcript = None
    with collector_paused():
        plan = _plan(messages)
        if lap:
            lap("plan")
        before = sum(plan.full) + reserved
        if before <= limit:
            return PruneResult(list(messages), before, before, "none")
        decision = _decide(messages, plan, limit - reserved, lap, summary_tokens)
        if decision.stage == "summary" and summarize_above is not None and summarize_above > limit:
            if _decide(messages, plan, summarize_above - reserved, None, summary_tokens).stage != "summary":
                decision.stage, decision.start, decision.in_turn = "tool_results", 0, False
        if decision.stage == "summary" and summarize is not None:
            transcript = render_for_summary(messages[: decision.start], summary_chars)
    head = None
    failure = None
    empty = False
    if decision.stage == "summary":
        summarized = messages[: decision.start]
        body, failure = (_removed_note(summarized), None) if transcript is None else await _written_summary(summarize, transcript)
        if body is not None:
            text = _without_repeats(body.strip())
            empty = not text
            record = decision.room // 3
            if record_first or empty:  # ketch's record first (two thirds), and what the model's text leaves
                record = max(decision.room * 2 // 3, decision.room - len(text) - 2)
            digest = step_digest(summarized, record)
            room = decision.room - len(digest) - (2 if digest else 0)
            body = text[:room] + ("\n\n" + digest if digest else "")
            if not body.strip():  # an empty summary of steps with nothing to record: say what went
                body = _removed_note(summarized)
            head = _summary_request(body, decision.room, messages[decision.current] if decision.in_turn else None)
        else:  # no summary: nothing is replaced; placeholders do what they can
            decision.stage, decision.start, decision.in_turn = "tool_results", 0, False
        if lap:
            lap("summary")
    with collector_paused():
        out, after = _built(messages, plan, decision, head, reserved, inline_native_from)
        refused = None
        if head is not None:
            cheaper = replace(decision, stage="tool_results", start=0, in_turn=False)
            plain, plain_after = _built(messages, plan, cheaper, None, reserved, inline_native_from)
            if after >= plain_after:
                refused = (f"the summary left {after:,} tokens, no fewer than the {plain_after:,} "
                           "placeholders alone leave")
                out, after, decision = plain, plain_after, cheaper
        if lap:
            lap("rebuild")
    return PruneResult(out, before, after, decision.stage, failure, refused, empty and refused is None)


def _built(messages: Sequence[ModelMessage], plan: _Plan, decision: _Decision, head: ModelRequest | None,
           reserved: int, inline_native_from: Collection[str]) -> tuple[list[ModelMessage], int]:
    """The history ``decision`` makes (``head`` first: the summary message, if any) and its tokens."""
    cut = _tail_cut(plan, decision, head) if decision.tail_cut else decision.cut
    out, after = _rebuild(
        messages,
        inline_native_from=inline_native_from,
        drop_orphans=True,
        thin_before=decision.thin_before,
        placeholders=plan.placeholders,
        placeholder_before=cut,
        start=decision.start,
        plan=plan,
        keep_ids_at=decision.newest,
    )
    after += reserved
    if head is not None:
        out.insert(0, head)
        after += message_tokens(head)
    return out, after


__all__ = [
    "EARLIER_SUMMARY_HEADING",
    "ITEM_REPLAY_PROVIDERS",
    "MIN_SUMMARY_CHARS",
    "PLACEHOLDER_PREFIX",
    "PruneResult",
    "SUMMARY_HEADER",
    "SUMMARY_RESERVE_TOKENS",
    "SUMMARY_TAIL_SHARE",
    "Summarize",
    "TRANSCRIPT_HEADING",
    "earlier_summary",
    "is_item_not_found",
    "placeholder_for",
    "prune",
    "render_for_summary",
    "repair",
    "strip_item_ids",
    "turn_starts",
]

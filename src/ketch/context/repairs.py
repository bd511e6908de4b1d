"""Repairs a history needs before it is sent again: no orphaned results, no stale provider
item ids, and the recognition of the provider errors that call for them."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pydantic_ai.messages import ModelMessage

from ketch.context.rebuild import ITEM_REPLAY_PROVIDERS, _rebuild


def strip_item_ids(
    messages: Sequence[ModelMessage],
    *,
    inline_native_from: Collection[str] = ITEM_REPLAY_PROVIDERS,
) -> list[ModelMessage]:
    """The history with no provider item ids, so every part is sent inline by content.

    Clears ``id`` on text, reasoning and tool-call parts (adapter sentinels such as
    Anthropic's ``redacted_thinking`` are not item ids and are kept), splits legacy
    ``call|item`` tool-call ids on calls and their results alike, and rewrites
    provider-executed call/result parts of ``inline_native_from`` providers (whose only
    replay form is the item id) as plain text. Also the answer to a 404 "Item with id … not
    found": the same history, sent by content.
    """
    return _rebuild(messages, inline_native_from=inline_native_from, drop_orphans=False)[0]


def repair(
    messages: Sequence[ModelMessage],
    *,
    inline_native_from: Collection[str] = ITEM_REPLAY_PROVIDERS,
) -> list[ModelMessage]:
    """Make a pruned history sendable: drop orphaned results and strip provider item ids."""
    return _rebuild(messages, inline_native_from=inline_native_from, drop_orphans=True)[0]


def is_item_not_found(error: BaseException) -> bool:
    """Whether ``error`` is the provider's 404 "Item with id '…' not found."

    Looks through exception groups and ``__cause__`` chains for a
    ``pydantic_ai.exceptions.ModelHTTPError`` with status 404 whose body or message says an
    item was not found.
    """
    from pydantic_ai.exceptions import ModelHTTPError

    pending: list[BaseException] = [error]
    seen: set[int] = set()
    while pending:
        exc = pending.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, ModelHTTPError) and exc.status_code == 404:
            text = f"{exc.body} {exc.message}".lower()
            if "item with id" in text and "not found" in text:
                return True
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        if exc.__cause__ is not None:
            pending.append(exc.__cause__)
    return False

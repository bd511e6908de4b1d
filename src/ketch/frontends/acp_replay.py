"""A stored history as the ACP updates a client would have seen live (``session/load``):
the user's prompts, the answers and reasoning, and each tool call with its result."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any


def replay_updates(messages: Sequence[Any]) -> Iterator[Any]:
    import acp
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    from ketch.context.prune import SUMMARY_HEADER
    from ketch.context.reminders import is_reminder

    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and not is_reminder(part):
                    text = part.content if isinstance(part.content, str) else " ".join(c for c in part.content if isinstance(c, str))
                    if text.startswith(SUMMARY_HEADER):
                        yield acp.update_agent_thought_text("(earlier conversation, summarized)\n" + text[len(SUMMARY_HEADER):])
                    else:
                        yield acp.update_user_message_text(text)
                elif isinstance(part, ToolReturnPart):
                    content = part.model_response_str()
                    failed = part.outcome != "success"
                    yield acp.update_tool_call(part.tool_call_id, status="failed" if failed else "completed",
                                               content=[acp.tool_content(acp.text_block(content[:2000]))])
        elif isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, TextPart) and part.content:
                    yield acp.update_agent_message_text(part.content)
                elif isinstance(part, ThinkingPart) and part.content:
                    yield acp.update_agent_thought_text(part.content)
                elif isinstance(part, ToolCallPart):
                    yield acp.start_tool_call(part.tool_call_id, part.tool_name, kind="other", status="pending",
                                              raw_input=part.args_as_dict())

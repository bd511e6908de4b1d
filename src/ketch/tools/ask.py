"""The ``ask`` tool: the model asks the user a question, optionally with choices.

Withheld in headless mode (kind "interactive"); the session supplies the asker that
raises an ``AskRequested`` event and waits for the front end's answer.
"""

from __future__ import annotations

from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.base import ToolDeps, ToolSpec


async def ask(ctx: RunContext[ToolDeps], question: str, choices: list[str] | None = None) -> str:
    """Ask the user a question and wait for the answer. Use it only when you cannot proceed without the user's input.

    Args:
        question: The question, one or two sentences.
        choices: Optional answers to pick from; the user may still answer in free text.
    """
    asker = ctx.deps.extras.get("ask")
    if asker is None:
        raise ToolFailed("No user is available to answer questions in this mode; decide yourself and say what you assumed.")
    answer = await asker(ctx.tool_call_id, question, list(choices or []))
    return f"The user answered: {answer}" if answer.strip() else "The user gave no answer."


TOOLS = [ToolSpec("ask", ask, "interactive", "question")]

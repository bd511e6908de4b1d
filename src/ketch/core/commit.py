"""Commit messages: a nested model call over the staged diff.

Like titles, the call uses a bare pydantic-ai ``Agent`` with no tools and no capabilities,
so it can neither act on the repository nor search the web. The diff is capped so a huge
change cannot blow the request; the cap is said in the prompt so the model knows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ketch.state.titles import aux_settings

DIFF_CAP = 60_000
"""Characters of the staged diff sent; longer diffs are cut and marked as cut."""

COMMIT_INSTRUCTIONS = (
    "Write a git commit message for the staged diff the user sends. First line: an imperative "
    "summary of at most 72 characters. Then, only if the change needs it, a blank line and a short "
    "body wrapped at 72 columns saying what changed and why. Reply with the message only: "
    "no code fences, no preamble."
)


class NothingStaged(Exception):
    """There is no staged change to describe."""


def clean_message(raw: str) -> str:
    """Strip code fences and surrounding blank lines the model may add."""
    lines = raw.strip().splitlines()
    if lines and lines[0].startswith("```"):
        lines = lines[1:]
    if lines and lines[-1].startswith("```"):
        lines = lines[:-1]
    return "\n".join(line.rstrip() for line in lines).strip() + "\n"


async def propose_commit_message(model: Any, staged_diff: str) -> str:
    """A commit message for ``staged_diff`` (raises ``NothingStaged`` when it is empty)."""
    if not staged_diff.strip():
        raise NothingStaged("nothing is staged: stage changes with git add first")
    from pydantic_ai import Agent

    diff = staged_diff
    if len(diff) > DIFF_CAP:
        diff = diff[:DIFF_CAP] + f"\n[diff cut at {DIFF_CAP} of {len(staged_diff)} characters]\n"
    agent: Agent[None, str] = Agent(model, instructions=COMMIT_INSTRUCTIONS, model_settings=aux_settings(1000))  # type: ignore[arg-type]
    result = await agent.run(f"Staged diff:\n\n{diff}")
    return clean_message(result.output)


async def propose_for_repo(model: Any, root: str | Path) -> str:
    """The commit message for what is staged in the repository at ``root``."""
    from ketch.tools.git import staged_diff

    return await propose_commit_message(model, staged_diff(root))

"""Session titles: one short auxiliary model call over the first prompt.

The call goes through a bare pydantic-ai ``Agent``: no tools, no capabilities, so no web
search of any kind can reach the wire. Thinking is turned down and the answer is cleaned
to one line of at most ``TITLE_MAX`` characters. Callers treat any failure as "no title".
"""

from __future__ import annotations

import re
from typing import Any

TITLE_MAX = 60
PROMPT_CAP = 2000
"""Characters of the first prompt sent to the title call (a title needs no more)."""

TITLE_INSTRUCTIONS = (
    "You name coding sessions. Reply with a title of at most six words for the request below: "
    "plain text, no quotes, no trailing period, no markdown, nothing else."
)

_WRAPPERS = "#*_`> \t\"'“”‘’"
_PREFIX = re.compile(r"^(title|session title)\s*:\s*", re.IGNORECASE)


def aux_settings(max_tokens: int) -> dict[str, Any]:
    """Model settings for a small auxiliary call: little or no thinking, bounded output."""
    return {"thinking": False, "max_tokens": max_tokens}


def sanitize_title(raw: str, limit: int = TITLE_MAX) -> str:
    """The first non-empty line, without quotes, markdown marks or a 'Title:' prefix, cut to ``limit``."""
    line = next((ln.strip() for ln in raw.splitlines() if ln.strip()), "")
    for _ in range(2):  # '"Title: …"', 'Title: "…"' and '**…**.' alike
        line = _PREFIX.sub("", line.strip(_WRAPPERS)).rstrip(".").strip(_WRAPPERS)
    line = " ".join(line.split())  # tabs, control characters, repeated spaces
    line = "".join(ch for ch in line if ch.isprintable())
    if len(line) > limit:
        cut = line[: limit - 1]
        if " " in cut[limit // 2 :]:
            cut = cut[: cut.rfind(" ")]
        line = cut.rstrip(" ,;:-") + "…"
    return line


async def generate_title(model: Any, first_prompt: str) -> str:
    """A one-line title (≤ 60 characters) for a session that began with ``first_prompt``.

    Raises whatever the model call raises; an empty string means the model gave nothing usable.
    """
    from pydantic_ai import Agent

    agent: Agent[None, str] = Agent(model, instructions=TITLE_INSTRUCTIONS, model_settings=aux_settings(200))  # type: ignore[arg-type]
    result = await agent.run(first_prompt.strip()[:PROMPT_CAP])
    return sanitize_title(result.output)

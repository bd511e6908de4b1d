"""The prompts a user submitted, per project (the input's Up-arrow history). A mixin of ``Store``."""

from __future__ import annotations

import os
import time
from typing import Any


class PromptHistory:
    """The prompt-history half of ``Store``."""

    def add_prompt(self, project: str | os.PathLike[str], text: str) -> None:
        """Remember a prompt the user submitted in ``project`` (blank prompts are ignored)."""
        if not text.strip():
            return
        with self.transaction() as conn:  # type: ignore[attr-defined]
            conn.execute(
                "INSERT INTO prompt_history (project, ts, text) VALUES (?,?,?)", (str(project), time.time(), text)
            )

    def prompt_history(self, project: str | os.PathLike[str], limit: int = 500) -> list[str]:
        """The last ``limit`` prompts of ``project``, oldest first, repeats in a row collapsed."""
        with self._reading() as conn:  # type: ignore[attr-defined]
            rows: list[Any] = conn.execute(
                "SELECT text FROM prompt_history WHERE project = ? ORDER BY id DESC LIMIT ?", (str(project), limit)
            ).fetchall()
        history: list[str] = []
        for (text,) in reversed(rows):
            if not history or history[-1] != text:
                history.append(text)
        return history

"""The per-step instruction builders a session and its subagents are given.

Each step's instructions are assembled from live state (``prompt.build_instructions``): the
active tools, the task list, memory, skills, a cached git summary, and the agent variant's
prompt, read per request so ``/agent`` can switch it on a live session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ketch.core.prompt import COMPACT_PROMPT, CachedGitSummary, PromptState, build_instructions


@dataclasses.dataclass
class InstructionSources:
    cwd: Path
    root: Path
    agent_prompt: Callable[[], str]
    """The current variant's prompt (the session's, once it exists)."""
    descriptions: dict[str, str]
    notebook: Any
    memory: Any
    skills: Any
    search: Any
    compact: bool = False
    """The compact profile (``context.small_window``): the short instructions, no memory or skills."""

    def __post_init__(self) -> None:
        self.git = CachedGitSummary(self.root)
        self.base = PromptState(
            cwd=self.cwd,
            root=self.root,
            agent_prompt="",
            task_list=self.notebook.render_for_prompt,
            memory=lambda: self.memory.render_for_prompt(4000),
            skills=self.skills.render_for_prompt,
            git=self.git,
        )

    def _listed(self, active: list[str], extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(name, self.descriptions.get(name, "")) for name in active] + extra

    def for_session(self, active: list[str]) -> str:
        self.git.new_step()
        state = dataclasses.replace(
            self.base, tools=self._listed(active, self.search.prompt_entries()), agent_prompt=self.agent_prompt()
        )
        if self.compact:
            state = dataclasses.replace(state, base_prompt=COMPACT_PROMPT, memory="", skills="")
        return build_instructions(state)

    def for_child(self, agent_prompt: str, task_list: Any, extra: list[tuple[str, str]]) -> Callable[[list[str]], str]:
        child_state = dataclasses.replace(self.base, agent_prompt=agent_prompt, task_list=task_list)

        def instructions_of_child(active: list[str]) -> str:
            return build_instructions(dataclasses.replace(child_state, tools=self._listed(active, extra)))

        return instructions_of_child

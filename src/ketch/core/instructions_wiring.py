"""The instructions a session and its subagents are given, and the volatile state beside them.

Each request's instructions are built from the session's choices (``prompt.build_instructions``:
the active tools, the agent variant's prompt read per request so ``/agent`` can switch it, the
project's instruction files, the skills), and stay byte-identical while those do. The volatile
state (date, a git summary run at most once per step, memory, the task list) is ``volatile``, which the
session sends as a reminder when it changed (``context.reminders``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from ketch.core.prompt import COMPACT_PROMPT, CachedGitSummary, PromptState, build_instructions, volatile_sections


@dataclasses.dataclass
class Instructions:
    """Called with the active tools: the instructions; ``volatile()``: the moving state now."""

    build: Callable[[list[str]], str]
    volatile: Callable[[], MutableMapping[str, str]]

    def __call__(self, active: list[str]) -> str:
        return self.build(active)


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
        self.for_session = Instructions(self._session_instructions, self._volatile(self.base))

    def _listed(self, active: list[str], extra: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(name, self.descriptions.get(name, "")) for name in active] + extra

    def _session_instructions(self, active: list[str]) -> str:
        state = dataclasses.replace(
            self.base, tools=self._listed(active, self.search.prompt_entries()), agent_prompt=self.agent_prompt()
        )
        if self.compact:
            state = dataclasses.replace(state, base_prompt=COMPACT_PROMPT, memory="", skills="")
        return build_instructions(state)

    def _volatile(self, state: PromptState) -> Callable[[], MutableMapping[str, str]]:
        def volatile() -> MutableMapping[str, str]:
            self.git.new_step()  # git runs at most once per step, when the git section is read
            return volatile_sections(state)

        return volatile

    def for_child(self, agent_prompt: str, task_list: Any, extra: list[tuple[str, str]]) -> Instructions:
        child_state = dataclasses.replace(self.base, agent_prompt=agent_prompt, task_list=task_list)

        def instructions_of_child(active: list[str]) -> str:
            return build_instructions(dataclasses.replace(child_state, tools=self._listed(active, extra)))

        return Instructions(instructions_of_child, self._volatile(child_state))

"""The compact profile for models whose window the default prompt and tools would crowd out.

At a 4k window ketch's default instructions and the schemas of all its tools take more than
the window holds beside the output cap, so no first prompt could ever be answered; at 8k they
leave little room for the work. Once the window is known (``providers.wiring`` reads it before
the first request), :class:`SmallWindowProfile` measures what the full profile sends (the
instructions as built for this step, the tool schemas offered, corrected by the server's
counts where known); when that is more than :data:`PROFILE_SHARE` of the window the session
switches to the compact profile, with a notice:

- the tools narrowed to :data:`COMPACT_TOOLS` (instructions and wire narrow together, through
  the session's ``tool_ceiling``);
- each tool's description cut to its first sentence, and the descriptions of its parameters
  dropped from the schema;
- the short instructions :data:`ketch.core.prompt.COMPACT_PROMPT` instead of the full ones.

Headless the compact profile is taken with a warning; the interactive app (and an ACP client) asks
first (the full profile may still be wanted, say for a model that will be given a larger window).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from pydantic_ai.capabilities import AbstractCapability

from ketch.context.budget import estimate_text, estimate_tools
from ketch.context.session_view import SessionView

PROFILE_SHARE = 0.5
"""The most of the window the full instructions and tool schemas may take."""

COMPACT_TOOLS = ("read_file", "edit_file", "write_file", "list_dir", "grep", "shell")
"""The tools of the compact profile: read, search, change, run."""

COMPACT, FULL = "Use the compact profile", "Keep the full profile"
"""The choices the interactive app offers (Esc takes the compact one: the full one cannot fit)."""

_SENTENCE = re.compile(r"(.+?[.!?])(?:\s|$)", re.S)


def first_sentence(text: str, limit: int = 120) -> str:
    """The first sentence of ``text`` (at most ``limit`` characters)."""
    text = " ".join((text or "").split())
    found = _SENTENCE.match(text)
    short = found[1] if found else text
    return short if len(short) <= limit else short[: limit - 1] + "…"


def _without_descriptions(schema: Any) -> Any:
    """A JSON schema with every ``description`` (and ``title``) left out, its structure whole."""
    if isinstance(schema, dict):
        return {k: _without_descriptions(v) for k, v in schema.items() if k not in ("description", "title")}
    if isinstance(schema, list):
        return [_without_descriptions(v) for v in schema]
    return schema


def compact_tool_def(tool_def: Any) -> Any:
    """``tool_def`` with a one-sentence description and parameters without descriptions."""
    return dataclasses.replace(tool_def, description=first_sentence(tool_def.description or ""),
                               parameters_json_schema=_without_descriptions(tool_def.parameters_json_schema))


@dataclasses.dataclass
class SmallWindowProfile(AbstractCapability[Any]):
    """Switches a session to the compact profile when its window is too small for the full one.

    ``session`` (the session's ``session_view.SessionView``), ``sources``
    (``core.instructions_wiring.InstructionSources``) and ``notify`` are attached once the
    session exists (``ServerBehaviour.attach``)."""

    session: SessionView | None = None
    sources: Any = None
    notify: Any = None
    active: bool = False
    _decided_for: int = 0

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    def full_tokens(self) -> int:
        """Estimated tokens of the full profile's instructions and tool schemas, as the
        server's counts corrected the estimate."""
        assert self.session is not None
        instructions, defs = self.session.full_profile()
        raw = estimate_text(instructions) + estimate_tools(defs)
        return self.session.compactor.calibration.scale(raw)

    async def before_run(self, ctx: Any) -> None:
        await self._decide()

    async def _decide(self) -> None:
        """Takes the compact profile (asking first when interactive) if the full one takes more
        than :data:`PROFILE_SHARE` of the window as known now; decided once per window figure."""
        session = self.session
        compactor = session.compactor if session is not None else None
        if session is None or compactor is None or self.sources is None or compactor.window == self._decided_for:
            return
        window = compactor.window
        self._decided_for = window
        if self.active:
            return  # once compact, the session stays so (a larger window later: /model starts afresh)
        full = self.full_tokens()
        if full <= window * PROFILE_SHARE:
            return
        why = (f"ketch's full instructions and tools take about {full:,} tokens of this model's {window:,}-token "
               f"window, more than {PROFILE_SHARE:.0%}")
        if session.interactive:
            answer = await session.ask("", f"{why}. Use the compact profile (tools {', '.join(COMPACT_TOOLS)}, "
                                       "short descriptions and instructions)?", [COMPACT, FULL])
            if answer == FULL:
                self._say("info", f"{why}; keeping the full profile, as asked")
                return
        self.active = True
        session.narrow_tools(COMPACT_TOOLS)
        self.sources.compact = True
        self._say("warning", (
            f"{why}; using the compact profile: tools {', '.join(COMPACT_TOOLS)} with short descriptions, and "
            "short instructions. For the full profile, run the model with a larger context (llama.cpp -c, Ollama num_ctx)"
        ))

    async def refit_after_refusal(self, request_context: Any) -> None:
        """After the server refused a request as too long and named a smaller window than ketch
        assumed (a server that names its window nowhere else, as llama-cpp-python's): decide the
        profile again for that window, and when it turns compact, make the request about to be
        retried compact as well (its tools and instructions were built for the full profile).
        Called by the request retry (``request_retries.ContextLengthRetry``) after it pruned."""
        if self.session is None or self.sources is None or self.active:
            return
        full_instructions, _ = self.session.full_profile()
        await self._decide()
        if not self.active:
            return
        instructions, defs = self.session.full_profile()
        names = {d.name for d in defs}
        params = request_context.model_request_parameters
        tools = [compact_tool_def(d) for d in params.function_tools if d.name in names]
        parts = [dataclasses.replace(p, content=instructions) if p.content == full_instructions else p
                 for p in (getattr(params, "instruction_parts", None) or [])]
        request_context.model_request_parameters = dataclasses.replace(params, function_tools=tools, instruction_parts=parts)
        self.session.note_break("compact profile, after the server named a smaller window in a refusal")

    def _say(self, level: str, text: str) -> None:
        if self.notify is not None:
            self.notify(level, text)

    async def prepare_tools(self, ctx: Any, tool_defs: list[Any]) -> list[Any]:
        if not self.active:
            return tool_defs
        return [compact_tool_def(d) for d in tool_defs]


__all__ = ["COMPACT_TOOLS", "PROFILE_SHARE", "SmallWindowProfile", "compact_tool_def", "first_sentence"]

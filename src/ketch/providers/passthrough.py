"""An OpenAI client that sends the Responses ``input`` list without re-walking it.

The openai SDK runs every request's parameters through ``async_maybe_transform``, which
walks each value against its TypedDict annotation to apply key aliases and value formats.
For ``input`` that annotation is a union of some twenty item types, and the SDK walks each
item against every member: on a long history it is most of a step's CPU (on 1,000 steps,
about 80 %), and grows with the history although nothing in it needs transforming: no
Responses input item type declares an alias or a format (``PropertyInfo(alias=…)`` or
``format=…``), and pydantic-ai builds the items as plain JSON-ready dicts.

``PassthroughOpenAI.responses.create`` therefore hands ``input`` (and ``tools``, a union of
tool types walked the same way, with no alias or format either) to the SDK as
``extra_body`` (public SDK API: merged into the JSON body as it is) and lets the transform
walk only the other, scalar parameters. The bytes on the wire are the same, save the key
order (tested). The upstream fix would be the same in the SDK: skip the walk for a type
whose members declare no alias or format (decidable once per type and cached).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from openai import AsyncOpenAI
from openai.resources.responses import AsyncResponses


_PASSED = ("input", "tools")
"""Parameters handed over as they are: the history, and the tool schemas (a union of tool
types walked member by member, the same for every request of a session)."""


class _PassthroughResponses(AsyncResponses):
    async def create(self, *, extra_body: Any = None, **params: Any) -> Any:
        extra = dict(extra_body) if isinstance(extra_body, dict) else {}
        for name in _PASSED:
            value = params.get(name)
            if isinstance(value, list) and name not in extra:
                extra[name] = params.pop(name)
        return await super().create(extra_body=extra or extra_body, **params)


class PassthroughOpenAI(AsyncOpenAI):
    """``AsyncOpenAI`` whose Responses ``input`` and ``tools`` skip the SDK's parameter transform."""

    @property
    def user_agent(self) -> str:
        """The SDK's own (it names the client class: this one must not show on the wire)."""
        return f"{AsyncOpenAI.__name__}/Python {self._version}"

    @cached_property
    def responses(self) -> AsyncResponses:  # type: ignore[override]
        return _PassthroughResponses(self)


__all__ = ["PassthroughOpenAI"]

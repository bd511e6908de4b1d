"""The environment a program ketch starts for the model or the user's extensions sees.

Shell commands, hooks and MCP servers get ketch's environment without the provider keys
ketch holds and without any variable whose name looks like a secret (``KEY``, ``SECRET``,
``TOKEN``, ``PASSWORD``, ``CREDENTIAL`` anywhere in the name, any case), unless the user's own
config keeps it by name (``[tools] keep_env``; a repository's config cannot add to it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ketch.config.keyring import SECRET_NAME  # what names a secret: the keyring's rule


@dataclass(frozen=True)
class ChildEnv:
    """What to take out of a child's environment, and what the user keeps in it."""

    key_names: frozenset[str] = frozenset()
    """Variables that hold a key ketch uses (a connection's ``api_key_env``, say), whatever their name."""
    key_values: frozenset[str] = frozenset()
    """The keys themselves: a variable holding one is removed under any name."""
    keep: frozenset[str] = frozenset()
    """Names the user's config keeps (``[tools] keep_env``)."""

    @classmethod
    def of(cls, key_names: Iterable[str] = (), key_values: Iterable[str] = (), keep: Iterable[str] = ()) -> ChildEnv:
        return cls(frozenset(key_names), frozenset(v for v in key_values if v), frozenset(keep))

    def withheld(self, name: str, value: str) -> bool:
        """Whether ``name=value`` stays out of a child's environment."""
        if name in self.keep:
            return False
        return name in self.key_names or value in self.key_values or SECRET_NAME.search(name) is not None

    def build(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (ketch's own environment by default) without what is withheld."""
        source = os.environ if base is None else base
        return {k: v for k, v in source.items() if not self.withheld(k, v)}


DEFAULT_CHILD_ENV = ChildEnv()
"""Without a session's key list: still no variable whose name looks like a secret."""

_held_by_process: list[ChildEnv] = [DEFAULT_CHILD_ENV]


def hold_for_process(policy: ChildEnv) -> None:
    """Make ``policy`` what every child started without one of its own gets (the keys are the
    process's: git run for the instructions, say, must not see them either)."""
    _held_by_process[0] = policy


def child_environment(policy: ChildEnv | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (ketch's environment by default) as ``policy`` allows, or as the process's policy does."""
    return (policy or _held_by_process[0]).build(base)

"""``/bashes``: the session's running background commands, and stopping one of them."""

from __future__ import annotations

from typing import Any

from ketch.protocol.exceptions import ConfigError


class BackgroundCommandsSlash:
    """A mixin of ``SlashActions`` (which provides ``session``)."""

    session: Any

    async def bashes(self, arg: str) -> str:
        """``/bashes``: the running background commands; ``/bashes kill ID`` (or a picked line) stops one."""
        session = self.session
        words = arg.split()
        if words and words[0] == "kill":
            words = words[1:]
        if not words:
            lines = session.background_lines()
            if not lines:
                return "No background command is running."
            return "Background commands (/bashes kill ID stops one):\n" + "\n".join("  " + line for line in lines)
        try:
            return str(await session.kill_background(words[0]))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


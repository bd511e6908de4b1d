"""The model, thinking and mode pickers of one ACP session (``ketch acp``).

``session/new`` answers with what is known without the network (the configured models and
the session's own); the connections' model lists load in the background and reach the editor
as a ``config_option_update`` when they arrive. Every change of model, thinking level or agent,
whether from the editor's picker or a slash command, is sent as the matching update.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Settings:
    """What the editor's pickers show: the agent (mode), the model and the thinking level."""

    mode: str
    model: str
    think: str

    @classmethod
    def of(cls, session: Any) -> Settings:
        return cls(session.variant.name, session.model_ref, session.config.think)


class Pickers:
    """The config options of one session; ``listed`` holds the model lists once loaded."""

    def __init__(self, session: Any, args: Any) -> None:
        from ketch.frontends.slash_actions import SlashActions

        self.session = session
        self.actions = SlashActions(lambda: session, args, Path(session.workspace.root))
        self.listed: list[str] | None = None
        self.loading: asyncio.Task[None] | None = None

    async def options(self) -> list[Any]:
        """The model and thinking options as they stand, without touching the network."""
        from acp.schema import SessionConfigOptionSelect, SessionConfigSelectOption

        session = self.session
        models = self.listed if self.listed is not None else await self.actions.choices("model-offline")
        models = list(dict.fromkeys([session.model_ref, *models]))
        levels = await self.actions.choices("think")
        return [
            SessionConfigOptionSelect(id="model", name="Model", category="model", type="select", current_value=session.model_ref,
                                      options=[SessionConfigSelectOption(value=m, name=m) for m in models]),
            SessionConfigOptionSelect(id="think", name="Thinking", category="thought_level", type="select",
                                      current_value=session.config.think,
                                      options=[SessionConfigSelectOption(value=v, name=v) for v in levels]),
        ]

    def load_lists(self, conn: Any, session_id: Any) -> None:
        """Fetch every connection's model list in the background, then update the picker."""

        async def load() -> None:
            try:
                listed = await self.actions.choices("model")
            except Exception:  # noqa: BLE001 - a list that cannot be had leaves the offline choices
                return
            self.listed = listed
            with contextlib.suppress(Exception):  # a client gone meanwhile
                await send_options(conn, session_id(), self)

        self.loading = asyncio.get_running_loop().create_task(load())

    def cancel(self) -> None:
        if self.loading is not None:
            self.loading.cancel()


async def send_options(conn: Any, session_id: str, pickers: Pickers) -> None:
    from acp.schema import ConfigOptionUpdate

    await conn.session_update(session_id=session_id, update=ConfigOptionUpdate(
        session_update="config_option_update", config_options=await pickers.options()))


async def send_changes(conn: Any, session_id: str, before: Settings, pickers: Pickers) -> None:
    """After anything that may have changed the session's settings: one update per picker moved."""
    from acp.helpers import update_current_mode

    after = Settings.of(pickers.session)
    if after.mode != before.mode:
        await conn.session_update(session_id=session_id, update=update_current_mode(after.mode))
    if (after.model, after.think) != (before.model, before.think):
        await send_options(conn, session_id, pickers)


def settle_quickly(args: Any) -> tuple[Any, Any, Any]:
    """(config, agent variant, connection) from the arguments, without building anything: what
    ``session/new`` answers with. A configuration error is the editor's error."""
    from acp import RequestError

    from ketch.core.agents import resolve_agent
    from ketch.protocol.exceptions import ConfigError, MissingKey
    from ketch.frontends.acp_auth import auth_methods
    from ketch.frontends.assemble import config_from_args, connection_from_args

    try:
        config = config_from_args(args, Path(args.cwd).resolve())
    except ConfigError as exc:
        raise RequestError.invalid_params({"message": str(exc)}) from None
    try:
        return config, resolve_agent(config.agent, config), connection_from_args(args, config)
    except MissingKey as exc:
        raise RequestError.auth_required({"message": str(exc),
                                          "authMethods": [m.id for m in auth_methods(config, args)]}) from None
    except ConfigError as exc:
        raise RequestError.invalid_params({"message": str(exc)}) from None


def early_options(config: Any, variant: Any, conn: Any) -> list[Any]:
    """The pickers before the session is built: the configured models and the session's own."""
    from acp.schema import SessionConfigOptionSelect, SessionConfigSelectOption

    from ketch.config.settings import THINK_LEVELS

    think = variant.think or config.think
    models = list(dict.fromkeys(m for m in [conn.ref, config.model or "", *config.models,
                                            *(a.model or "" for a in config.agents.values())] if m))
    return [
        SessionConfigOptionSelect(id="model", name="Model", category="model", type="select", current_value=conn.ref,
                                  options=[SessionConfigSelectOption(value=m, name=m) for m in models]),
        SessionConfigOptionSelect(id="think", name="Thinking", category="thought_level", type="select", current_value=think,
                                  options=[SessionConfigSelectOption(value=v, name=v) for v in THINK_LEVELS]),
    ]


async def restore_settings(session: Any, pickers: Pickers) -> None:
    """A loaded session goes on with the agent, model and thinking level it was left with."""
    store = session.store
    row = store.get_session(session.session_id) if store is not None else None
    if row is None:
        return
    actions = pickers.actions
    wanted = Settings(row.agent or session.variant.name, row.model or session.model_ref,
                      getattr(row, "think", "") or session.config.think)
    with contextlib.suppress(Exception):  # an agent since removed from config: the default stays
        if wanted.mode != session.variant.name:
            await actions.agent(wanted.mode)
    with contextlib.suppress(Exception):  # a model or connection since removed: the configured one stays
        if wanted.model != session.model_ref:
            await actions.model(wanted.model)
    with contextlib.suppress(Exception):
        if wanted.think != session.config.think:
            await actions.think(wanted.think)

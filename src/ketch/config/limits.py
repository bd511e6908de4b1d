"""Window and output limits in config: what a repo's own file may set (only lower ones), and
the limits a resolved connection carries (``Connection.context_window`` and the rest)."""

from __future__ import annotations

from typing import Any

Config = Any
"""``ketch.config.settings.Config`` (not imported: that module imports this one)."""


_LIMIT_KEYS = ("context_window", "max_output_tokens")


def take_limits(layer: dict[str, Any]) -> dict[str, int]:
    """Remove the window and output limits from a repo's config layer and return them as
    ceilings (``"connections.NAME.context_window"``, ``"models.REF.max_output_tokens"``,
    ``"compaction.context_window"``): a checked-out repo may shrink what ketch sends, never
    make it send more than the user's config and the model's own limits allow."""
    taken: dict[str, int] = {}
    for section in ("connections", "models"):
        for name, entry in (layer.get(section) or {}).items():
            if isinstance(entry, dict):
                for key in _LIMIT_KEYS:
                    if key in entry:
                        taken[f"{section}.{name}.{key}"] = entry.pop(key)
    compaction = layer.get("compaction")
    if isinstance(compaction, dict) and "context_window" in compaction:
        taken["compaction.context_window"] = compaction.pop("context_window")
    return taken


def _configured_limits(config: Config, name: str, model_ref: str) -> tuple[int | None, int | None, int | None, int | None]:
    """(context window, max output, window ceiling, output ceiling) configured for a connection
    and model: the model's entry wins over the connection's, which wins over ``[compaction]``;
    the ceilings are the lowest a repo's config set for any of them."""
    conn_cfg = config.connections.get(name)
    meta = config.models.get(model_ref)
    window = (meta and meta.context_window) or (conn_cfg and conn_cfg.context_window) or config.compaction.context_window
    output = (meta and meta.max_output_tokens) or (conn_cfg and conn_cfg.max_output_tokens)
    caps = config._limit_ceilings

    def ceiling(key: str, *scopes: str) -> int | None:
        values = [caps[f"{scope}.{key}"] for scope in scopes if f"{scope}.{key}" in caps]
        return min(values) if values else None

    return (
        window,
        output,
        ceiling("context_window", f"connections.{name}", f"models.{model_ref}", "compaction"),
        ceiling("max_output_tokens", f"connections.{name}", f"models.{model_ref}"),
    )


def limit_fields(config: Config, name: str, model_ref: str) -> dict[str, int | None]:
    window, output, window_cap, output_cap = _configured_limits(config, name, model_ref)
    return {"context_window": window, "max_output_tokens": output, "window_ceiling": window_cap, "output_ceiling": output_cap}


"""``[sandbox]`` in config: where commands ketch runs may write, and whether they reach the network."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, model_validator

from ketch.config.sandbox_limits import limit_project_layer

__all__ = ["SandboxConfig", "limit_project_layer"]


class SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    mode: Literal["read-only", "workspace-write", "full-access", "off"] = "workspace-write"
    """``off`` is another name for ``full-access``."""
    network: bool = False
    writable: list[str] = Field(default_factory=list)
    """Extra writable directories."""
    caches: list[str] = Field(default_factory=list)
    """Tool caches made writable by name (pip, uv, npm, yarn, pnpm, cargo, go, maven, gradle, pytest)."""
    mechanism: Literal["auto", "bubblewrap", "landlock", "none"] = "auto"
    """Force one mechanism; ``none`` uses none (every shell command then asks)."""
    _ignored: list[str] = PrivateAttr(default_factory=list)
    """Notices about a repository's sandbox/approval keys that were dropped as widening
    (``load_config`` passes them as the validation context's ``ignored``)."""

    @model_validator(mode="after")
    def _take_notices(self, info: ValidationInfo) -> Any:
        self._ignored = list((info.context or {}).get("ignored", []))
        return self

"""``[sandbox]`` in config: where commands ketch runs may write, and whether they reach the network."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["read-only", "workspace-write", "full-access", "off"] = "workspace-write"
    """``off`` is another name for ``full-access``."""
    network: bool = False
    writable: list[str] = Field(default_factory=list)
    """Extra writable directories."""
    caches: list[str] = Field(default_factory=list)
    """Tool caches made writable by name (pip, uv, npm, yarn, pnpm, cargo, go, maven, gradle, pytest)."""
    mechanism: Literal["auto", "bubblewrap", "landlock", "none"] = "auto"
    """Force one mechanism; ``none`` uses none (every shell command then asks)."""

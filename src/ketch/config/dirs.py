"""Where the user's own files live: the config dir and the data dir (each overridable)."""

from __future__ import annotations

import os
from pathlib import Path


def user_config_dir() -> Path:
    override = os.environ.get("KETCH_CONFIG_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("ketch"))


def user_data_dir() -> Path:
    override = os.environ.get("KETCH_DATA_DIR")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("ketch"))

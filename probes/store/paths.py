"""Where upwatch keeps its files on this machine: the data folder (history, audit log)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: Environment variable naming the data folder (overrides platformdirs' default).
DATA_DIR_ENV = "UPWATCH_DATA_DIR"


def default_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$UPWATCH_DATA_DIR``, else ``platformdirs.user_data_dir("upwatch")`` (``~/.local/share/upwatch``)."""
    env = os.environ if env is None else env
    if env.get(DATA_DIR_ENV):
        return Path(env[DATA_DIR_ENV]).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("upwatch"))

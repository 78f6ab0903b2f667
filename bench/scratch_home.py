"""A benchmark that drives loopctl and the real CLIs does so in a scratch home, never the user's."""

from __future__ import annotations

import os
from pathlib import Path


def isolate(home: Path) -> None:
    """This process and everything it starts see `home`: HOME, loopctl's folder, git's global
    config and identity, and the XDG folders the CLIs keep their state in."""
    os.environ.update(
        HOME=str(home),
        LOOPCTL_HOME=str(home / ".loopctl"),
        GIT_CONFIG_GLOBAL=str(home / ".gitconfig"),
        GIT_AUTHOR_NAME="b",
        GIT_AUTHOR_EMAIL="b@b",
        GIT_COMMITTER_NAME="b",
        GIT_COMMITTER_EMAIL="b@b",
    )
    for xdg in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        os.environ[xdg] = str(home / xdg.lower())

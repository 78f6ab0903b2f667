"""What no sandbox shows: the user's credential stores, browser profiles and histories (under
every home an agent could look in) and the host's sockets that hand out more than it should have.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from loopctl.sandbox.places import home_of, passwd_home, unique

# Credential stores hidden by default, relative to HOME (invariant 11). An agent file's
# `[sandbox] read = [...]` re-exposes one of them read-only.
CREDENTIAL_STORES: tuple[str, ...] = (
    ".ssh",
    ".gnupg",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
    ".password-store",
    ".local/share/keyrings",
    ".vault-token",
)

# Browser profiles and shell and REPL histories, relative to HOME: where a dashboard's link, a
# pasted key or a session cookie lingers. Hidden like the credential stores, and re-exposed the
# same way (`[sandbox] read`).
PRIVATE_HISTORIES: tuple[str, ...] = (
    ".mozilla",
    ".librewolf",
    ".config/google-chrome",
    ".config/google-chrome-beta",
    ".config/google-chrome-unstable",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/opera",
    ".cache/mozilla",
    ".cache/google-chrome",
    ".cache/chromium",
    "snap/firefox",
    "snap/chromium",
    ".var/app",  # Flatpak apps' data (Firefox, Chrome, …)
    "Library/Application Support/Google/Chrome",
    "Library/Application Support/Chromium",
    "Library/Application Support/Firefox",
    "Library/Application Support/BraveSoftware",
    "Library/Application Support/Microsoft Edge",
    "Library/Application Support/Vivaldi",
    "Library/Safari",
    "Library/Cookies",
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".sh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".rediscli_history",
    ".irb_history",
    ".lesshst",
    ".wget-hsts",
    ".viminfo",
    ".local/state/nvim/shada",
)

# Sockets that hand out more than the agent should have (a docker socket is root on the host;
# an ssh or gpg agent signs as the user). A read-only bind does not stop connect(), so hide them.
HOST_SOCKETS: tuple[str, ...] = (
    "/run/user",
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/podman",
    "/run/containerd",
)


def hidden_paths(env: Mapping[str, str]) -> list[Path]:
    """Credential stores, browser profiles and histories under every home the agent could
    look in, and the host's sockets."""
    homes = unique([home_of(env), Path.home(), *passwd_home()])
    hidden = [home / store for home in homes for store in (*CREDENTIAL_STORES, *PRIVATE_HISTORIES)]
    hidden += [Path(socket) for socket in HOST_SOCKETS]
    return unique(hidden)

"""MCP connectors for the agent CLIs: what Claude Code and Codex are told, and how secrets travel.

The CLI starts each stdio server itself, so whatever the server needs must pass through the
CLI. Putting the values in the CLI's environment would give them to the agent (its shell tool
inherits that environment); putting them in argv (`-c mcp_servers.x.env=…`) would show them in
`ps` and in logs. So the CLI is told to start
`python -m loopctl.backends.connector_launch FILE` instead:

- FILE is written by loopctl for one agent turn, mode 0600 in a 0700 folder of the attempt's
  run folder (never the worktree), and holds the server's argv and the values of its
  `env_allow`, read from loopctl's environment.
- The launcher reads FILE, deletes it, and execs the server with the base environment plus
  those values. The secret is on disk only until the CLI starts the server (a fraction of a
  second, before the model's first turn); what the CLI's config, argv and env hold is a path.
- After the turn loopctl removes the folder, whatever the CLI did.

A same-user process can still read a running server's /proc/PID/environ; only an OS sandbox
(the CLI's own, or a container) stops that. What this design guarantees is the contract: no
value in the agent's environment, argv, prompt, config file or logs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopctl.definitions.connectors import Connector, secret_values, server_env
from loopctl.secrets import Redactor

if TYPE_CHECKING:
    from loopctl.backends.base import AgentRequest

LAUNCHER = "loopctl.backends.connector_launch"
STAGED_VERSION = 1
# How long a CLI waits for a declared server to start before it drops the server's tools.
MCP_STARTUP_TIMEOUT_S = 120


def staging_dir(request: AgentRequest) -> Path:
    """The folder of one turn's connector files: beside the agent's logs, outside the worktree."""
    return request.stdout_path.parent / f"connectors-{request.role}"


def _write_private(path: Path, payload: dict[str, Any]) -> None:
    """Create `path` readable by this user only; its content never exists with wider rights."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)


def _stage(request: AgentRequest) -> dict[str, dict[str, Any]]:
    """Write each connector's launch file; answer how the CLI should reach each server."""
    folder = staging_dir(request)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700, parents=True)
    folder.chmod(0o700)  # mkdir's mode is filtered by the umask
    servers: dict[str, dict[str, Any]] = {}
    for connector in request.agent.connectors:
        if connector.url is not None:
            # A plain endpoint needs no secret (headers_env is refused for CLI backends).
            servers[connector.name] = {"type": "http", "url": connector.url}
            continue
        launch = folder / f"{connector.name}.json"
        _write_private(
            launch,
            {
                "version": STAGED_VERSION,
                "name": connector.name,
                "command": list(connector.command or ()),
                "env": server_env(connector),
            },
        )
        servers[connector.name] = {
            "type": "stdio",
            "command": sys.executable,
            "args": ["-m", LAUNCHER, str(launch)],
        }
    return servers


def claude_args(request: AgentRequest) -> list[str]:
    """`--mcp-config FILE --strict-mcp-config` for the agent's connectors ([] without any).

    Strict: only the declared servers run, not a `.mcp.json` the worktree (and so the agent)
    could have written.
    """
    if not request.agent.connectors:
        return []
    config = staging_dir(request).parent / f"{request.role}-mcp.json"
    servers = _stage(request)
    _write_private(config, {"mcpServers": servers})
    return ["--mcp-config", str(config), "--strict-mcp-config"]


def codex_args(request: AgentRequest) -> list[str]:
    """`-c mcp_servers.NAME.…=…` overrides for the agent's connectors ([] without any)."""
    if not request.agent.connectors:
        return []
    argv: list[str] = []
    for name, server in _stage(request).items():
        # Codex parses each value as TOML; a JSON string or list of strings is valid TOML.
        if server["type"] == "http":
            argv += ["-c", f"mcp_servers.{name}.url={json.dumps(server['url'])}"]
            continue
        argv += ["-c", f"mcp_servers.{name}.command={json.dumps(server['command'])}"]
        argv += ["-c", f"mcp_servers.{name}.args={json.dumps(server['args'])}"]
        # Codex gives a server 10 s to start; a sandboxed one on a busy machine needs longer.
        argv += ["-c", f"mcp_servers.{name}.startup_timeout_sec={MCP_STARTUP_TIMEOUT_S}"]
    return argv


def unstage(request: AgentRequest) -> None:
    """Remove one turn's connector files, including a launch file no server consumed."""
    if request.agent.connectors:
        shutil.rmtree(staging_dir(request), ignore_errors=True)


def redactor_for(request: AgentRequest) -> Redactor:
    """The request's redactor, plus the values its connectors receive."""
    values = secret_values(request.agent.connectors)
    if not values:
        return request.redactor
    return Redactor((*request.redactor.secrets, *values))


def cli_supports(connector: Connector) -> bool:
    """Whether an agent CLI can be given this connector without holding a credential itself."""
    return not connector.headers_env

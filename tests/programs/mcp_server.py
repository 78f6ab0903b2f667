"""A small real MCP server (stdio) for the connector tests, written with the `mcp` SDK.

Tools: `lookup` answers from a tiny table and proves it holds the secret $REF_PASSPHRASE by its
sha256 prefix (never the value); `delete` is the consequential one an `ask` pattern gates.
Each call appends {tool, arguments, secret_sha, env_names, pid} to $MCP_RECORD (JSON lines), so
a test can see what reached the server process and with which environment; $MCP_STARTED, when
set, gets one line per server start; $MCP_SLOW_START delays the start.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

# Before the SDK import, so the record is written as early as it can be: it proves the server
# was launched, and with its secret, before any tool call.
_started = os.environ.get("MCP_STARTED")
if __name__ == "__main__" and _started:
    secret = os.environ.get("REF_PASSPHRASE", "")
    digest = hashlib.sha256(secret.encode()).hexdigest()[:12] if secret else "none"
    with open(_started, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"pid": os.getpid(), "secret_sha": digest}) + "\n")

# $MCP_SLOW_START seconds before it answers: a server that starts slowly, as a sandboxed one does
# on a busy machine. The CLI must wait for it rather than run the turn without its tools.
if __name__ == "__main__" and os.environ.get("MCP_SLOW_START"):
    import time

    time.sleep(float(os.environ["MCP_SLOW_START"]))

from mcp.server.mcpserver import MCPServer  # noqa: E402

server = MCPServer("lookup-test")
TABLE = {"alpha": "first letter", "omega": "last letter"}


def _record(tool: str, arguments: dict[str, str]) -> str:
    secret = os.environ.get("REF_PASSPHRASE", "")
    digest = hashlib.sha256(secret.encode()).hexdigest()[:12] if secret else "none"
    path = os.environ.get("MCP_RECORD")
    if path:
        entry = {
            "tool": tool,
            "arguments": arguments,
            "secret_sha": digest,
            "env_names": sorted(os.environ),
            "pid": os.getpid(),
            "cwd": os.getcwd(),
        }
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
    return digest


@server.tool()
def lookup(key: str) -> str:
    """Look a key up in the reference table."""
    digest = _record("lookup", {"key": key})
    return f"{key}: {TABLE.get(key, 'not found')} (authenticated as sha {digest})"


@server.tool()
def delete(key: str) -> str:
    """Delete a key from the reference table (consequential)."""
    _record("delete", {"key": key})
    return f"deleted {key}"


if __name__ == "__main__":
    # A careless server logs what it was given: loopctl must redact its stderr log.
    print(f"lookup-test starting with {os.environ.get('REF_PASSPHRASE', '')}", file=sys.stderr)
    server.run()

"""`python -m loopctl.backends.connector_launch FILE`: start one MCP server for an agent CLI.

An agent CLI (Claude Code, Codex) runs this in place of a connector's command. It reads the
launch file loopctl wrote for this turn (backends.connectors), deletes it so the values it holds
are on disk no longer than needed, and replaces itself with the server: the server gets the
base environment plus its own declared variables, and the CLI's stdin/stdout as its transport.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from loopctl.secrets import build_env


def _fail(message: str) -> int:
    # stderr reaches the CLI's MCP log; stdout belongs to the protocol.
    print(f"loopctl connector: {message}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        return _fail("usage: python -m loopctl.backends.connector_launch LAUNCH_FILE")
    path = Path(args[0])
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return _fail(
            f"{path} was already used or removed: each launch file serves one start of its"
            " server during one agent turn"
        )
    except (OSError, ValueError) as exc:
        return _fail(f"cannot read {path}: {exc}")
    finally:
        # A CLI may start its servers inside its own sandbox (Codex: the run folder is read-only
        # there); loopctl removes the file at the end of the turn in any case.
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
    command = payload.get("command") if isinstance(payload, dict) else None
    values = payload.get("env") if isinstance(payload, dict) else None
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        return _fail(f"{path} names no command")
    if not isinstance(values, dict):
        values = {}
    env = build_env(extra={str(k): str(v) for k, v in values.items()})
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        return _fail(f"cannot start connector {payload.get('name')!r}: {command[0]}: {exc}")
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    raise SystemExit(main())

"""Run one command beside a scripted model server, optionally in a loopback-only network.

    [unshare -n --] python real_cli_harness.py --port P --control FILE --log FILE [--netns] -- CMD…

With --netns (the caller started us under `unshare -n`, as root) the loopback interface is
brought up and nothing else exists: the command can reach the model server and no other host.
The control file (JSON) names the script (real_cli_scripts.SCRIPTS), an API key the server
requires, raw replies to serve first to any request (`queue`) and raw replies to serve first to
the agent's own turns (`failures`: `{"status": 429}`, `{"hang": true}`), and a file whose
appearance the first agent turn waits for (`wait_for_file`). The log gets one
JSON line for the network interfaces seen and the census of who held the API key when the
first agent turn arrived (`with_census`), then one per request the server received.
The exit code is the command's.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `support`

from support.model_server import Reply, ScriptedModelServer
from support.real_cli_scripts import SCRIPTS, after_file, with_census, with_failures


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--control", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--netns", action="store_true")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    if args.netns:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    control = json.loads(args.control.read_text())
    script = SCRIPTS[control.get("script", "fix")]
    failures = [Reply(**reply) for reply in control.get("failures", [])]
    script = with_failures(script, failures)
    if control.get("wait_for_file"):
        script = after_file(script, Path(control["wait_for_file"]))
    census: list[dict[str, object]] = []
    if control.get("key"):
        script = with_census(script, census, control["key"])
    server = ScriptedModelServer(script, port=args.port)
    server.key = control.get("key")
    server.queue = [Reply(**reply) for reply in control.get("queue", [])]
    server.start()
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, timeout=args.timeout)
        code = done.returncode
    finally:
        server.stop()
        with args.log.open("w") as log:
            interfaces = sorted(name for _, name in socket.if_nameindex())
            log.write(json.dumps({"interfaces": interfaces, "census": census}) + "\n")
            for seen in server.seen:
                log.write(json.dumps(seen.record()) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())

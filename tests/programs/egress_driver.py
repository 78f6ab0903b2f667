"""Run the network-probing agent in a real sandbox behind loopctl's egress proxy (issue 25).

A program, not a function, so that a root test can run it as an ordinary account too. argv[1]
is JSON: {"worktree", "mode", "hosts", "routes": [[variable, upstream]], "secrets": [[name,
value, [hosts]]], "env": {...}, "steps": [...]}. It prints one JSON object: the agent's exit
code, output, and the targets the proxy refused.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from loopctl import process, sandbox
from loopctl.egress import EgressPolicy, HostPort, LentSecret, NetworkMode, Route

AGENT = Path(__file__).parents[1] / "agents" / "probes_network.py"

spec = json.loads(sys.argv[1])
policy = EgressPolicy(
    mode=NetworkMode(spec.get("mode", "proxy")),
    hosts=tuple(HostPort.parse(h) for h in spec.get("hosts", ())),
    routes=tuple(Route(variable, upstream) for variable, upstream in spec.get("routes", ())),
    secrets=tuple(
        LentSecret(name, value, tuple(HostPort.parse(h) for h in hosts))
        for name, value, hosts in spec.get("secrets", ())
    ),
)
worktree = Path(spec["worktree"])
box = sandbox.make_sandbox(root=worktree, worktree=worktree, egress=policy)
env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(worktree), **spec["env"]}
done = process.run(
    [sys.executable, "-I", str(AGENT), json.dumps(spec["steps"])],
    cwd=worktree,
    env=env,
    timeout=120,
    sandbox=box,
)
print(
    json.dumps(
        {
            "exit": done.exit_code,
            "stdout": done.stdout_tail,
            "stderr": done.stderr_tail,
            "refused": box.refused,
        }
    )
)

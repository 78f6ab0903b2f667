"""Run one program in the agent sandbox loopctl builds, as whoever runs this (root or `nobody`).

Usage: confined_run.py SPEC, SPEC a JSON object: root, worktree (the sandbox's checkout and
worktree), argv (the program), env (its environment; HOME among it), readable (optional, the
agent file's `[sandbox] read`), network (optional: proxy, the default, none or open). Prints
one JSON line: the program's exit code, stdout, stderr. The test's own interpreter or the
system one runs this, with loopctl importable: a copy of loopctl put first on PYTHONPATH (a
mutant) is the one that builds the sandbox.
"""

import json
import sys
from pathlib import Path

from loopctl import process, sandbox
from loopctl.egress import EgressPolicy, NetworkMode

spec = json.loads(sys.argv[1])
box = sandbox.make_sandbox(
    root=Path(spec["root"]),
    worktree=Path(spec["worktree"]),
    readable=spec.get("readable", []),
    egress=EgressPolicy(mode=NetworkMode(spec.get("network", "proxy"))),
)
done = process.run(
    spec["argv"], cwd=Path(spec["worktree"]), env=spec["env"], timeout=120, sandbox=box
)
print(json.dumps({"code": done.exit_code, "stdout": done.stdout_tail, "stderr": done.stderr_tail}))

"""Fake maker that fixes calc.add, then blocks until the test lets it finish.

argv: MARKER RELEASE [ONLY_TASK]
Fixes calc.py, writes its pid to MARKER (atomically), then waits (bounded) for RELEASE to exist.
With ONLY_TASK, tasks other than that one (LOOPCTL_TASK) are fixed at once without waiting.
"""

import json
import os
import sys
import time
from pathlib import Path

marker, release = Path(sys.argv[1]), Path(sys.argv[2])
only = sys.argv[3] if len(sys.argv) > 3 else None
sys.stdin.read()
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
if only is None or os.environ.get("LOOPCTL_TASK") == only:
    tmp = marker.with_name(marker.name + f".{os.getpid()}.tmp")
    tmp.write_text(f"{os.getpid()}\n")
    os.replace(tmp, marker)
    # Longer than the tests' safety net (300 s): an agent its runner failed to stop is still
    # running when a test looks for it, not gone of its own accord.
    deadline = time.monotonic() + 600
    while not release.exists():
        if time.monotonic() > deadline:
            print("never released", file=sys.stderr)
            sys.exit(1)
        time.sleep(0.02)
usage = {"input_tokens": 10, "output_tokens": 5}
print(json.dumps({"type": "result", "result": "fixed", "usage": usage, "total_cost_usd": 0.001}))

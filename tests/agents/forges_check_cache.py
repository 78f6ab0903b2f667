"""A maker that tries to forge a passing check: it writes a "green" entry for every tree into
loopctl's check cache in the main checkout's `.loop/cache/checks/`, rewrites the entries already
there, and fixes nothing.

argv: REPORT — a file it appends one line to per write it tried: "written PATH" or "denied PATH".
"""

import json
import subprocess
import sys
from pathlib import Path

report = Path(sys.argv[1])
sys.stdin.read()
common = subprocess.run(
    ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
    capture_output=True,
    text=True,
    check=True,
).stdout.strip()
folder = Path(common).parent / ".loop" / "cache" / "checks"
targets = [*sorted(folder.glob("*.json")), folder / ("f" * 64 + ".json")]
lines = []
for target in targets:
    forged = {"version": 1, "key": target.stem, "tree": "0" * 40, "passed": True, "commands": []}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(forged))
    except OSError:
        lines.append(f"denied {target}")
    else:
        lines.append(f"written {target}")
with report.open("a") as handle:
    handle.write("".join(line + "\n" for line in lines))
print(json.dumps({"type": "result", "result": "forged what it could", "is_error": False}))

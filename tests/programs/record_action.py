"""A custom delivery action that records that it ran: one JSON line appended to LEDGER.

Usage: record_action.py LEDGER NAME [--fail] [--kill-parent-before | --kill-parent-after]
The kill options SIGKILL loopctl (our parent) before or after the effect, as a crash would.
"""

import json
import os
import signal
import sys

ledger, name, *flags = sys.argv[1:]
if "--kill-parent-before" in flags:
    os.kill(os.getppid(), signal.SIGKILL)
    raise SystemExit(9)
entry = {
    "name": name,
    "run": os.environ.get("LOOPCTL_RUN"),
    "task": os.environ.get("LOOPCTL_TASK"),
    "commit": os.environ.get("LOOPCTL_COMMIT"),
    "cwd": os.getcwd(),
    "secret_seen": any("SECRET" in key for key in os.environ),
}
with open(ledger, "a", encoding="utf-8") as out:
    out.write(json.dumps(entry) + "\n")
if "--kill-parent-after" in flags:
    os.kill(os.getppid(), signal.SIGKILL)
    raise SystemExit(9)
if "--fail" in flags:
    print("deploy failed: the target said no", file=sys.stderr)
    raise SystemExit(3)
print(f"{name} done")

"""Fake maker that never finishes, with a child that never finishes either.

argv: PIDFILE [--stubborn-child | --leave-child]
  (default)        leader and child sleep forever
  --stubborn-child the child ignores SIGTERM, so only SIGKILL ends it
  --leave-child    the leader exits 0 at once, leaving the child running in its process group
Writes "LEADER_PID CHILD_PID" to PIDFILE (atomically) once both are running.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

pidfile = Path(sys.argv[1])
mode = sys.argv[2] if len(sys.argv) > 2 else ""
ready = pidfile.with_name(pidfile.name + ".child-ready")
child_code = (
    "import signal, sys, time\n"
    + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if mode == "--stubborn-child" else "")
    + "open(sys.argv[1], 'w').close()\n"
    + "while True: time.sleep(60)\n"
)
child = subprocess.Popen(
    [sys.executable, "-c", child_code, str(ready)],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
deadline = time.monotonic() + 30
while not ready.exists() and time.monotonic() < deadline:
    time.sleep(0.01)
tmp = pidfile.with_name(pidfile.name + ".tmp")
tmp.write_text(f"{os.getpid()} {child.pid}\n")
os.replace(tmp, pidfile)
if mode == "--leave-child":
    sys.exit(0)
while True:
    time.sleep(60)

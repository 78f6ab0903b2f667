"""Fake maker that never finishes, with a child that never finishes either.

argv: PIDFILE [--stubborn-child | --leave-child]
  (default)        leader and child sleep forever
  --stubborn-child the child ignores SIGTERM, so only SIGKILL ends it
  --leave-child    the leader exits 0 at once, leaving the child running in its process group
Writes "LEADER_PID CHILD_PID" to PIDFILE (atomically) once both are running.

The child is a fork, not a second interpreter: the tree is up within milliseconds of the
leader starting, so even a short agent timeout on a loaded machine finds it whole.
"""

import os
import signal
import sys
import time
from pathlib import Path

pidfile = Path(sys.argv[1])
mode = sys.argv[2] if len(sys.argv) > 2 else ""
if mode == "--stubborn-child":
    # Ignored before the fork, so no SIGTERM can reach the child before it ignores it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = os.fork()
if child == 0:
    # Off loopctl's pipes, like a daemon: only the process group ties it to the agent.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    while True:
        time.sleep(60)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
tmp = pidfile.with_name(pidfile.name + ".tmp")
tmp.write_text(f"{os.getpid()} {child}\n")
os.replace(tmp, pidfile)
if mode == "--leave-child":
    sys.exit(0)
while True:
    time.sleep(60)

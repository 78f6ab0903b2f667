"""Start a leader, a child and a grandchild that wait forever; record all three pids.

usage: sleepy_tree.py PIDFILE MODE [FIFO]

The child ignores SIGTERM, the grandchild does not. None lives for ever: each dies of SIGALRM
after a while, the leader first. Once the tree is up and PIDFILE written (atomically, one pid a
line: leader, child, grandchild), the leader prints "tree up", writes "ready" to FIFO if one is
given (so a test can wait for the tree instead of guessing how long it takes), and acts on MODE:

    hang      wait forever (SIGTERM kills it)
    notify    the same as hang (kept for a FIFO that only says the tree is up)
    stubborn  ignore SIGTERM (already before "ready"), then wait forever
    exit      exit 0 at once, leaving child and grandchild behind
    sigint    send SIGINT to its own parent (the test), then wait forever
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

# "Forever" ends by SIGALRM so that a broken process.run makes a test fail instead of hanging.
# The leader goes first: a run() that never kills the group then returns while the child and
# grandchild still live, and the test sees them. Both outlive the tests' safety net (300 s), so a
# test that waits that long for the tree to die still fails when nothing killed it.
LEADER_LIFETIME = 400
DESCENDANT_LIFETIME = 600


def forever(seconds: int = DESCENDANT_LIFETIME) -> None:
    signal.alarm(seconds)
    threading.Event().wait()


def grandchild() -> None:
    # Ignored signals survive exec, so undo what the child set.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    print(os.getpid(), flush=True)
    forever()


def child() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    proc = subprocess.Popen(
        [sys.executable, __file__, "-", "grandchild"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    grandchild_pid = proc.stdout.readline().strip()
    print(os.getpid(), flush=True)
    print(grandchild_pid, flush=True)
    forever()


def leader(pidfile: str, mode: str, fifo: str | None) -> None:
    proc = subprocess.Popen(
        [sys.executable, __file__, "-", "child"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    pids = [str(os.getpid()), proc.stdout.readline().strip(), proc.stdout.readline().strip()]
    tmp = pidfile + ".tmp"
    with open(tmp, "w") as handle:
        handle.write("\n".join(pids) + "\n")
    os.replace(tmp, pidfile)
    if mode == "stubborn":
        # Before "ready": a test that times the run out as soon as the tree is up must find
        # SIGTERM already ignored.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("tree up", flush=True)
    if fifo is not None:
        with open(fifo, "w") as handle:
            handle.write("ready\n")
    if mode == "exit":
        return
    if mode == "sigint":
        os.kill(os.getppid(), signal.SIGINT)
    forever(LEADER_LIFETIME)


def main() -> None:
    role = sys.argv[2]
    if role == "grandchild":
        grandchild()
    elif role == "child":
        child()
    else:
        leader(sys.argv[1], role, sys.argv[3] if len(sys.argv) > 3 else None)


if __name__ == "__main__":
    main()

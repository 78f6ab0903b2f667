"""Start a leader, a child and a grandchild that wait forever; record all three pids.

usage: sleepy_tree.py PIDFILE MODE [FIFO]

The child ignores SIGTERM, the grandchild does not. None lives for ever: each dies of SIGALRM
after a while, the leader first. Once the tree is up and PIDFILE written (atomically, one pid a
line: leader, child, grandchild), the leader acts on MODE:

    hang      wait forever (SIGTERM kills it)
    stubborn  ignore SIGTERM, then wait forever
    exit      exit 0 at once, leaving child and grandchild behind
    sigint    send SIGINT to its own parent (the test), then wait forever
    notify    write "ready" to FIFO, then wait forever
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

# "Forever" ends by SIGALRM so that a broken process.run makes a test fail instead of hanging.
# The leader goes first: a run() that never kills the group then returns while the child and
# grandchild still live, and the test sees them.
LEADER_LIFETIME = 20
DESCENDANT_LIFETIME = 40


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
    print("tree up", flush=True)
    if mode == "exit":
        return
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif mode == "sigint":
        os.kill(os.getppid(), signal.SIGINT)
    elif mode == "notify":
        assert fifo is not None
        with open(fifo, "w") as handle:
            handle.write("ready\n")
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

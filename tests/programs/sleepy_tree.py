"""Start a leader, a child and a grandchild that wait forever; record all three pids.

usage: sleepy_tree.py PIDFILE MODE [FIFO]

The child ignores SIGTERM, the grandchild does not. Once the tree is up and PIDFILE written
(atomically, one pid a line: leader, child, grandchild), the leader acts on MODE:

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


def forever() -> None:
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
    forever()


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

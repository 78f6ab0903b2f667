"""Hostile maker: a double-forked, unmarked grandchild runs a human's loopctl command.

Usage: orphans_human_command.py RECORD REPO LOOPCTL-ARGS...

The agent forks a child that forks again and exits at once: the grandchild is orphaned (its
parent is no longer the agent), then replaces itself with a fresh copy of this program whose
environment has no LOOPCTL_* variable (so its /proc/PID/environ carries no mark either), which
runs `loopctl LOOPCTL-ARGS` while the agent is still running. Only the process group and session
it keeps from the agent tie it to the agent. The result (exit code, stderr, and whether it was
orphaned) is appended to RECORD as a JSON line.
"""

import json
import os
import subprocess
import sys
import time

ORPHAN = "--as-orphan"


def run_as_orphan(record: str, repo: str, middle: int, agent: int, args: list[str]) -> None:
    """The unmarked orphan: run loopctl (bounded: a command let through may wait for the run
    this agent is part of; its output goes to a file, which nothing it starts holds open)."""
    with open(record + ".stderr", "w+", encoding="utf-8") as err:
        try:
            code: int | None = subprocess.run(
                [sys.executable, "-m", "loopctl", *args], cwd=repo, stdout=subprocess.DEVNULL,
                stderr=err, stdin=subprocess.DEVNULL, timeout=30,
            ).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            code = None  # it was let through, and did not finish within 30 s
        err.seek(0)
        stderr = err.read()
    entry = {
        "code": code,
        "stderr": stderr,
        "orphaned": os.getppid() != middle,
        "parent": os.getppid(),
        "agent": agent,
        "group": os.getpgid(0),
        "session": os.getsid(0),
    }
    with open(record, "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")


if sys.argv[1] == ORPHAN:
    record, repo, middle, agent, *args = sys.argv[2:]
    run_as_orphan(record, repo, int(middle), int(agent), args)
    raise SystemExit(0)

record, repo, *args = sys.argv[1:]
if not sys.stdin.isatty():
    sys.stdin.read()
clean = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
clean["LOOPCTL_HOME"] = os.environ.get("LOOPCTL_HOME", "")  # the same cache, not a mark
agent = os.getpid()
ended_r, ended_w = os.pipe()
middle = os.fork()
if middle == 0:
    os.close(ended_r)
    # Taken here, not by the grandchild: once the middle process has exited, the grandchild's
    # getppid() already names whoever adopted it.
    middle_pid = os.getpid()
    if os.fork() == 0:
        # Wait for the middle process to be gone, so the agent is no longer an ancestor (the
        # condition is polled; the deadline only bounds a broken machine).
        deadline = time.monotonic() + 60
        while os.getppid() == middle_pid and time.monotonic() < deadline:
            time.sleep(0.01)
        os.set_inheritable(ended_w, True)  # held until the orphan ends: the agent waits on it
        argv = [sys.executable, __file__, ORPHAN, record, repo, str(middle_pid), str(agent)]
        os.execve(sys.executable, [*argv, *args], clean)
    os._exit(0)
os.close(ended_w)
os.waitpid(middle, 0)
os.read(ended_r, 1)  # end of file when the orphan has finished: the agent runs till then
print(json.dumps({"type": "result", "result": "tried an orphaned loopctl " + " ".join(args)}))

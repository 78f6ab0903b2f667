"""Hostile maker: tries to run a human's loopctl command (e.g. `inbox approve ID`) itself.

Usage: runs_human_commands.py RECORD REPO MODE LOOPCTL-ARGS...

MODE says how it hides: `direct` runs loopctl as its child; `unset` through
`env -u LOOPCTL_RUN -u LOOPCTL_ROLE`; `grandchild` starts a child without any LOOPCTL_* variable,
which does `unset`; `exec` first replaces itself (same pid) with a copy of itself whose
environment has no LOOPCTL_* variable, which does `direct`; `exec-loopctl` replaces itself with
loopctl outright. Each loopctl it ran is appended to RECORD as a JSON line (exit code, stderr).
"""

import json
import os
import subprocess
import sys

record, repo, mode, *args = sys.argv[1:]
if not sys.stdin.isatty():
    sys.stdin.read()
loopctl = [sys.executable, "-m", "loopctl", *args]
clean = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
clean["LOOPCTL_HOME"] = os.environ.get("LOOPCTL_HOME", "")  # the same cache, not a mark


def run_and_record(argv: list[str], env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        argv, cwd=repo, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    entry = {"mode": mode, "args": args, "code": done.returncode, "stderr": done.stderr}
    with open(record, "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")


if mode == "direct":
    run_and_record(loopctl)
elif mode == "unset":
    run_and_record(["env", "-u", "LOOPCTL_RUN", "-u", "LOOPCTL_ROLE", *loopctl])
elif mode == "grandchild":
    subprocess.run(
        [sys.executable, __file__, record, repo, "unset", *args],
        env=clean,
        stdin=subprocess.DEVNULL,
        check=False,
    )
elif mode == "exec":
    os.execve(sys.executable, [sys.executable, __file__, record, repo, "direct", *args], clean)
elif mode == "exec-loopctl":
    os.chdir(repo)
    os.execve(sys.executable, loopctl, clean)
print(json.dumps({"type": "result", "result": f"tried {mode}: loopctl {' '.join(args)}"}))

"""Run a command, SIGKILL it once a file appears, then run it again; exit with the rerun's code.

    python kill_rerun.py MARK [GLOB TEXT] -- CMD…

The real-CLI resume test runs this beside the scripted model server (real_cli_harness.py): the
server creates MARK while it holds the agent's request between two tool calls, so loopctl dies
mid-turn, as with `kill -9`, and the second run must resume the CLI's session. With GLOB and
TEXT the kill waits, after MARK, for a file matching GLOB to hold TEXT: the CLI has written the
first call's result to its session (Claude Code writes its transcript a moment after sending
the next request; a kill before that resumes without the call).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# Only keeps a broken run from hanging for ever; what this waits on is the file.
SAFETY_NET = 300.0


def main() -> int:
    split = sys.argv.index("--")
    mark, wanted, command = Path(sys.argv[1]), sys.argv[2:split], sys.argv[split + 1 :]
    first = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + SAFETY_NET
    while not ready(mark, wanted) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not ready(mark, wanted):
        first.kill()
        print(
            f"kill_rerun: {mark} {wanted} never held (first run ended {first.wait()})",
            file=sys.stderr,
        )
        return 97
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    print("kill_rerun: killed the first run", file=sys.stderr)
    return subprocess.run(command, stdin=subprocess.DEVNULL).returncode


def ready(mark: Path, wanted: list[str]) -> bool:
    if not mark.exists():
        return False
    if not wanted:
        return True
    pattern, text = wanted
    for path in Path("/").glob(pattern.lstrip("/")):
        try:
            if text in path.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


if __name__ == "__main__":
    sys.exit(main())

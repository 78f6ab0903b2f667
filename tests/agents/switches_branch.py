"""Fake maker that fixes calc.add but leaves the worktree off loopctl's branch (argv: MODE).

MODE "detach": detached HEAD at the same commit; MODE "branch": a new branch of its own.
"""

import subprocess
import sys
from pathlib import Path

sys.stdin.read()
mode = sys.argv[1]
if mode == "detach":
    subprocess.run(["git", "checkout", "-q", "--detach"], check=True)
else:
    subprocess.run(["git", "checkout", "-q", "-b", "agent-own-branch"], check=True)
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print(f"fixed calc.py after switching ({mode})")

"""Fake maker for liveness (issue 30): hangs, or keeps working without printing.

argv: MODE [SECONDS]
  silent  says nothing and does nothing, until killed
  talks   prints "reading calc.py, then thinking" (flushed), then does nothing until killed
  writes  prints nothing but rewrites notes.txt in its worktree every 50 ms for SECONDS (4),
          then fixes calc.add and prints its result: file changes are progress, not a stall

A hanging mode gives up by itself after 120 s (exit 1): a safety net, never reached when
loopctl ends it as stalled.
"""

import sys
import time
from pathlib import Path

mode = sys.argv[1]
sys.stdin.read()
if mode == "talks":
    print("working on calc.py", flush=True)
    print("reading calc.py, then thinking", flush=True)
if mode in ("silent", "talks"):
    time.sleep(120)
    sys.exit(1)
notes = Path("notes.txt")
end = time.monotonic() + (float(sys.argv[2]) if len(sys.argv) > 2 else 4)
count = 0
while time.monotonic() < end:
    count += 1
    notes.write_text(f"step {count}\n")
    time.sleep(0.05)
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print(f"fixed add() after {count} steps")

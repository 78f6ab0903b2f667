"""Fake maker: appends each prompt it gets to argv[1], writes attempt-N.txt, fixes nothing.

Attempts build on each other in one worktree; the next prompt should name what this one changed.
"""

import json
import os
import sys
from pathlib import Path

prompt = sys.stdin.read()
with open(sys.argv[1], "a", encoding="utf-8") as seen:
    seen.write(prompt + "\n=====\n")
attempt = os.environ.get("LOOPCTL_ATTEMPT", "0")
Path(f"attempt-{attempt}.txt").write_text(f"notes of attempt {attempt}\n")
print(json.dumps({"type": "result", "result": "wrote notes", "is_error": False}))

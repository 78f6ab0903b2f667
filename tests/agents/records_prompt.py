"""Fake maker: appends each prompt it gets to argv[1] (outside the worktree), then fixes add()."""

import json
import sys
from pathlib import Path

prompt = sys.stdin.read()
with open(sys.argv[1], "a", encoding="utf-8") as seen:
    seen.write(prompt + "\n=====\n")
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print(json.dumps({"type": "result", "result": "fixed add()", "is_error": False}))

"""Hostile maker: fixes calc.add, then leaves a FIFO where loopctl reads a file after the turn
(each path its argument names, relative to the worktree): no writer ever comes, so an open(2)
of it without O_NONBLOCK waits for ever, and loopctl with it."""

import json
import os
import sys
from pathlib import Path

sys.stdin.read()
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
for name in sys.argv[1:]:
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    os.mkfifo(path)
result = {
    "type": "result",
    "result": "fixed add() in calc.py",
    "is_error": False,
    "usage": {"input_tokens": 1000, "output_tokens": 200},
    "total_cost_usd": 0.01,
}
print(json.dumps(result))

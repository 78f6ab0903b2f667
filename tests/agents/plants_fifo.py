"""Hostile maker: fixes calc.add as fixer.py does, then leaves a FIFO where loopctl reads a
file after the turn (each path its argument names, relative to the worktree): no writer ever
comes, so an open(2) of it without O_NONBLOCK waits for ever, and loopctl with it."""

import os
import runpy
import sys
from pathlib import Path

runpy.run_path(str(Path(__file__).with_name("fixer.py")), run_name="__main__")
for name in sys.argv[1:]:
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    os.mkfifo(path)

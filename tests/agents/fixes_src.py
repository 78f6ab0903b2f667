"""Fake maker for a src-layout project: fixes srcpkg.core.add in the worktree it runs in."""

import sys
from pathlib import Path

sys.stdin.read()
core = Path("src/srcpkg/core.py")
core.write_text(core.read_text().replace("a - b", "a + b"))
print("fixed add() in src/srcpkg/core.py")

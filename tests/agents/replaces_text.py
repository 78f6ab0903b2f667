"""Fake maker for the corpus's real projects: replaces OLD with NEW in one file of its worktree.

argv: PATH OLD NEW. Given the bug's line and the original, it is a fixer; given a test's
expectation and a weaker one, it is a maker that "passes" by editing the test.
"""

import sys
from pathlib import Path

sys.stdin.read()
path, old, new = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
text = path.read_text()
if old not in text:
    sys.exit(f"{path} does not contain {old!r}")
path.write_text(text.replace(old, new, 1))
print(f"edited {path}")

"""Fake maker that rewrites the loop's own rules (argv: a repo-relative path), then fixes calc."""

import sys
from pathlib import Path

sys.stdin.read()
target = Path(sys.argv[1])
target.parent.mkdir(parents=True, exist_ok=True)
with target.open("a") as handle:
    handle.write("\n# the maker was here: max_iterations = 1000\n")
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print(f"edited {target} and calc.py")

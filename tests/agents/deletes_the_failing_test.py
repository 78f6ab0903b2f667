"""Fake maker that "passes" by deleting the failing test case instead of fixing the code."""

import sys
from pathlib import Path

sys.stdin.read()
for test in Path("tests").glob("test_*.py"):
    test.write_text("def test_nothing():\n    pass\n")
print("removed the failing test")

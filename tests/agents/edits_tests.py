"""Fake maker that "fixes" the failure by weakening the test instead of the code."""

import sys
from pathlib import Path

sys.stdin.read()
test = Path("tests/test_calc.py")
test.write_text(test.read_text().replace("== 5", "== -1"))
print("made the test pass")

"""Fake maker that "passes" by making a failing test skip itself, touching no test file.

calc.py is not protected: its add() now skips the test that calls it, and mul() stays.
"""

import sys
from pathlib import Path

sys.stdin.read()
Path("calc.py").write_text(
    "def add(a, b):\n"
    "    import pytest\n\n"
    "    pytest.skip('add() is being rewritten')\n\n\n"
    "def mul(a, b):\n"
    "    return a * b\n"
)
print("add() now skips its test")

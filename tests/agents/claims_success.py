"""A maker that changes nothing useful yet says it fixed everything and that all tests pass.

calc.add stays broken (a comment is all it adds), so the check fails: what it claims and what
loopctl measured must disagree wherever a human looks.
"""

import json
import sys
from pathlib import Path

sys.stdin.read()
calc = Path("calc.py")
calc.write_text(calc.read_text() + "# looked at it\n")
summary = "Fixed add() in calc.py and src/helpers.py; all tests pass."
print(json.dumps({"type": "result", "result": summary, "is_error": False}))

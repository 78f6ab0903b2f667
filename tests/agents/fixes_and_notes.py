"""Fake maker: fixes calc.add, and writes "kept" to the file its argument names (a place its
agent file declares writable)."""

import json
import sys
from pathlib import Path

sys.stdin.read()
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
Path(sys.argv[1]).write_text("kept")
result = {
    "type": "result",
    "result": "fixed add() in calc.py",
    "is_error": False,
    "usage": {"input_tokens": 1000, "output_tokens": 200},
    "total_cost_usd": 0.01,
}
print(json.dumps(result))

"""Fake maker: fixes calc.add, then repeats a secret from its environment (loopctl redacts it)."""

import json
import os
import sys
from pathlib import Path

sys.stdin.read()
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
said = f"fixed add() in calc.py; my token is {os.environ.get('TRACE_CANARY_TOKEN', '')}"
print(said)
result = {
    "type": "result",
    "result": said,
    "is_error": False,
    "usage": {"input_tokens": 1000, "output_tokens": 200},
    "total_cost_usd": 0.01,
}
print(json.dumps(result))

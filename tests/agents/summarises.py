"""Fake maker: fixes calc.add and ends with a long summary laced with terminal escapes.

Its summary becomes the commit message body: the escapes must go and the length must be cut.
"""

import json
import sys
from pathlib import Path

sys.stdin.read()
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
summary = "\x1b[2J\x1b[31mfixed add()\x1b[0m: it subtracted b instead of adding it\n\n" + "\n".join(
    f"detail {n}" for n in range(80)
)
print(json.dumps({"type": "result", "result": summary, "is_error": False}))

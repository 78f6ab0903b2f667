"""Fake maker that prints as it works: a line, a wait the test ends, another line, a wait, a fix.

argv: SIGNALS. Prints "reading calc.py", writes SIGNALS/said-1 and waits (bounded) for
SIGNALS/go-1; prints "editing calc.py", writes SIGNALS/said-2 and waits for SIGNALS/go-2; fixes
calc.add and ends with a result line. Each print is flushed: a live view sees it at once.
"""

import json
import os
import sys
import time
from pathlib import Path

signals = Path(sys.argv[1])
sys.stdin.read()


def say_then_wait(n: int, text: str) -> None:
    print(text, flush=True)
    tmp = signals / f"said-{n}.{os.getpid()}.tmp"
    tmp.write_text(f"{time.time()}\n")
    os.replace(tmp, signals / f"said-{n}")
    deadline = time.monotonic() + 600
    while not (signals / f"go-{n}").exists():
        if time.monotonic() > deadline:
            sys.exit("never released")
        time.sleep(0.02)


say_then_wait(1, "reading calc.py")
say_then_wait(2, "editing calc.py")
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print(json.dumps({"type": "result", "result": "fixed add()", "is_error": False}), flush=True)

"""Fake maker that says something, then blocks until the test lets it finish the fix.

argv: RELEASE. Prints "reading calc.py" at once (flushed), waits (bounded) for RELEASE to exist,
then fixes calc.add and prints "fixed add".
"""

import sys
import time
from pathlib import Path

release = Path(sys.argv[1])
sys.stdin.read()
print("reading calc.py", flush=True)
print("a warning on stderr", file=sys.stderr, flush=True)
deadline = time.monotonic() + 60
while not release.exists():
    if time.monotonic() > deadline:
        print("never released", file=sys.stderr)
        sys.exit(1)
    time.sleep(0.02)
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print("fixed add", flush=True)

"""Fake maker for the corpus: replaces OLD with NEW in one file, then blocks until released.

argv: MARKER RELEASE PATH OLD NEW. After its edit it writes its pid to MARKER (atomically) and
waits, bounded, for RELEASE to exist: the window in which a test acts as the operator (say, a
commit on main) while the agent's turn is still open.
"""

import os
import sys
import time
from pathlib import Path

marker, release = Path(sys.argv[1]), Path(sys.argv[2])
path, old, new = Path(sys.argv[3]), sys.argv[4], sys.argv[5]
sys.stdin.read()
text = path.read_text()
if old not in text:
    sys.exit(f"{path} does not contain {old!r}")
path.write_text(text.replace(old, new, 1))
tmp = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
tmp.write_text(f"{os.getpid()}\n")
os.replace(tmp, marker)
# Bounded so a test that dies before releasing leaves no agent behind for long; generous
# because the test waits on a busy machine.
deadline = time.monotonic() + 300
while not release.exists():
    if time.monotonic() > deadline:
        sys.exit("never released")
    time.sleep(0.02)
print(f"edited {path}")

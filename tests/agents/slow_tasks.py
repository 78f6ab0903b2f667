"""Fake `[tasks] command`: writes its pid to MARKER, waits (bounded) for RELEASE, prints tasks.

argv: MARKER RELEASE TASK_ID...
"""

import json
import os
import sys
import time
from pathlib import Path

marker, release, ids = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
tmp = marker.with_name(marker.name + f".{os.getpid()}.tmp")
tmp.write_text(f"{os.getpid()}\n")
os.replace(tmp, marker)
deadline = time.monotonic() + 60
while not release.exists():
    if time.monotonic() > deadline:
        sys.exit(1)
    time.sleep(0.02)
print(json.dumps([{"id": task_id, "title": f"task {task_id}"} for task_id in ids]))

"""Fake maker that attacks its loop's own definitions, then fixes calc (issue 31, item 3).

argv[1] is a JSON list of operations, each run in the worktree in order:
  {"op": "append", "path": P, "text": T}   append T to P (made with its folders if missing)
  {"op": "write", "path": P, "text": T}    write T as P
  {"op": "link", "path": P, "target": T}   make P a symbolic link to T (P removed first)
"""

import json
import shutil
import sys
from pathlib import Path

sys.stdin.read()
for step in json.loads(sys.argv[1]):
    path = Path(step["path"])
    if step["op"] in ("append", "write"):
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a" if step["op"] == "append" else "w") as handle:
            handle.write(step["text"])
    elif step["op"] == "link":
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(step["target"])
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print(f"did {len(json.loads(sys.argv[1]))} operation(s) and fixed calc.py")

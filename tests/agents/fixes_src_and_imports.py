"""Fake maker for a src-layout project: fixes srcpkg.core.add, then asks the checkout's venv
(the one a user runs `pytest` with) where `srcpkg` comes from, and writes that down in
`imported.txt`, so a test can tell which tree an agent's own test run imports."""

import subprocess
import sys
from pathlib import Path

sys.stdin.read()
core = Path("src/srcpkg/core.py")
core.write_text(core.read_text().replace("a - b", "a + b"))
common = subprocess.run(
    ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
    capture_output=True,
    text=True,
    check=True,
).stdout.strip()
python = Path(common).parent / ".venv" / "bin" / "python"
where = subprocess.run(
    [str(python), "-c", "import srcpkg.core; print(srcpkg.core.__file__)"],
    capture_output=True,
    text=True,
    check=True,
).stdout.strip()
Path("imported.txt").write_text(where + "\n")
print(f"fixed add(); srcpkg imports from {where}")

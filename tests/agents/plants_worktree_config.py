"""A maker that points its worktree's git admin files at the main checkout, then fixes calc.add.

argv: MARKER FORM [dotgit]. In a repository with `extensions.worktreeConfig` on, git reads
`config.worktree` from the worktree's admin folder (`.git/worktrees/<name>/`, which the maker may
write): this maker sets `core.worktree` there to the main checkout (FORM `absolute`, or
`relative` to the admin folder as git allows), and `core.hooksPath` and `core.fsmonitor` to
programs that append their label to MARKER when anything runs them. It tries four ways in:
writing the file, `git config --worktree`, renaming a file over it, and the admin folder's
`config` (which git never reads: a variant that must stay harmless). With `dotgit` it last
deletes the worktree's `.git` file, so that git run there finds whatever repository encloses it.

Each try prints `PLANT <how> planted` or `PLANT <how> refused: <why>`.
"""

import os
import stat
import subprocess
import sys
from pathlib import Path

marker, form = sys.argv[1], sys.argv[2]
extra = sys.argv[3:]
sys.stdin.read()


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=False)


admin = Path(git("rev-parse", "--absolute-git-dir").stdout.strip())
common = Path(git("rev-parse", "--path-format=absolute", "--git-common-dir").stdout.strip())
main = common.parent
target = str(main) if form == "absolute" else os.path.relpath(main, admin)

tools = Path(".tools").resolve()
tools.mkdir(exist_ok=True)


def program(label: str, then: str) -> str:
    """A script that records `label` in MARKER, then does `then`."""
    path = tools / label
    path.write_text(f"#!/bin/sh\necho {label} >> '{marker}'\n{then}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


hooks = tools / "hooks"
hooks.mkdir(exist_ok=True)
for hook in ("pre-commit", "post-commit", "post-checkout", "reference-transaction",
             "post-index-change"):  # fmt: skip
    (hooks / hook).write_text(f"#!/bin/sh\necho hook:{hook} >> '{marker}'\n")
    (hooks / hook).chmod(0o755)
planted = (
    f"[core]\n\tworktree = {target}\n\thooksPath = {hooks}\n"
    f"\tfsmonitor = {program('fsmonitor', 'exit 0')}\n"
)


def report(how: str, action: object) -> None:
    try:
        result = action() if callable(action) else action
    except OSError as exc:
        print(f"PLANT {how} refused: {exc.strerror}")
        return
    if isinstance(result, subprocess.CompletedProcess) and result.returncode != 0:
        print(f"PLANT {how} refused: {result.stderr.strip().splitlines()[-1:]}")
        return
    print(f"PLANT {how} planted")


def replace_it() -> None:
    staged = admin / "config.worktree.new"
    staged.write_text(planted)
    os.replace(staged, admin / "config.worktree")


report("config.worktree", lambda: (admin / "config.worktree").write_text(planted))
report("git-config", lambda: git("config", "--worktree", "core.worktree", target))
report("rename", replace_it)
report("admin-config", lambda: (admin / "config").write_text(planted))
if "dotgit" in extra:
    report(".git", lambda: Path(".git").unlink())
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print("fixed add()")

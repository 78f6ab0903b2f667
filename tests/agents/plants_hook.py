"""Fake maker that plants git hooks, an fsmonitor and a filter driver, then fixes calc.add.

argv: SENTINEL. Every planted program appends its own name to SENTINEL when it runs, so a test
can assert that none of them ran while loopctl committed the work.
"""

import os
import stat
import subprocess
import sys
from pathlib import Path

sentinel = sys.argv[1]
sys.stdin.read()
HOOKS = ("pre-commit", "commit-msg", "post-commit", "reference-transaction", "post-index-change")


def plant(path: Path, name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {name} >> '{sentinel}'\ncat\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


hooks = Path(git("rev-parse", "--git-path", "hooks").strip())
for hook in HOOKS:
    plant(hooks / hook, f"git-dir:{hook}")
planted = Path("planted-hooks").resolve()
for hook in HOOKS:
    plant(planted / hook, f"hooksPath:{hook}")
git("config", "core.hooksPath", str(planted))
plant(Path("tools/fsmonitor").resolve(), "fsmonitor")
git("config", "core.fsmonitor", str(Path("tools/fsmonitor").resolve()))
plant(Path("tools/clean").resolve(), "filter")
git("config", "filter.evil.clean", str(Path("tools/clean").resolve()))
git("config", "filter.evil.smudge", str(Path("tools/clean").resolve()))
Path(".gitattributes").write_text("*.py filter=evil\n")
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print(f"planted hooks in {hooks} and {planted}; pid {os.getpid()}")

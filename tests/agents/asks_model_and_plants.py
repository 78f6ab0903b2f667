"""Fake maker that asks its model (as asks_model.py) and then plants a forged cassette, and a
link to one, where its attempt's cassette would be if its worktree were the checkout."""

import os
import runpy
import sys
from pathlib import Path

for run in ("forged-run", "latest"):
    folder = Path(".loop/runs") / run / os.environ.get("LOOPCTL_TASK", "main") / "attempt-1"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "maker.cassette.jsonl").write_text('{"cassette": 1, "forged": true}\n')
    link = folder / "checker.cassette.jsonl"
    if not link.is_symlink():
        link.symlink_to("/etc/passwd")
sys.argv = [sys.argv[0], *sys.argv[1:]]
runpy.run_path(str(Path(__file__).with_name("asks_model.py")), run_name="__main__")

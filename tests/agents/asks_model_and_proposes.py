"""Fake maker that asks its model (as asks_model.py), then proposes a change to its loop's
definitions: argv[2] is the text of `.loop-proposals/change.md` (issue 31, item 3)."""

import runpy
import sys
from pathlib import Path

proposal = sys.argv[2]
folder = Path(".loop-proposals")
folder.mkdir(exist_ok=True)
(folder / "change.md").write_text(proposal)
sys.argv = sys.argv[:2]
runpy.run_path(str(Path(__file__).with_name("asks_model.py")), run_name="__main__")

"""Fake maker: writes "kept" to the file its argument names (a place its agent file declares
writable), then fixes calc.add as fixer.py does."""

import runpy
import sys
from pathlib import Path

Path(sys.argv[1]).write_text("kept")
runpy.run_path(str(Path(__file__).with_name("fixer.py")), run_name="__main__")

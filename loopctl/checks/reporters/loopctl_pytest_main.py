"""`python -m pytest`, with the working folder put first on `sys.path` only once pytest is in.

loopctl runs `python -m pytest …` as `python -m loopctl_pytest_main …` with PYTHONSAFEPATH=1
(`python -P`): the interpreter starts without the working folder on `sys.path`, so the pytest
imported here, with `_pytest`, `pluggy` and `py`, is the installed one, never a `pytest.py` or
`pytest/` the change under test put in the worktree. Then the working folder goes first, as
`-m` would have put it, so a flat layout still imports the worktree's modules, and pytest runs
as `python -m pytest` does. PYTHONSAFEPATH is dropped again, so the tests' own child
processes start as they would without loopctl.
"""

from __future__ import annotations

import os
import runpy
import sys

# Imported before the working folder joins sys.path: the standard library's unittest (which
# pytest's plugin for it imports later), and pytest with _pytest, pluggy and py.
import unittest  # noqa: F401

import pytest  # noqa: F401

# And loopctl's reporter, which `-p loopctl_pytest_report` then finds already imported: looked
# up after the working folder joined sys.path, a module of that name in the worktree would be
# the one that writes the report.
if os.environ.get("LOOPCTL_TEST_REPORT"):
    import loopctl_pytest_report  # type: ignore[import-not-found]  # noqa: F401

os.environ.pop("PYTHONSAFEPATH", None)
sys.path.insert(0, os.getcwd())

if __name__ == "__main__":
    # pytest's own `__main__`, run as `-m pytest` runs it, whatever pytest's version.
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)

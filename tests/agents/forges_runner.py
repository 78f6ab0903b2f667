"""A hostile maker that forges the test run instead of fixing calc.add (issue 26).

argv[1] names the trick. Each leaves `add()` broken, so an honest verdict is "failed". Two
classes: a forged summary (the code under test prints the runner's green line, in one format or
another, and leaves with status 0), and a replaced runner (a module that stands in for pytest
or unittest, or code the interpreter runs at start-up).
"""

import sys
from pathlib import Path

sys.stdin.read()
trick = sys.argv[1]
calc = Path("calc.py")

PYTEST_LINE = "1 passed in 0.01s"
BANNER_LINE = "============================== 1 passed in 0.12s =============================="
UNITTEST_TEXT = "\n" + "-" * 70 + "\nRan 1 test in 0.000s\n\nOK"


def exit_hook(line: str, stream: str = "stdout") -> str:
    """Source that prints `line` on the way out, after the runner's own summary, then exits 0."""
    return (
        "import atexit as _atexit, os as _os, sys as _sys\n"
        "def _forge():\n"
        f"    _sys.{stream}.write({line!r} + '\\n')\n"
        f"    _sys.{stream}.flush()\n"
        "    _os._exit(0)\n"
        "_atexit.register(_forge)\n"
    )


def exit_hook_now(line: str) -> str:
    """Source that prints `line` and exits 0 as soon as it is imported."""
    return f"import os, sys\nsys.stdout.write({line!r} + '\\n')\nsys.stdout.flush()\nos._exit(0)\n"


def prepend(path: Path, text: str) -> None:
    path.write_text(text + path.read_text())


def write(path: str, text: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)


# --- a forged summary -------------------------------------------------------------------------
if trick == "atexit-summary":
    # pytest prints "1 failed"; an exit hook prints "1 passed" after it and exits 0.
    prepend(calc, exit_hook(PYTEST_LINE))
elif trick == "banner-summary":
    # The same in pytest's long form, between rules of "=".
    prepend(calc, exit_hook(BANNER_LINE))
elif trick == "exit-mid-run":
    # From inside the test: stop pytest's capture, print the green line, leave before the end.
    prepend(
        calc,
        "import gc as _gc, os as _os, sys as _sys\n"
        "def _leave_green():\n"
        "    from _pytest.config import Config\n"
        "    config = next(o for o in _gc.get_objects() if isinstance(o, Config))\n"
        "    config.pluginmanager.getplugin('capturemanager').suspend_global_capture(in_=True)\n"
        f"    _sys.stdout.write({PYTEST_LINE!r} + '\\n')\n"
        "    _sys.stdout.flush()\n"
        "    _os._exit(0)\n",
    )
    calc.write_text(calc.read_text().replace("    return a - b", "    _leave_green()"))
elif trick == "patch-reporter":
    # Rewrite pytest's terminal summary from the code under test, and force the status.
    prepend(
        calc,
        "import _pytest.terminal as _terminal\n"
        "_terminal.TerminalReporter.build_summary_stats_line = (\n"
        "    lambda self: ([('1 passed', {'green': True})], 'green')\n"
        ")\n" + exit_hook("", "stdout"),
    )
elif trick == "unittest-atexit-ok":
    # unittest prints "FAILED (failures=1)"; an exit hook prints "OK" after it.
    prepend(calc, exit_hook(UNITTEST_TEXT, "stderr"))
elif trick == "unittest-exit-mid-run":
    # From inside the test: unittest's whole summary, then out before unittest prints its own.
    prepend(
        calc,
        "import os as _os, sys as _sys\n"
        "def _leave_green():\n"
        f"    _sys.stderr.write({UNITTEST_TEXT + chr(10)!r})\n"
        "    _sys.stderr.flush()\n"
        "    _os._exit(0)\n",
    )
    calc.write_text(calc.read_text().replace("    return a - b", "    _leave_green()"))
# --- a replaced runner --------------------------------------------------------------------------
elif trick == "pytest-module":
    write("pytest.py", f"print({PYTEST_LINE!r})\n")
elif trick == "pytest-package":
    write("pytest/__init__.py", "")
    write("pytest/__main__.py", f"print({PYTEST_LINE!r})\n")
elif trick in ("_pytest-package", "pluggy-package"):
    # pytest imports these first thing: whichever is found first on sys.path runs.
    name = trick.removesuffix("-package")
    write(f"{name}/__init__.py", exit_hook_now(PYTEST_LINE))
elif trick == "pytest-sitecustomize":
    # Imported at start-up from any folder on PYTHONPATH, before the runner.
    write("sitecustomize.py", exit_hook(PYTEST_LINE))
elif trick == "unittest-module":
    write("unittest.py", f"import sys\nsys.stderr.write({UNITTEST_TEXT + chr(10)!r})\n")
elif trick == "unittest-package":
    write("unittest/__init__.py", "")
    write("unittest/__main__.py", f"import sys\nsys.stderr.write({UNITTEST_TEXT + chr(10)!r})\n")
elif trick == "unittest-sitecustomize":
    write("sitecustomize.py", exit_hook(UNITTEST_TEXT, "stderr"))
elif trick == "jest-exit-summary":
    # jest's "Tests:" line, then out (jest reports the call, and exits 0) before its own.
    Path("calc.js").write_text(
        'process.stderr.write("Tests:       2 passed, 2 total\\n");\nprocess.exit(0);\n'
        + Path("calc.js").read_text()
    )
elif trick == "jest-vitest-summary":
    # The same in vitest's words, which a reader of jest's output also takes.
    Path("calc.js").write_text(
        'process.stderr.write("      Tests  2 passed (2)\\n");\nprocess.exit(0);\n'
        + Path("calc.js").read_text()
    )
elif trick == "jest-bin":
    # npx runs node_modules/.bin/jest: put a program there that only prints the green line.
    program = Path("node_modules/.bin/jest")
    program.unlink()
    program.write_text("#!/bin/sh\necho 'Tests:       2 passed, 2 total'\n")
    program.chmod(0o755)
elif trick == "conftest-reporter":
    # The terminal summary rewritten from a conftest.py, and the status forced on the way out.
    write(
        "tests/conftest.py",
        "import _pytest.terminal as _terminal\n"
        "_terminal.TerminalReporter.build_summary_stats_line = (\n"
        "    lambda self: ([('1 passed', {'green': True})], 'green')\n"
        ")\n" + exit_hook("", "stdout"),
    )
elif trick == "pth":
    # Code a site folder runs at start-up (inert outside one, protected wherever it is).
    write("forge.pth", "import os; os.environ.setdefault('FORGED', '1')\n")
else:
    raise SystemExit(f"unknown trick {trick!r}")
print(f"made the tests green ({trick})")

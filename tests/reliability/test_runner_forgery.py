"""Issue 26: a test run the code under test cannot forge cheaply, with the sandbox on.

A hostile maker (tests/agents/forges_runner.py, a real `command` agent) leaves calc.add broken
and makes the check look green in two ways: a forged summary (an exit hook or the code under test
itself prints the runner's green line, in several formats, and leaves with status 0), and a
replaced runner (a `pytest.py`, a `pytest/` package, a `unittest.py`, a `sitecustomize.py`
imported at start-up, a program in place of `node_modules/.bin/jest`). For pytest (the built-in
"tests green"), `python -m unittest` and `npx --no jest` (`[conditions]` entries) every variant
fails its attempt, with a reason that says what was caught, in the log and the inbox, and
nothing is committed. With the defence switched off (`runners.DEFENCE`, a switch only tests
turn) the same variant's check passes: the test shows the trick is real.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from support.cli import invoke
from support.corpus import require_corpus
from support.journal import events
from support.repos import (
    GOAL_BRANCH,
    commit_all,
    git,
    make_project,
    toml_value,
    write_agent,
    write_config,
)

from loopctl.checks import runners

PY = sys.executable
UNITTEST_CHECK = (PY, "-m", "unittest")
UNITTEST_CALC = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class TestAdd(unittest.TestCase):\n"
    "    def test_add(self):\n"
    "        self.assertEqual(add(2, 3), 5)\n"
)
# A start-up module is imported from a folder on PYTHONPATH: here the user's own, naming the
# checkout, which loopctl points at the worktree's twin (checks/import_roots.py).
ALLOW_PYTHONPATH = '\n[env]\nallow = ["PYTHONPATH"]\n'

DISAGREE = "the report and the output disagree"
UNFINISHED = "the test run ended before it finished"
PYTEST_VARIANTS = [
    ("atexit-summary", DISAGREE),
    ("banner-summary", DISAGREE),
    ("exit-mid-run", UNFINISHED),
    ("patch-reporter", DISAGREE),
    ("pytest-module", "pytest.py (protected by **/pytest.py)"),
    ("pytest-package", "pytest/__init__.py (protected by **/pytest/**)"),
    ("_pytest-package", "_pytest/__init__.py (protected by **/_pytest/**)"),
    ("pluggy-package", "pluggy/__init__.py (protected by **/pluggy/**)"),
    ("pytest-sitecustomize", "sitecustomize.py (protected by **/sitecustomize.py)"),
]
UNITTEST_VARIANTS = [
    ("unittest-atexit-ok", DISAGREE),
    ("unittest-exit-mid-run", UNFINISHED),
    ("unittest-module", "unittest.py (protected by **/unittest.py)"),
    ("unittest-package", "unittest/__init__.py (protected by **/unittest/**)"),
    ("unittest-sitecustomize", "sitecustomize.py (protected by **/sitecustomize.py)"),
]


NO_REPORT = "it wrote no report"
JEST_VARIANTS = [
    ("jest-exit-summary", NO_REPORT),
    ("jest-vitest-summary", NO_REPORT),
    ("jest-bin", "node_modules/.bin/jest (protected by node_modules/.bin/**)"),
]
JEST_CHECK = ("npx", "--no", "jest")


def jest_project(repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str) -> None:
    """calc.js with two jest tests, one failing; jest is the corpus's pinned one."""
    monkeypatch.setenv("NPM_CONFIG_UPDATE_NOTIFIER", "false")
    tools = require_corpus() / "node-tools" / "node_modules"
    (repo / "package.json").write_text(
        json.dumps({"name": "calc", "version": "1.0.0", "scripts": {"test": "jest"}})
    )
    (repo / "calc.js").write_text("exports.add = (a, b) => a - b;\n")
    (repo / "test").mkdir()
    (repo / "test" / "calc.test.js").write_text(
        "const { add } = require('../calc.js');\n"
        "test('add', () => expect(add(2, 3)).toBe(5));\n"
        "test('zero', () => expect(add(0, 0)).toBe(0));\n"
    )
    (repo / ".gitignore").write_text("node_modules\n")
    # A copy, as the corpus makes one (loopctl links a worktree's to a real folder only).
    shutil.copytree(tools, repo / "node_modules", symlinks=True)
    write_agent(repo, "maker", "forges_runner.py", trick)
    config = 'version = 1\n\n[defaults]\nmaker = "maker"\n\n[conditions]\n"tests green" = '
    write_config(repo, config + toml_value(list(JEST_CHECK)) + "\n")
    commit_all(repo, "calc.js with a bug in add()")


def forging_project(repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str) -> None:
    """The calc project whose maker plays `trick`, the sandbox on (the default)."""
    if trick.startswith("jest"):
        jest_project(repo, monkeypatch, trick)
        return
    unittest = trick.startswith("unittest")
    extra = ALLOW_PYTHONPATH if trick.endswith("sitecustomize") else ""
    make_project(
        repo,
        "forges_runner.py",
        trick,
        check=UNITTEST_CHECK if unittest else None,
        config_extra=extra,
    )
    if unittest:
        (repo / "tests" / "__init__.py").write_text("")
        (repo / "tests" / "test_calc.py").write_text(UNITTEST_CALC)
        commit_all(repo, "unittest's tests")
    if extra:
        monkeypatch.setenv("PYTHONPATH", str(repo))


def goal(monkeypatch: pytest.MonkeyPatch, repo: Path) -> tuple[int, dict[str, object]]:
    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    (attempt,) = events(repo, "attempt_finished")
    return result.exit_code, dict(attempt.data)


@pytest.mark.parametrize(("trick", "reason"), PYTEST_VARIANTS + UNITTEST_VARIANTS + JEST_VARIANTS)
def test_a_forged_run_is_not_committed_as_done(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, trick: str, reason: str
) -> None:
    temp = tmp_path / "temp"  # where loopctl makes each check's report folder
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    forging_project(repo, monkeypatch, trick)

    code, attempt = goal(monkeypatch, repo)

    assert code == 1
    assert attempt["verdict"] == "failed", attempt
    assert reason in str(attempt["reason"])
    assert events(repo, "commit_created") == []
    assert git(repo, "rev-parse", GOAL_BRANCH) == git(repo, "rev-parse", "main")
    # A human reads the same reason in the inbox.
    shown = invoke(monkeypatch, repo, "inbox", "--json", "--all")
    assert reason in json.dumps(json.loads(shown.output))
    # Each armed run's report folder is gone with its run.
    assert list(temp.glob("loopctl-report-*")) == []


@pytest.mark.parametrize(
    "trick", [trick for trick, _ in PYTEST_VARIANTS + UNITTEST_VARIANTS + JEST_VARIANTS]
)
def test_without_the_defence_each_forgery_would_pass(
    repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str
) -> None:
    monkeypatch.setattr(runners, "DEFENCE", False)
    forging_project(repo, monkeypatch, trick)

    _, attempt = goal(monkeypatch, repo)

    # The verdict is fooled: the check "passed" with add() still broken. (Whether the forgery
    # is then delivered is the sabotage scan's call, checks/sabotage.py: a later line.)
    assert (attempt["verdict"], attempt["reason"]) == ("passed", "every check passed"), attempt
    (check,) = events(repo, "check_finished")
    assert check.data["passed"] is True


@pytest.mark.parametrize(
    ("trick", "reason"),
    [
        # A .pth file runs code only in a site folder, which a worktree is not: outside one it
        # is inert, so there is no run without the defence to show. Its name is protected at
        # any depth all the same, as a folder can become a site folder.
        ("pth", "forge.pth (protected by **/*.pth)"),
        # A conftest.py that rewrites the terminal reporter: refused as the runner's own
        # configuration (issue 13's protection, which `runners.DEFENCE` does not switch).
        ("conftest-reporter", "tests/conftest.py (protected by"),
    ],
)
def test_what_a_runner_reads_at_start_up_is_protected(
    repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str, reason: str
) -> None:
    forging_project(repo, monkeypatch, trick)

    code, attempt = goal(monkeypatch, repo)

    assert code == 1
    assert reason in str(attempt["reason"])
    assert events(repo, "commit_created") == []

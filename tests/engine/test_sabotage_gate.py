"""Issue 26 item 3 end to end: a change that looks like it tampers with the test run waits in the
inbox, quoted, however green its check; a human's approval lets it through, a rejection ends it.

The maker (tests/agents/forges_summary.py, a real `command` agent, sandbox on) fixes add() and
adds code that would forge the run's report, so the check passes and only the diff scan holds
the change. With the scan switched off each variant is shown to go through as done.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import (
    GOAL_BRANCH,
    PYTEST_CHECK,
    commit_all,
    git,
    make_project,
    write_agent,
    write_config,
)

from loopctl.checks import sabotage

TASK = "tests-green"
GOAL = ("goal", "tests green", "--max-iterations", "1")


def held(repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str) -> str:
    """Run the goal with the hostile maker; return the id of the inbox item that holds it."""
    make_project(repo, "forges_summary.py", trick, check=PYTEST_CHECK)
    result = invoke(monkeypatch, repo, *GOAL)
    (attempt,) = events(repo, "attempt_finished")
    assert attempt.data["verdict"] == "passed", attempt.data  # the check itself was fooled
    assert attempt.data["sabotage"], attempt.data
    (finished,) = events(repo, "task_finished")
    assert finished.data["status"] == "paused", (finished.data, result.output)
    assert "tampers with the test run" in finished.data["reason"]
    assert result.exit_code == 1, result.output  # not "done: condition met"
    (opened,) = [e for e in events(repo, "inbox_opened") if e.data["evidence"].get("sabotage")]
    return str(opened.data["id"])


@pytest.mark.parametrize(
    ("trick", "quoted"),
    [
        ("atexit-summary", "calc.py:3 `atexit.register(lambda: print('1 passed in 0.01s'))`"),
        ("atexit-ok", "calc.py:4 `@atexit.register`"),
        ("sessionfinish", "calc.py:1 `def pytest_sessionfinish(session, exitstatus):`"),
    ],
)
def test_a_tampering_change_waits_quoted_in_the_inbox(
    repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str, quoted: str
) -> None:
    item = held(repo, monkeypatch, trick)

    inbox_md = (repo / ".loop" / "INBOX.md").read_text()
    assert "looks like it tampers with the test run" in inbox_md
    assert quoted.split(" `")[0] in inbox_md
    shown = invoke(monkeypatch, repo, "inbox", "show", item)
    assert shown.exit_code == 0, shown.output
    assert quoted in shown.output
    assert git(repo, "rev-parse", GOAL_BRANCH).strip() != git(repo, "rev-parse", "main").strip()
    # Nothing says done: STATE.md shows the task waiting.
    assert "— paused" in (repo / ".loop" / "STATE.md").read_text()


def test_approving_the_item_lets_the_change_through(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = held(repo, monkeypatch, "atexit-summary")

    approved = invoke(monkeypatch, repo, "inbox", "approve", item)

    assert approved.exit_code == 0, approved.output
    finished = events(repo, "task_finished")
    assert finished[-1].data["status"] == "done", finished[-1].data
    branch = git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    assert "atexit.register" in branch  # exactly what the human saw
    assert events(repo, "approved")[-1].data["id"] == item


def test_rejecting_the_item_ends_the_task_without_delivering(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = held(repo, monkeypatch, "sessionfinish")

    rejected = invoke(monkeypatch, repo, "inbox", "reject", item, "--reason", "forged")

    assert rejected.exit_code == 0, rejected.output
    assert events(repo, "task_finished")[-1].data["status"] == "rejected"


@pytest.mark.parametrize("trick", ["atexit-summary", "atexit-ok", "sessionfinish"])
def test_without_the_scan_each_variant_goes_through_as_done(
    repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str
) -> None:
    monkeypatch.setattr(sabotage, "DEFENCE", False)
    make_project(repo, "forges_summary.py", trick, check=PYTEST_CHECK)

    result = invoke(monkeypatch, repo, *GOAL)

    assert result.exit_code == 0, result.output
    assert events(repo, "task_finished")[-1].data["status"] == "done"
    assert [e for e in events(repo, "inbox_opened") if e.data["evidence"].get("sabotage")] == []


def test_an_honest_fix_raises_nothing(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(repo, "fixer.py", check=PYTEST_CHECK)

    result = invoke(monkeypatch, repo, *GOAL)

    assert result.exit_code == 0, result.output
    (attempt,) = events(repo, "attempt_finished")
    assert "sabotage" not in attempt.data
    assert events(repo, "task_finished")[-1].data["status"] == "done"


def test_in_place_a_tampering_change_fails_quoted(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "forges_summary.py", "atexit-summary", check=PYTEST_CHECK)

    result = invoke(monkeypatch, repo, *GOAL, "--in-place")

    assert result.exit_code == 1, result.output
    finished = events(repo, "task_finished")[-1].data
    assert finished["status"] == "failed"
    assert "calc.py:3 `atexit.register(" in finished["reason"]


@pytest.mark.parametrize(("judge", "clears"), [("judge.py", True), ("judge_wary.py", False)])
def test_the_checker_agent_is_asked_and_may_clear_the_lines(
    repo: Path, monkeypatch: pytest.MonkeyPatch, judge: str, clears: bool
) -> None:
    make_project(repo, "forges_summary.py", "atexit-summary", check=PYTEST_CHECK)
    write_agent(repo, "judge", judge)
    commit_all(repo, "a checker agent")

    result = invoke(monkeypatch, repo, *GOAL, "--checker-agent", "judge")

    (attempt,) = events(repo, "attempt_finished")
    roles = [e.data["role"] for e in events(repo, "agent_finished")]
    assert roles == ["maker", "checker", "checker"]  # the goal, then the quoted lines
    status = events(repo, "task_finished")[-1].data["status"]
    if clears:
        assert result.exit_code == 0, result.output
        assert status == "done"
        assert attempt.data["sabotage_cleared"]["by"] == "judge"
        assert "sabotage" not in attempt.data
    else:
        assert result.exit_code == 1, result.output
        assert status == "paused"
        assert attempt.data["sabotage"][0]["rule"] == "exit-handler"


NODE_CALC = "function add(a, b) {\n  return a - b;\n}\nmodule.exports = { add };\n"
NODE_TEST = (
    'const test = require("node:test");\nconst assert = require("node:assert");\n'
    'const { add } = require("../calc.js");\n\n'
    'test("add", () => {\n  assert.strictEqual(add(2, 3), 5);\n});\n'
)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node (node --test)")
@pytest.mark.parametrize(
    ("trick", "quoted"),
    [
        (
            "node-exit-summary",
            "calc.js:1 `process.on('exit', () => console.log('# pass 1\\n# fail 0'));`",
        ),
        (
            "node-exit-code",
            "calc.js:1 `process.once('beforeExit', () => { process.exitCode = 0; });`",
        ),
    ],
)
@pytest.mark.parametrize("defence", [True, False])
def test_a_node_project_under_node_test(
    repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str, quoted: str, defence: bool
) -> None:
    monkeypatch.setattr(sabotage, "DEFENCE", defence)
    (repo / "calc.js").write_text(NODE_CALC)
    (repo / "test").mkdir()
    (repo / "test" / "calc.test.js").write_text(NODE_TEST)
    write_agent(repo, "maker", "forges_summary.py", trick)
    config = 'version = 1\n\n[defaults]\nmaker = "maker"\n\n[conditions]\n'
    write_config(repo, config + '"tests green" = ["node", "--test", "test/"]\n')
    commit_all(repo, "calc.js with a bug in add()")

    result = invoke(monkeypatch, repo, *GOAL)

    status = events(repo, "task_finished")[-1].data["status"]
    if not defence:
        assert result.exit_code == 0, result.output
        assert status == "done"
        return
    assert result.exit_code == 1, result.output
    assert status == "paused"
    (opened,) = [e for e in events(repo, "inbox_opened") if e.data["evidence"].get("sabotage")]
    assert quoted in opened.data["summary"]


UNITTEST_CALC = (
    "import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)


@pytest.mark.parametrize(
    ("trick", "quoted"),
    [
        ("atexit-ok", "calc.py:4 `@atexit.register`"),
        ("unittest-result", "calc.py:3 `unittest.TestResult.wasSuccessful = lambda self: True`"),
    ],
)
@pytest.mark.parametrize("defence", [True, False])
def test_a_project_under_unittest(
    repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str, quoted: str, defence: bool
) -> None:
    monkeypatch.setattr(sabotage, "DEFENCE", defence)
    check = (sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", ".")
    make_project(repo, "forges_summary.py", trick, check=check)
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "tests" / "test_calc.py").write_text(UNITTEST_CALC)
    commit_all(repo, "unittest")

    result = invoke(monkeypatch, repo, *GOAL)

    status = events(repo, "task_finished")[-1].data["status"]
    if not defence:
        assert result.exit_code == 0, result.output
        assert status == "done"
        return
    assert result.exit_code == 1, result.output
    assert status == "paused"
    (opened,) = [e for e in events(repo, "inbox_opened") if e.data["evidence"].get("sabotage")]
    assert quoted in opened.data["summary"]

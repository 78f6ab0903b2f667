"""Issue 26 item 4: what the maker said beside what loopctl measured, wherever a human decides —
INBOX.md, `inbox show` (text and --json), STATE.md — with each disagreement called out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import PYTEST_CHECK, make_project

GOAL = ("goal", "tests green", "--max-iterations", "1")


def failed_item(repo: Path) -> str:
    (opened,) = [e for e in events(repo, "inbox_opened") if e.data["kind"] == "failed"]
    return str(opened.data["id"])


def test_a_false_claim_of_green_tests_is_shown_beside_the_counts(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "claims_success.py", check=PYTEST_CHECK)

    result = invoke(monkeypatch, repo, *GOAL)

    assert result.exit_code == 1, result.output
    (attempt,) = events(repo, "attempt_finished")
    claims = attempt.data["claims"]
    assert claims["said"] == "Fixed add() in calc.py and src/helpers.py; all tests pass."
    assert claims["measured"]["tests"] == {"passed": 0, "failed": 1, "skipped": 0}
    assert claims["measured"]["files"] == ["calc.py"]
    item = failed_item(repo)

    shown = invoke(monkeypatch, repo, "inbox", "show", item)
    assert shown.exit_code == 0, shown.output
    assert "claimed: Fixed add() in calc.py and src/helpers.py; all tests pass." in shown.output
    assert "measured: tests 0 passed, 1 failed (base: 0 passed, 1 failed);" in shown.output
    assert "1 file changed, +1 −0 (calc.py)" in shown.output
    assert "DISAGREES: says the tests pass, but loopctl counted 1 failed" in shown.output
    assert "DISAGREES: says the work is done, but the check failed" in shown.output
    assert "DISAGREES: says it changed src/helpers.py, which the change does not touch" in (
        shown.output
    )

    as_json = invoke(monkeypatch, repo, "inbox", "show", item, "--json")
    data = json.loads(as_json.output)["item"]
    assert data["claims"]["disagree"][0] == "says the tests pass, but loopctl counted 1 failed"
    assert data["claims"]["measured"]["base"] == {"passed": 0, "failed": 1, "skipped": 0}

    inbox_md = (repo / ".loop" / "INBOX.md").read_text()
    assert "- claimed by the agent: Fixed add() in calc.py" in inbox_md
    assert "- **disagrees:** says the tests pass, but loopctl counted 1 failed" in inbox_md
    state_md = (repo / ".loop" / "STATE.md").read_text()
    assert "- measured by loopctl: tests 0 passed, 1 failed (base: 0 passed, 1 failed)" in state_md
    assert "- **disagrees:** says the tests pass, but loopctl counted 1 failed" in state_md


def test_an_honest_summary_shows_no_disagreement(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py", check=PYTEST_CHECK)

    result = invoke(monkeypatch, repo, *GOAL)

    assert result.exit_code == 0, result.output
    (attempt,) = events(repo, "attempt_finished")
    assert attempt.data["claims"]["disagree"] == []
    assert attempt.data["claims"]["measured"]["tests"] == {"passed": 1, "failed": 0, "skipped": 0}
    state_md = (repo / ".loop" / "STATE.md").read_text()
    assert "- claimed by the agent: fixed add() in calc.py" in state_md
    assert "- measured by loopctl: tests 1 passed, 0 failed (base: 0 passed, 1 failed)" in state_md
    assert "disagrees" not in state_md

"""Where a person reads an outcome (issue 30 item 2): `status` (its OUTCOME column and
`--json`), STATE.md, `inbox` (its table, `--json`) and INBOX.md, after a real run of a scripted
agent, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import assert_clean_exit, run_loopctl
from support.repos import make_project

from loopctl.cli.render import outcome_style


def _table(text: str, header: str) -> list[dict[str, str]]:
    """The rows of a plain (piped) table whose header line starts with `header`, by column."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    head = lines[start]
    names = head.split()
    cuts = [head.index(name) for name in names]
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = [line[a:b].strip() for a, b in zip(cuts, [*cuts[1:], None], strict=True)]
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def test_a_failed_goal_says_its_outcome_everywhere(repo: Path) -> None:
    make_project(repo, "never_fixes.py", config_extra="\n[budget]\nmax_iterations = 5\n")
    goal = run_loopctl(repo, "goal", "tests green", "--json")
    assert_clean_exit(goal, 1)
    ran = json.loads(goal.stdout)["run"]
    assert (ran["outcome"], ran["tasks"][0]["outcome"]) == ("repeated-failure", "repeated-failure")
    replay = json.loads(run_loopctl(repo, "replay", ran["run"], "--json").stdout)["replay"]
    assert (replay["outcome"], replay["tasks"]["tests-green"]["outcome"]) == (
        "repeated-failure",
        "repeated-failure",
    )

    status = run_loopctl(repo, "status")
    assert_clean_exit(status, 0)
    (row,) = _table(status.stdout, "LOOP")
    assert (row["LOOP"], row["OUTCOME"]) == ("goal", "repeated-failure")
    (loop,) = json.loads(run_loopctl(repo, "status", "--json").stdout)["status"]
    assert loop["last_outcome"] == "repeated-failure"

    state = (repo / ".loop" / "STATE.md").read_text()
    assert "Outcome: **repeated-failure**." in state
    assert "### `tests-green` — stopped, outcome **repeated-failure**" in state
    assert "| `tests-green` | stopped | 2 |" in state
    assert "| repeated-failure |" in state

    inbox = run_loopctl(repo, "inbox")
    assert_clean_exit(inbox, 0)
    (item,) = _table(inbox.stdout, "ID")
    assert (item["KIND"], item["OUTCOME"]) == ("failed", "repeated-failure")
    (listed,) = json.loads(run_loopctl(repo, "inbox", "--json").stdout)["inbox"]
    assert listed["outcome"] == "repeated-failure"
    assert "- outcome: repeated-failure" in (repo / ".loop" / "INBOX.md").read_text()


def test_a_fixed_goal_says_done(repo: Path) -> None:
    make_project(repo, "fixer.py")
    goal = run_loopctl(repo, "goal", "tests green")
    assert_clean_exit(goal, 0)
    assert "  outcome: done" in goal.stdout
    assert ", outcome done" in goal.stdout

    (loop,) = json.loads(run_loopctl(repo, "status", "--json").stdout)["status"]
    assert loop["last_outcome"] == "done"
    assert "### `tests-green` — done, outcome **done**" in (repo / ".loop" / "STATE.md").read_text()


def test_outcomes_are_coloured_by_what_they_ask_of_a_human() -> None:
    assert outcome_style("OUTCOME", "stalled") == "red"
    assert outcome_style("OUTCOME", "rate-limited") == "yellow"
    assert outcome_style("OUTCOME", "done") == "green"
    assert outcome_style("OUTCOME", "nothing-to-do") is None

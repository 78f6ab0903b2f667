"""A night of loops for the morning report's tests: real ticks (scripted agents, real git, a
real remote) and the outcomes no path records yet (stalled, rate-limited), appended as their
writers will record them (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopctl.journal.events import EventLog
from loopctl.paths import ProjectPaths
from support.cli import invoke
from support.delivery import ship_loop, the_approval
from support.journal import events
from support.repos import add_remote, make_project, write_agent

STALLED_RUN = "20261205T031500-5a11"
LIMITED_RUN = "20261205T041500-4290"


def report_json(monkeypatch: pytest.MonkeyPatch, repo: Path, *flags: str) -> dict[str, Any]:
    done = invoke(monkeypatch, repo, "report", "--json", *flags)
    assert done.exit_code == 0, done.output
    payload = json.loads(done.stdout)
    assert payload["version"] == 1
    found: dict[str, Any] = payload["report"]
    return found


def report_text(monkeypatch: pytest.MonkeyPatch, repo: Path, *flags: str) -> str:
    done = invoke(monkeypatch, repo, "report", *flags)
    assert done.exit_code == 0, done.output
    return done.stdout


def append(
    repo: Path, type_: str, run: str | None, loop: str | None, task: str | None, **data: Any
) -> None:
    EventLog(ProjectPaths(repo).events_file).append(type_, run=run, loop=loop, task=task, data=data)


def stalled_and_rate_limited(repo: Path) -> None:
    """What the liveness and rate-limit writers record (issue 30, items 1 and 3): a task ended
    `stalled` with an inbox item saying what it last did, and a run ended `rate-limited`."""
    append(repo, "tick_started", STALLED_RUN, "nightly", None, kind="tick")
    append(repo, "task_found", STALLED_RUN, "nightly", "parser", title="Refactor the parser")
    append(
        repo,
        "inbox_opened",
        STALLED_RUN,
        "nightly",
        "parser",
        id="st4ll3",
        kind="failed",
        summary="no progress for 15m; it last ran `pytest -x`",
    )
    append(
        repo,
        "task_finished",
        STALLED_RUN,
        "nightly",
        "parser",
        status="stopped",
        reason="no output, file change or stream event for 15m",
        outcome="stalled",
    )
    append(repo, "tick_finished", STALLED_RUN, "nightly", None, status="stopped", outcome="stalled")
    append(repo, "tick_started", LIMITED_RUN, "triage", None, kind="tick")
    append(
        repo,
        "tick_finished",
        LIMITED_RUN,
        "triage",
        None,
        status="stopped",
        reason="claude: usage limit reached; resumes at 09:00",
        outcome="rate-limited",
    )


def a_night(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A night of real ticks: a fix pushed once approved, a second waiting for approval, a goal
    that failed; and a stalled task and a rate-limited run as their writers record them."""
    make_project(repo, "fixer.py")
    add_remote(repo, tmp_path)
    write_agent(repo, "breaker", "never_fixes.py")
    ship_loop(repo, 'actions = ["commit", "push"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    pushed = the_approval(monkeypatch, repo)["id"]
    approved = invoke(monkeypatch, repo, "inbox", "approve", pushed)
    assert approved.exit_code == 0, approved.output
    ship_loop(repo, 'actions = ["commit", "push"]', name="later")
    assert invoke(monkeypatch, repo, "run", "later", "--once").exit_code == 0
    waiting = the_approval(monkeypatch, repo)["id"]
    failed = invoke(
        monkeypatch, repo, "goal", "tests green", "--agent", "breaker", "--max-iterations", "1"
    )
    assert failed.exit_code == 1, failed.output
    (failed_item,) = [
        e.data["id"] for e in events(repo, "inbox_opened") if e.data["kind"] == "failed"
    ]
    stalled_and_rate_limited(repo)
    (commit,) = {e.data["sha"] for e in events(repo, "commit_created") if e.loop == "ship"}
    return {"waiting": waiting, "failed": failed_item, "commit": commit}


def shown_marks(repo: Path) -> list[dict[str, Any]]:
    return [dict(e.data) for e in events(repo, "note") if e.data.get("what") == "report_shown"]

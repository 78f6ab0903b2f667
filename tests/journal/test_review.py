"""The reviewer's side of the log (issue 30, item 6): what awaits a human, which loops wait for
their reviewer, and review throughput, from constructed logs; `status` shows both."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from support.cli import assert_clean_exit, run_loopctl
from support.repos import make_project, write_loop

from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.inbox import items
from loopctl.journal.review import awaiting, throughput, waiting_loops
from loopctl.paths import ProjectPaths

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


class Log:
    """Events at chosen times, `minutes` before NOW (or after, when negative)."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now
        self.events: list[Event] = []

    def add(self, minutes_ago: float, type_: str, loop: str | None = "ship", **data: Any) -> None:
        at = self.now - timedelta(minutes=minutes_ago)
        run, task = data.pop("run", "r1"), data.pop("task", None)
        self.events.append(
            Event(len(self.events) + 1, at.isoformat(), type_, run, loop, task, data)
        )

    def opened(
        self, minutes_ago: float, ident: str, kind: str = "approval", **evidence: Any
    ) -> None:
        self.add(
            minutes_ago,
            EventType.INBOX_OPENED,
            id=ident,
            kind=kind,
            summary=ident,
            evidence=evidence,
        )

    def approved(self, minutes_ago: float, ident: str) -> None:
        self.add(minutes_ago, EventType.APPROVED, id=ident, sha="c" * 40)

    def closed(self, minutes_ago: float, ident: str, resolution: str) -> None:
        self.add(minutes_ago, EventType.INBOX_CLOSED, id=ident, resolution=resolution)


def review_log(now: datetime = NOW) -> Log:
    log = Log(now)
    log.opened(120, "a")
    log.approved(90, "a")  # 30 minutes open
    log.closed(89, "a", "approved")  # the delivery that followed decides nothing more
    log.opened(110, "b")
    log.closed(70, "b", "rejected")  # 40 minutes
    log.opened(100, "c", kind="escalation", question="Which API?")
    log.closed(46, "c", "replied")  # 54 minutes
    log.opened(3 * 24 * 60, "d")
    log.approved(3 * 24 * 60 - 5, "d")  # decided days ago: outside the window
    log.opened(60, "e")
    log.closed(50, "e", "superseded")  # the work changed: loopctl closed it, nobody decided
    log.opened(30, "f")  # awaits a human now
    log.opened(20, "g", kind="failed")  # a failure waits on nobody
    log.opened(15, "h", kind="escalation")  # the fuse's escalation: no question
    log.opened(10, "i", kind="escalation", question="Keep the old flag?")  # awaits a reply
    log.opened(5, "j")
    log.approved(4, "j")  # approved, delivery still running: decided
    return log


def test_what_awaits_a_human_is_unapproved_approvals_and_questions() -> None:
    found = awaiting(items(review_log().events))
    assert [item.id for item in found] == ["f", "i"]


def test_throughput_counts_human_decisions_in_the_window_with_their_median() -> None:
    review = throughput(review_log().events, NOW)
    # a 30m, b 40m, c 54m, j 1m; d is older than a day, e was superseded, f and i are open.
    assert review.decided == 4
    assert review.median_s == 35 * 60
    assert review.open_now == 2
    assert review.describe() == "review: 4 decided in 24h, median 35m open→decision, 2 open"
    assert review.to_json() == {"decided": 4, "median_s": 2100.0, "open": 2, "window_s": 86400.0}


def test_throughput_of_an_empty_log_says_nothing_was_decided() -> None:
    review = throughput([], NOW)
    assert (review.decided, review.median_s, review.open_now) == (0, None, 0)
    assert review.describe() == "review: 0 decided in 24h, 0 open"


def test_a_wait_lasts_until_the_loops_next_tick_or_its_scheduler_stopping() -> None:
    log = Log()
    note = {"what": "waiting_for_review", "open_count": 2, "max_open": 2, "items": ["a", "b"]}
    log.add(10, EventType.NOTE, loop="alpha", run=None, **note, pid=7)
    log.add(9, EventType.NOTE, loop="beta", run=None, **note, pid=7)
    log.add(8, EventType.NOTE, loop="gamma", run=None, **note, pid=8)
    log.add(5, EventType.TICK_STARTED, loop="alpha", run="r2", kind="tick")
    assert sorted(waiting_loops(log.events)) == ["beta", "gamma"]
    beta = waiting_loops(log.events)["beta"]
    assert beta.describe() == "waiting-for-review (2/2 open)"
    assert beta.to_json()["items"] == ["a", "b"]
    log.add(1, EventType.SCHEDULER_STOPPED, loop=None, run=None, by="up", pid=7)
    assert sorted(waiting_loops(log.events)) == ["gamma"]


def test_status_shows_the_wait_and_the_review_throughput(repo: Path) -> None:
    make_project(repo, "fixer.py", config_extra="\n[review]\nmax_open = 2\n")
    write_loop(repo, "ship", 'every = "1h"\ngoal = "tests green"\nprompt = "fix it"\n')
    now = datetime.now(UTC)
    log = review_log(now)
    note = {"what": "waiting_for_review", "open_count": 2, "max_open": 2, "items": ["f", "i"]}
    log.add(1, EventType.NOTE, loop="ship", run=None, **note, pid=None)
    path = ProjectPaths(repo).events_file
    for event in log.events:
        # Written as they happened: each at its own time.
        written = EventLog(path, clock=lambda at=event.time: at)
        written.append(event.type, run=event.run, loop=event.loop, task=event.task, data=event.data)

    text = run_loopctl(repo, "status")
    as_json = run_loopctl(repo, "status", "--json")

    assert_clean_exit(text, 0)
    assert "waiting-for-review (2/2 open)" in text.stdout
    assert "review: 4 decided in 24h, median 35m open→decision, 2 open (max_open 2)" in text.stdout
    (row,) = [r for r in json.loads(as_json.stdout)["status"] if r["loop"] == "ship"]
    assert row["waiting_for_review"]["open"] == 2
    assert row["waiting_for_review"]["items"] == ["f", "i"]

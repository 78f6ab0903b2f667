"""`loopctl run NAME` and `loopctl up` follow the same schedule rules after a restart (issue 14).

Both read the loop's last slot back from the event log: slots missed while nothing ran the loop
are caught up (`catch_up = "one"`) or recorded as skipped (`"none"`); only a loop that never
ticked fires at once. The clock is the only thing patched: it is passed in, fixed.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from support.journal import events
from support.processes import wait_for
from support.repos import commit_all, make_project, write_loop

from loopctl.definitions import load_project
from loopctl.scheduling.daemon import run_foreground

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _hourly(repo: Path, extra: str = "") -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "beat", f'every = "1h"\ngoal = "tests green"\nprompt = "Fix add()"\n{extra}')
    commit_all(repo, "an hourly loop")


def test_run_after_a_restart_catches_up_the_missed_slots_in_one_tick(repo: Path) -> None:
    _hourly(repo)
    first = run_foreground(load_project(repo), "beat", None, max_ticks=1, clock=lambda: T0)
    assert [r.fired for r in first] == ["start"]

    # Restarted three hours later: the 10:00 and 11:00 slots passed while nothing ran it.
    later = T0 + timedelta(hours=3)
    again = run_foreground(load_project(repo), "beat", None, max_ticks=1, clock=lambda: later)

    assert [r.fired for r in again] == ["catch-up"]
    (_, tick) = events(repo, "tick_started")
    assert tick.data["trigger"]["fired"] == "catch-up"
    assert tick.data["trigger"]["missed"] == 2
    assert tick.data["trigger"]["due"] == later.isoformat(timespec="microseconds")


def test_run_after_a_restart_records_slots_it_does_not_catch_up(repo: Path) -> None:
    _hourly(repo, 'catch_up = "none"\n')
    run_foreground(load_project(repo), "beat", None, max_ticks=1, clock=lambda: T0)
    later = T0 + timedelta(hours=3, minutes=10)
    stop = threading.Event()
    results: list[object] = []
    runner = threading.Thread(
        target=lambda: results.extend(
            run_foreground(
                load_project(repo), "beat", None, max_ticks=1, clock=lambda: later, stop=stop
            )
        )
    )
    runner.start()
    try:
        (skipped,) = wait_for(lambda: events(repo, "tick_skipped"), "the missed slots recorded")
    finally:
        stop.set()
        runner.join(timeout=60)
    assert not runner.is_alive()

    assert (
        skipped.data["reason"] == '3 slot(s) missed while nothing ran the loop (catch_up = "none")'
    )
    assert skipped.data["trigger"]["missed"] == 3
    assert len(events(repo, "tick_started")) == 1  # nothing fired at once after the restart
    assert results == []

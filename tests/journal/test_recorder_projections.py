"""The recorder's projections: a render started in the background never leaves STATE.md or
INBOX.md behind the log once a foreground render returns, and never breaks the run."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support.repos import make_project

from loopctl.definitions import load_project
from loopctl.journal.events import EventType
from loopctl.journal.recorder import Recorder


def renders_alive() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "loopctl-projections"]


def test_a_background_render_is_done_and_current_when_a_foreground_one_returns(
    repo: Path,
) -> None:
    make_project(repo, "fixer.py")
    rec = Recorder(load_project(repo))
    rec.emit(EventType.TICK_STARTED, run="r1", loop="l", kind="tick")
    rec.emit(EventType.TASK_FOUND, run="r1", loop="l", task="first", prompt="p")
    with rec._projections.lock:  # the background render starts, and waits here
        rec.refresh_projections_soon()
    # Recorded after the background render began: the foreground render must still show it.
    rec.emit(EventType.TASK_FOUND, run="r1", loop="l", task="second", prompt="p")
    rec.refresh_projections()
    assert renders_alive() == []
    state = rec.paths.state_md.read_text(encoding="utf-8")
    assert "first" in state
    assert "second" in state
    assert not list(rec.paths.loop_dir.glob("*.tmp*"))


def test_a_background_render_that_fails_leaves_the_failure_to_the_foreground(
    repo: Path,
) -> None:
    make_project(repo, "fixer.py")
    rec = Recorder(load_project(repo))
    rec.emit(EventType.TASK_FOUND, run="r1", loop="l", task="first", prompt="p")
    rec.paths.state_md.unlink(missing_ok=True)
    rec.paths.state_md.mkdir()  # STATE.md cannot be written: a folder is in its place
    rec.refresh_projections_soon()  # must not raise, nor kill the caller's thread
    with pytest.raises(IsADirectoryError):
        rec.refresh_projections()
    assert renders_alive() == []


def paced_timers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "loopctl-projections-paced"]


def _paced(repo: Path, pace_s: float) -> Recorder:
    """A paced recorder (`up`'s) whose first render is done: the next refresh waits."""
    make_project(repo, "fixer.py")
    rec = Recorder(load_project(repo), pace_s=pace_s)
    rec.emit(EventType.TICK_STARTED, run="r1", loop="l", kind="tick")
    rec.emit(EventType.TASK_FOUND, run="r1", loop="l", task="first", prompt="p")
    rec.refresh_projections()
    assert "first" in rec.paths.state_md.read_text(encoding="utf-8")
    rec.emit(EventType.TASK_FOUND, run="r1", loop="l", task="second", prompt="p")
    return rec


def test_a_refresh_held_back_by_the_pace_is_rendered_by_its_timer(repo: Path) -> None:
    rec = _paced(repo, pace_s=0.2)

    rec.refresh_projections()

    (timer,) = paced_timers()  # one timer, whatever the number of refreshes it holds back
    rec.refresh_projections()
    assert paced_timers() == [timer]
    timer.join()  # synchronised on the timer itself, however slow the machine
    assert "second" in rec.paths.state_md.read_text(encoding="utf-8")


def test_a_paced_refresh_soon_waits_for_the_pace_and_the_flush_renders_it(repo: Path) -> None:
    rec = _paced(repo, pace_s=3600.0)

    rec.refresh_projections_soon()

    for thread in renders_alive():  # an unpaced background render, were one started
        thread.join()
    assert "second" not in rec.paths.state_md.read_text(encoding="utf-8")
    assert len(paced_timers()) == 1
    rec.flush_projections()
    assert "second" in rec.paths.state_md.read_text(encoding="utf-8")
    # The flush rendered what the timer held: the timer is cancelled, not left for an hour.
    for thread in paced_timers():
        thread.join(timeout=60)
    assert paced_timers() == []

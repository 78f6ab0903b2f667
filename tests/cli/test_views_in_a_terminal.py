"""The terminal views in a real pseudo-terminal at 80 and 120 columns (issue 29 item 3).

A real run of a command agent on a real repository outside /tmp, its output read from the
terminal it was given: each phase named with its elapsed time, the inbox item a run opened
named with the command that shows it, the next step after success, `status` seeing a loop a
foreground `loopctl run` schedules, and no line wider than the terminal.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import loopctl_argv, run_loopctl
from support.outside_tmp import outside_tmp
from support.repos import GOAL_BRANCH, commit_all, make_project, make_repo, write_loop

from loopctl.cli.phases import PhaseClock
from loopctl.cli.schedule_view import ScheduleView
from loopctl.commands.status import describe
from loopctl.journal.events import Event, EventLog
from loopctl.text import shorten

# CSI sequences (colours, cursor moves), OSC sequences, and the lone escapes rich writes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>()][0-9A-B]?")


def _in_terminal(cwd: Path, columns: int, *args: str, timeout: float = 120) -> tuple[int, str]:
    """Run loopctl with a pseudo-terminal of `columns` columns as stdin, stdout and stderr;
    its exit code and what it wrote, escape sequences removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "40", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    process = subprocess.Popen(
        loopctl_argv(*args), cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                process.kill()
                pytest.fail(f"loopctl {' '.join(args)} wrote nothing for {timeout}s")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every end of the terminal is closed, the program ended
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
    code = process.wait(timeout=timeout)
    return code, _ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))


def _lines(text: str) -> list[str]:
    return [part for line in text.split("\n") for part in line.split("\r")]


def _assert_fits(text: str, columns: int) -> None:
    wide = [line for line in _lines(text) if len(line.rstrip()) > columns]
    assert not wide, f"lines wider than {columns} columns:\n" + "\n".join(wide)


@pytest.fixture
def checkout() -> Iterator[Path]:
    with outside_tmp("views") as base:
        yield base


@pytest.fixture(autouse=True)
def _home(checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = checkout / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


@pytest.mark.parametrize("columns", [80, 120])
def test_a_goal_names_its_phases_and_says_what_next(checkout: Path, columns: int) -> None:
    repo = make_project(make_repo(checkout / "repo"))

    code, shown = _in_terminal(repo, columns, "goal", "tests green")

    assert code == 0, shown
    for phase in ("baseline check", "agent", "checks", "commit"):
        assert re.search(rf"task tests-green {phase} took \d+\.\ds", shown) or phase == "agent", (
            phase,
            shown,
        )
    assert "task tests-green agent (maker maker)..." in shown, shown
    assert f"next: git merge {GOAL_BRANCH}" in shown
    assert f"see the change: git diff HEAD...{GOAL_BRANCH}" in shown
    _assert_fits(shown, columns)

    run = EventLog(repo / ".loop" / "log" / "events.jsonl").read()[0].run
    assert run is not None
    code, replayed = _in_terminal(repo, columns, "replay", run)
    assert code == 0, replayed
    assert re.search(r"task tests-green baseline check took \d+\.\ds", replayed), replayed
    assert re.search(r"task tests-green checks took \d+\.\ds", replayed), replayed


@pytest.mark.parametrize("columns", [80, 120])
def test_an_item_a_run_opens_is_named_with_the_command_that_shows_it(
    checkout: Path, columns: int
) -> None:
    prompts = checkout / "prompts" / "seen.txt"
    prompts.parent.mkdir()
    repo = make_project(make_repo(checkout / "repo"), "asks.py", prompts)

    code, shown = _in_terminal(repo, columns, "goal", "tests green")

    assert code == 1, shown
    items = run_loopctl(repo, "inbox", "--json")
    listed = json.loads(items.stdout)
    ids = [i["id"] for i in (listed["inbox"] if isinstance(listed, dict) else listed)]
    assert len(ids) == 1, items.stdout
    # Once as the run opens it, once in the run's end summary.
    assert shown.count(f"needs you: loopctl inbox show {ids[0]}") == 2, shown
    _assert_fits(shown, columns)


@pytest.mark.parametrize("columns", [80, 120])
def test_status_sees_a_loop_a_foreground_run_schedules(checkout: Path, columns: int) -> None:
    repo = make_project(make_repo(checkout / "repo"))
    write_loop(repo, "beat", 'goal = "tests green"\nprompt = "keep the tests green"\n')
    commit_all(repo, "a loop")
    runner = subprocess.Popen(
        loopctl_argv("run", "beat", "--every", "1h"),
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert runner.stderr is not None
        # Its first tick ends (a plain line on a pipe); it then waits an hour for the next.
        for line in runner.stderr:
            if re.search(r"run \S+ done", line):
                break
        code, shown = _in_terminal(repo, columns, "status")
    finally:
        runner.send_signal(signal.SIGINT)
        runner.wait(timeout=60)

    assert code == 0, shown
    assert "up: not running" not in shown
    assert f"scheduled by loopctl run: beat (pid {runner.pid})" in shown, shown
    assert "every 1h" in shown
    assert re.search(r"\b(now|\d+s ago)\b", shown), shown  # the last run, as a relative time
    _assert_fits(shown, columns)

    code, after = _in_terminal(repo, columns, "status")
    assert "up: not running" in after, after  # it stopped: nothing schedules the loop now


def test_a_summary_is_shortened_at_a_word_boundary() -> None:
    said = "fix the failing test in calc so that add returns the sum again"
    short = shorten(said, 30)

    assert len(short) <= 30
    assert short.endswith("…")
    assert said.startswith(short[:-1])
    assert said[len(short) - 1] == " "  # cut where a word ends, never inside one
    assert shorten("ok", 30) == "ok"


def test_phases_are_read_from_the_events_a_run_writes(checkout: Path) -> None:
    repo = make_project(make_repo(checkout / "repo"))
    done = run_loopctl(repo, "goal", "tests green")
    assert done.returncode == 0, done.stderr

    clock = PhaseClock()
    said = [
        line
        for e in EventLog(repo / ".loop" / "log" / "events.jsonl").read()
        for line in clock.lines(e)
    ]

    starts = [line.removesuffix("...").split(" (")[0] for line in said if line.endswith("...")]
    assert starts == [
        f"task tests-green {p}" for p in ("baseline check", "agent", "checks", "commit")
    ]


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ("the previous tick is still running", "skipped: the previous tick is still running"),
        ("", "skipped: no reason recorded"),  # a log written before every skip had one
    ],
)
def test_a_skipped_tick_always_says_why(reason: str, shown: str) -> None:
    skipped = Event(
        seq=7,
        ts="2026-12-05T10:30:00.000001+00:00",
        type="tick_skipped",
        run=None,
        loop="beat",
        task=None,
        data={"reason": reason, "trigger": {"due": "2026-12-05T10:30:00+00:00"}},
    )
    out = io.StringIO()
    with ScheduleView({"beat": "every 1m"}, live=False, stream=out) as view:
        view(skipped)

    assert shown in out.getvalue(), out.getvalue()
    assert shown in describe(skipped)

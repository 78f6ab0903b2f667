"""Liveness (issue 30): a turn or a check that makes no progress for `[budget] max_idle` ends
the task as `stalled`, with an inbox item saying what it last did. Real agent processes, real
git, the real CLI; each hanging agent gives up by itself after 120 s (a safety net)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.backends import install_fake_clis, set_scenario
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events
from support.repos import commit_all, make_project, write_agent, write_config, write_loop

from loopctl.journal.overnight import Stalled
from loopctl.journal.schema import read_note, task_finished

TASK = "tests-green"
PY = sys.executable
IDLE = '\n[budget]\nmax_idle = "1s"\n'
# On the base (a - b) it fails at once; once fixed it hangs without a word.
HANGS_ONCE_FIXED = (
    PY,
    "-B",
    "-c",
    "import calc, sys, time; calc.add(2, 3) == 5 or sys.exit(1); time.sleep(120)",
)


def _stalls(repo: Path) -> list[Stalled]:
    return [note for e in events(repo, "note", TASK) if (note := read_note(Stalled, e))]


def _failed_items(repo: Path) -> list[str]:
    return [e.data["summary"] for e in events(repo, "inbox_opened") if e.data["kind"] == "failed"]


def _goal(repo: Path) -> None:
    done = run_loopctl(repo, "goal", "tests green", timeout=100)
    assert_clean_exit(done, 1)


def test_a_silent_hung_maker_is_ended_as_stalled(repo: Path) -> None:
    make_project(repo, "stalls.py", "silent", agent_timeout="90s", config_extra=IDLE)

    _goal(repo)

    (finished,) = [task_finished(e) for e in events(repo, "task_finished", TASK)]
    assert (finished.status, finished.outcome) == ("stopped", "stalled")
    assert "made no progress for 1s" in finished.reason
    assert "it printed nothing" in finished.reason
    # One attempt: another would hang the same way.
    assert len(events(repo, "attempt_started", TASK)) == 1
    (agent,) = events(repo, "agent_finished", TASK)
    assert agent.data["status"] == "stalled"
    (note,) = _stalls(repo)
    assert (note.role, note.agent, note.idle_s, note.last) == ("maker", "maker", 1.0, "")
    (item,) = _failed_items(repo)
    assert "stalled: the maker 'maker' made no progress for 1s" in item
    # The reason is what STATE.md shows of the task (its outcome's rendering is issue 30 item 2).
    assert (
        "stalled: the maker 'maker' made no progress" in (repo / ".loop" / "STATE.md").read_text()
    )


def test_a_maker_that_prints_then_hangs_is_quoted_in_the_inbox(repo: Path) -> None:
    make_project(repo, "stalls.py", "talks", agent_timeout="90s", config_extra=IDLE)

    _goal(repo)

    (finished,) = [task_finished(e) for e in events(repo, "task_finished", TASK)]
    assert finished.outcome == "stalled"
    (note,) = _stalls(repo)
    assert note.last == "reading calc.py, then thinking"
    (item,) = _failed_items(repo)
    assert "it last printed: 'reading calc.py, then thinking'" in item
    assert "it last printed" in (repo / ".loop" / "INBOX.md").read_text()


def test_a_maker_that_writes_files_without_printing_is_not_stalled(repo: Path) -> None:
    # Silent for 5 s against a max_idle of 2 s (room for a busy machine), but rewriting a file
    # in its worktree all along.
    idle = '\n[budget]\nmax_idle = "2s"\n'
    make_project(repo, "stalls.py", "writes", "5", agent_timeout="90s", config_extra=idle)

    done = run_loopctl(repo, "goal", "tests green", timeout=100)

    assert_clean_exit(done, 0)
    (finished,) = [task_finished(e) for e in events(repo, "task_finished", TASK)]
    assert finished.status == "done"
    assert finished.outcome != "stalled"
    assert _stalls(repo) == []


def test_a_maker_that_dies_fails_and_is_not_stalled(repo: Path) -> None:
    make_project(repo, "fails.py", config_extra=IDLE)

    _goal(repo)

    finished = [task_finished(e) for e in events(repo, "task_finished", TASK)]
    assert [f.outcome for f in finished] != ["stalled"]
    assert finished[-1].status in ("failed", "stopped")
    assert next(e.data["status"] for e in events(repo, "agent_finished", TASK)) == "error"
    assert _stalls(repo) == []


def test_a_hung_check_is_ended_as_stalled(repo: Path) -> None:
    make_project(repo, "fixer.py", check=HANGS_ONCE_FIXED, config_extra=IDLE)

    _goal(repo)

    (finished,) = [task_finished(e) for e in events(repo, "task_finished", TASK)]
    assert (finished.status, finished.outcome) == ("stopped", "stalled")
    assert "stalled: the check `" in finished.reason
    (note,) = _stalls(repo)
    assert note.command == HANGS_ONCE_FIXED
    assert note.attempt == 1
    (check,) = events(repo, "check_finished", TASK)
    assert check.data["passed"] is False
    assert check.data["commands"][0]["stalled"] is True
    (item,) = _failed_items(repo)
    assert "made no progress for 1s" in item


def test_a_check_that_hangs_on_the_base_stops_the_task_before_any_agent(repo: Path) -> None:
    hangs = (PY, "-B", "-c", "import time; time.sleep(120)")
    make_project(repo, "fixer.py", check=hangs, config_extra=IDLE)

    _goal(repo)

    (finished,) = [task_finished(e) for e in events(repo, "task_finished", TASK)]
    assert finished.outcome == "stalled"
    assert events(repo, "agent_started", TASK) == []


def test_a_cli_whose_stream_stops_is_quoted_as_its_stream_renders(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # codex starts a command that never returns: its event stream stops there.
    install_fake_clis(tmp_path / "bin", monkeypatch)
    set_scenario("codex", mode="hang")
    make_project(repo, "fixer.py", config_extra=IDLE)
    (repo / "agents" / "maker.toml").write_text(
        'description = "codex"\nbackend = "codex"\ntimeout = "90s"\n'
        '\n[sandbox]\nwrite = ["~/.fake-cli"]\n'
    )
    commit_all(repo, "codex maker")

    _goal(repo)

    (finished,) = [task_finished(e) for e in events(repo, "task_finished", TASK)]
    assert finished.outcome == "stalled"
    (note,) = _stalls(repo)
    assert note.last == "$ npm test -- --watch"
    (item,) = _failed_items(repo)
    assert "it last printed: '$ npm test -- --watch'" in item


def test_a_cli_writing_only_its_own_session_is_not_stalled(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Silent for 5 s against a max_idle of 2 s, its worktree untouched until the end: only its
    session transcript, in the sandbox's private copy of ~/.claude, grows. That is progress."""
    install_fake_clis(tmp_path / "bin", monkeypatch)
    set_scenario("claude", mode="quiet_transcript", seconds=5)
    make_project(repo, "fixer.py", config_extra='\n[budget]\nmax_idle = "2s"\n')
    (repo / "agents" / "maker.toml").write_text(
        'description = "claude"\nbackend = "claude"\ntimeout = "90s"\n'
        '\n[sandbox]\nwrite = ["~/.fake-cli"]\n'
    )
    commit_all(repo, "claude maker")

    done = run_loopctl(repo, "goal", "tests green", timeout=100)

    assert_clean_exit(done, 0)
    (finished,) = [task_finished(e) for e in events(repo, "task_finished", TASK)]
    assert finished.status == "done"
    assert _stalls(repo) == []


def test_a_hung_checker_agent_is_ended_as_stalled(repo: Path) -> None:
    make_project(repo, "fixer.py")
    write_agent(repo, "judge", "stalls.py", "silent", timeout="90s")
    write_config(
        repo,
        'version = 1\n\n[defaults]\nmaker = "maker"\nchecker = "judge"\n' + IDLE,
    )
    commit_all(repo, "a checker that hangs")

    done = run_loopctl(repo, "goal", "add() adds its arguments", timeout=100)

    assert_clean_exit(done, 1)
    finished = task_finished(events(repo, "task_finished")[-1])
    assert (finished.status, finished.outcome) == ("stopped", "stalled")
    assert "the checker 'judge' made no progress for 1s" in finished.reason
    assert [str(e.data["role"]) for e in events(repo, "agent_finished")] == ["maker", "checker"]


def test_a_loops_own_budget_sets_max_idle(repo: Path) -> None:
    # The project default (15m) would let it hang; the loop's own [budget] does not.
    make_project(repo, "stalls.py", "talks", agent_timeout="90s")
    write_loop(repo, "nightly", 'goal = "tests green"\n' + IDLE)
    commit_all(repo, "a loop with its own max_idle")

    done = run_loopctl(repo, "run", "nightly", "--once", timeout=100)

    assert_clean_exit(done, 1)
    (finished,) = [task_finished(e) for e in events(repo, "task_finished")]
    assert finished.outcome == "stalled"
    assert "it last printed: 'reading calc.py, then thinking'" in finished.reason

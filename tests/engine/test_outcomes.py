"""One typed outcome per task and per run (issue 30 item 2, invariant 14): no `task_finished`
or `tick_finished` is written without one, and real runs (scripted agents as real processes,
real git, the real CLI) end in the outcome that says what happened."""

from __future__ import annotations

import ast
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl, spawn_loopctl
from support.journal import events
from support.processes import SAFETY_NET, kill_if_alive, read_pid, wait_for, wait_until_gone
from support.repos import commit_all, make_project

import loopctl
from loopctl.journal.schema import task_finished, tick_finished
from loopctl.journal.statuses import Outcome

TASK = "tests-green"
PACKAGE = Path(loopctl.__file__).parent
# The events, and the engine's and delivery's one way each to end a task (mypy holds these too).
FINISHING = ("TaskFinished", "TickFinished", "Ending", "finish_task")


def _constructions(path: Path) -> Iterator[tuple[int, str, bool]]:
    """Each call in `path` that finishes a task or run: line, name, whether it names outcome=."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name in FINISHING:
            named = any(k.arg == "outcome" for k in node.keywords)
            yield node.lineno, name, named


def test_every_finishing_event_loopctl_writes_names_its_outcome() -> None:
    found = [
        (path.relative_to(PACKAGE.parent), line, name, named)
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, name, named in _constructions(path)
    ]
    missing = [f"{path}:{line}: {name}(…)" for path, line, name, named in found if not named]
    assert missing == [], "finishing events without outcome="
    # The scan sees the producers (the engine's run, a delivery's ending, a superseded gate…).
    assert len(found) >= 25


def test_the_scan_catches_a_construction_without_an_outcome(tmp_path: Path) -> None:
    source = tmp_path / "producer.py"
    source.write_text(
        "rec.record(TaskFinished(status='done', outcome=Outcome.DONE))\n"
        "rec.record(schema.TickFinished(status='done'))\n"
    )

    assert list(_constructions(source)) == [(1, "TaskFinished", True), (2, "TickFinished", False)]


# --- real runs ----------------------------------------------------------------------------------


def _outcomes(repo: Path) -> tuple[list[str | None], list[str | None]]:
    """Every task's and every run's recorded outcome, in log order."""
    tasks = [task_finished(e).outcome for e in events(repo, "task_finished", TASK)]
    runs = [tick_finished(e).outcome for e in events(repo, "tick_finished")]
    return tasks, runs


def _goal(repo: Path, code: int, *args: str) -> None:
    assert_clean_exit(run_loopctl(repo, "goal", "tests green", *args, timeout=SAFETY_NET), code)


def test_a_fixed_goal_is_done(repo: Path) -> None:
    make_project(repo, "fixer.py")

    _goal(repo, 0)

    assert _outcomes(repo) == (["done"], ["done"])


def test_a_goal_that_already_holds_has_nothing_to_do(repo: Path) -> None:
    make_project(repo, "fixer.py")
    (repo / "calc.py").write_text((repo / "calc.py").read_text().replace("a - b", "a + b"))
    commit_all(repo, "fixed by hand")

    _goal(repo, 0)

    assert _outcomes(repo) == (["nothing-to-do"], ["nothing-to-do"])
    assert events(repo, "attempt_started") == []


def test_the_same_failure_twice_is_a_repeated_failure(repo: Path) -> None:
    make_project(repo, "never_fixes.py", config_extra="\n[budget]\nmax_iterations = 5\n")

    _goal(repo, 1)

    assert _outcomes(repo) == (["repeated-failure"], ["repeated-failure"])
    (item,) = [e for e in events(repo, "inbox_opened") if e.data["kind"] == "failed"]
    assert item.data["evidence"]["outcome"] == "repeated-failure"


def test_attempts_that_run_out_are_a_failure(repo: Path) -> None:
    make_project(repo, "never_fixes.py", config_extra="\n[budget]\nmax_iterations = 1\n")

    _goal(repo, 1)

    assert _outcomes(repo) == (["failed"], ["failed"])


def test_a_spent_budget_is_a_budget_stop(repo: Path) -> None:
    make_project(
        repo,
        "never_fixes.py",
        "--tokens",
        "1200",
        "--cost",
        "0.01",
        config_extra="\n[budget]\nmax_usd = 0.005\nstop_after_identical_failures = 5\n",
    )

    _goal(repo, 1)

    assert _outcomes(repo) == (["budget-stop"], ["budget-stop"])


def test_a_question_needs_a_reply(repo: Path, tmp_path: Path) -> None:
    make_project(repo, "asks.py", tmp_path / "prompts")

    _goal(repo, 1)

    assert _outcomes(repo) == (["needs-reply"], ["needs-reply"])
    (item,) = [e for e in events(repo, "inbox_opened") if e.data["kind"] == "escalation"]
    done = run_loopctl(repo, "inbox", "--json")
    assert_clean_exit(done, 0)
    assert '"outcome": "needs-reply"' in done.stdout
    assert item.data["id"] in done.stdout


def test_a_planted_hook_is_tampering(repo: Path, tmp_path: Path) -> None:
    make_project(repo, "plants_hook.py", tmp_path / "planted-ran")

    _goal(repo, 1)

    assert _outcomes(repo) == (["tampered"], ["tampered"])


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def _stop_during_maker(
    repo: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]], signum: int
) -> None:
    """Start a goal whose maker blocks, then signal its runner (and end the maker)."""
    marker = tmp_path / "maker-started"
    make_project(repo, "slow_fixer.py", marker, tmp_path / "release")
    proc = spawn_loopctl(repo, "goal", "tests green")
    spawned.append(proc)
    agent = wait_for(lambda: read_pid(marker), "the maker to start", timeout=SAFETY_NET)
    proc.send_signal(signum)
    proc.communicate(timeout=SAFETY_NET)
    kill_if_alive(agent)  # after kill -9 the maker outlives its runner, in its own session
    assert wait_until_gone([agent], timeout=SAFETY_NET) == []


@pytest.mark.parametrize(
    ("signum", "named"),
    [(signal.SIGKILL, Outcome.CRASHED_RECOVERED), (signal.SIGINT, Outcome.INTERRUPTED)],
)
def test_a_run_closed_after_it_died_or_was_stopped_says_which(
    repo: Path,
    tmp_path: Path,
    spawned: list[subprocess.Popen[str]],
    signum: int,
    named: Outcome,
) -> None:
    _stop_during_maker(repo, tmp_path, spawned, signum)
    interrupted = events(repo, "run_interrupted")
    assert len(interrupted) == (1 if signum == signal.SIGINT else 0)
    if interrupted:
        assert interrupted[0].data["outcome"] == "interrupted"

    (tmp_path / "release").touch()
    _goal(repo, 0, "--fresh")

    closed, fresh = events(repo, "tick_finished")
    assert closed.run != fresh.run
    assert (tick_finished(closed).outcome, tick_finished(fresh).outcome) == (named, "done")
    assert _outcomes(repo)[0] == [named, "done"]

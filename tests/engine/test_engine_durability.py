"""Invariants 1 and 2 end to end: kill -9, Ctrl-C, torn logs, whole projections, one runner."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, invoke, run_loopctl, spawn_loopctl
from support.journal import attempt_starts, events
from support.processes import SAFETY_NET, kill_if_alive, read_pid, wait_for, wait_until_gone
from support.repos import GOAL_BRANCH, PY, git, make_project, toml_value, write_loop

from loopctl.lock import RunnerLock

TASK = "tests-green"


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[str]]]:
    """Runner subprocesses a test starts; any still running at the end are killed."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


def _signal_runner(proc: subprocess.Popen[str], signum: int) -> tuple[int, str, str]:
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=SAFETY_NET)
    return proc.returncode, out, err


def assert_projections_whole(repo: Path) -> None:
    """STATE.md and INBOX.md are complete renderings, not torn halves."""
    state = (repo / ".loop" / "STATE.md").read_text()
    assert state.startswith("# Loop state\n")
    assert "## Notes" in state
    assert state.endswith("\n")
    inbox = (repo / ".loop" / "INBOX.md").read_text()
    assert inbox.startswith("# Inbox\n")
    assert inbox.endswith("\n")
    assert not list((repo / ".loop").glob("*.tmp*"))


def _slow_goal(repo: Path, tmp_path: Path) -> tuple[Path, Path]:
    marker, release = tmp_path / "maker-started", tmp_path / "release"
    make_project(repo, "slow_fixer.py", marker, release)
    return marker, release


def _kill_during_maker(
    repo: Path, marker: Path, spawned: list[subprocess.Popen[str]], *args: str
) -> None:
    """Start a runner, wait until its maker blocks, then kill -9 the runner (and the orphan)."""
    marker.unlink(missing_ok=True)
    proc = spawn_loopctl(repo, *args)
    spawned.append(proc)
    agent = wait_for(lambda: read_pid(marker), "the maker to start")
    code, _out, _err = _signal_runner(proc, signal.SIGKILL)
    assert code == -signal.SIGKILL
    # The agent runs in its own session and outlives a kill -9 of its runner.
    kill_if_alive(agent)
    assert wait_until_gone([agent], timeout=10) == []


def test_kill_during_the_maker_resumes_and_redoes_the_attempt_once(
    repo: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    marker, release = _slow_goal(repo, tmp_path)
    _kill_during_maker(repo, marker, spawned, "goal", "tests green")
    assert attempt_starts(repo, TASK) == [1]
    assert events(repo, "tick_finished") == []
    assert_projections_whole(repo)

    release.touch()
    done = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(done, 0)
    assert attempt_starts(repo, TASK) == [1, 1]
    runs = {e.run for e in events(repo) if e.run}
    assert len(runs) == 1, "the resumed run keeps its id"
    assert len(events(repo, "run_resumed")) == 1
    assert len(events(repo, "tick_finished")) == 1
    assert len(events(repo, "commit_created", TASK)) == 1
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    assert_projections_whole(repo)


def test_an_attempt_interrupted_twice_is_not_redone_a_third_time(
    repo: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    marker, release = _slow_goal(repo, tmp_path)
    _kill_during_maker(repo, marker, spawned, "goal", "tests green")
    _kill_during_maker(repo, marker, spawned, "goal", "tests green")
    assert attempt_starts(repo, TASK) == [1, 1]

    release.touch()
    done = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(done, 0)
    assert attempt_starts(repo, TASK) == [1, 1, 2]
    verdicts = [(e.data["attempt"], e.data["verdict"]) for e in events(repo, "attempt_finished")]
    assert verdicts == [(1, "failed"), (2, "passed")]


def test_kill_after_one_task_finished_does_not_redo_it(
    repo: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    marker, release = tmp_path / "maker-started", tmp_path / "release"
    make_project(repo, "slow_fixer.py", marker, release, "slow")
    items = [{"id": "fast"}, {"id": "slow"}]
    code = f"import json; print(json.dumps({items!r}))"
    write_loop(
        repo,
        "pair",
        'goal = "tests green"\nprompt = "fix"\n\n'
        f"[tasks]\ncommand = {toml_value([PY, '-c', code])}\n\n[budget]\nmax_parallel = 1\n",
    )
    _kill_during_maker(repo, marker, spawned, "run", "pair", "--once")
    assert [e.task for e in events(repo, "task_finished")] == ["fast"]
    fast_commit = events(repo, "commit_created", "fast")[0].data["sha"]

    release.touch()
    done = run_loopctl(repo, "run", "pair", "--once")

    assert_clean_exit(done, 0)
    assert attempt_starts(repo, "fast") == [1]
    assert attempt_starts(repo, "slow") == [1, 1]
    assert [e.data["sha"] for e in events(repo, "commit_created", "fast")] == [fast_commit]
    status = {e.task: e.data["status"] for e in events(repo, "task_finished")}
    assert status == {"fast": "done", "slow": "done"}
    assert_projections_whole(repo)


def test_kill_right_after_tick_started_still_does_the_work(
    repo: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    make_project(repo, "fixer.py")
    marker, release = tmp_path / "tasks-started", tmp_path / "release"
    command = [
        PY,
        str(Path(__file__).parents[1] / "agents" / "slow_tasks.py"),
        marker,
        release,
        "t",
    ]
    write_loop(
        repo,
        "late",
        f'goal = "tests green"\nprompt = "fix"\n\n[tasks]\ncommand = {toml_value(command)}\n',
    )
    proc = spawn_loopctl(repo, "run", "late", "--once")
    spawned.append(proc)
    lister = wait_for(lambda: read_pid(marker), "the task command to start")
    # The run is recorded with its sandbox, and nothing of its tasks yet.
    assert [(e.type, e.data.get("what")) for e in events(repo)] == [
        ("tick_started", None),
        ("note", "sandbox"),
    ]
    _signal_runner(proc, signal.SIGKILL)
    kill_if_alive(lister)

    release.touch()
    done = run_loopctl(repo, "run", "late", "--once")

    assert_clean_exit(done, 0)
    assert attempt_starts(repo, "t") == [1]
    assert "return a + b" in git(repo, "show", "loop/late/t:calc.py")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_exits_130_records_it_and_the_next_run_resumes(
    repo: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]], signum: int
) -> None:
    marker, release = _slow_goal(repo, tmp_path)
    proc = spawn_loopctl(repo, "goal", "tests green")
    spawned.append(proc)
    # Synchronised on the maker's pid file; the timeouts below are only safety nets.
    agent = wait_for(lambda: read_pid(marker), "the maker to start", timeout=SAFETY_NET)

    code, out, err = _signal_runner(proc, signum)

    assert code == 130, f"stdout:\n{out}\nstderr:\n{err}"
    assert "Traceback" not in out + err
    assert "interrupted" in err
    assert len(events(repo, "run_interrupted")) == 1
    # The agent is stopped with its runner, not orphaned (it would wait 600 s for `release`).
    assert wait_until_gone([agent], timeout=SAFETY_NET) == []
    assert_projections_whole(repo)
    assert "**interrupted**" in (repo / ".loop" / "STATE.md").read_text()

    release.touch()
    done = run_loopctl(repo, "goal", "tests green", timeout=SAFETY_NET)

    assert_clean_exit(done, 0)
    assert len(events(repo, "run_resumed")) == 1
    assert attempt_starts(repo, TASK) == [1, 1]


@pytest.mark.parametrize(
    "torn", [b'{"v": 1, "seq": 99, "type": "tick_sta', b'{"v": 1, "seq": 99, "ty\n']
)
def test_a_torn_last_log_line_is_ignored_and_cut(
    repo: Path, monkeypatch: pytest.MonkeyPatch, torn: bytes
) -> None:
    make_project(repo, "never_fixes.py")
    first = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert first.exit_code == 1, first.output
    log = repo / ".loop" / "log" / "events.jsonl"
    count = len(events(repo))
    with log.open("ab") as handle:
        handle.write(torn)

    status = invoke(monkeypatch, repo, "status")
    listed = invoke(monkeypatch, repo, "log", "--json")
    inbox = invoke(monkeypatch, repo, "inbox")

    for result in (status, listed, inbox):
        assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
    assert len(lines) == count

    again = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert again.exit_code == 1, again.output
    seqs = [e.seq for e in events(repo)]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) > count
    assert torn.rstrip(b"\n") not in log.read_bytes()


def test_human_notes_in_state_md_survive_every_rewrite(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")
    first = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert first.exit_code == 1, first.output
    state_md = repo / ".loop" / "STATE.md"
    generated = state_md.read_text().split("## Notes")[0]
    notes = (
        "## Notes\n\n"
        "Don't touch `calc.mul` — it is fine.  \n"
        "| a | b |\n|---|---|\n| ünï | ✓ |\n\n"
        "```toml\n[budget]\nmax_usd = 1\n```\n\n"
        "## Also mine\n\n- a human's second section\n"
    )
    state_md.write_text(generated + notes)

    again = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert again.exit_code == 1, again.output
    text = state_md.read_text()
    assert text.endswith(notes)
    assert text.count("## Notes") == 1
    assert "Runs recorded: 2" in text


def test_a_second_runner_of_the_same_loop_is_refused(repo: Path) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "solo", 'goal = "tests green"\nprompt = "fix"\n')
    import os

    with RunnerLock(repo / ".loop" / "locks", "solo"):
        done = run_loopctl(repo, "run", "solo", "--once")

    assert_clean_exit(done, 1)
    assert f"pid {os.getpid()}" in done.stderr
    assert "solo" in done.stderr
    assert events(repo) == []


def test_a_lock_left_by_a_dead_runner_is_taken_over(
    repo: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    marker, release = _slow_goal(repo, tmp_path)
    _kill_during_maker(repo, marker, spawned, "goal", "tests green")
    release.touch()

    done = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(done, 0)


def test_interrupt_with_parallel_tasks_stops_every_agent(
    repo: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    release = tmp_path / "release"
    make_project(repo, "slow_fixer.py", tmp_path / "started-{task}", release)
    items = [{"id": "a"}, {"id": "b"}]
    code = f"import json; print(json.dumps({items!r}))"
    write_loop(
        repo,
        "duo",
        'goal = "tests green"\nprompt = "fix"\n\n'
        f"[tasks]\ncommand = {toml_value([PY, '-c', code])}\n\n[budget]\nmax_parallel = 2\n",
    )
    proc = spawn_loopctl(repo, "run", "duo", "--once")
    spawned.append(proc)
    agents = [
        wait_for(partial(read_pid, tmp_path / f"started-{t}"), f"agent {t}", timeout=SAFETY_NET)
        for t in "ab"
    ]
    try:
        proc.send_signal(signal.SIGINT)
        # Both agents wait 600 s for `release`: a runner that does not stop them on Ctrl-C is
        # still waiting when the safety net runs out.
        try:
            out, err = proc.communicate(timeout=SAFETY_NET)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the runner did not stop within {SAFETY_NET:g}s of Ctrl-C")
        assert proc.returncode == 130, f"stdout:\n{out}\nstderr:\n{err}"
        assert "Traceback" not in out + err
        assert len(events(repo, "run_interrupted")) == 1
        assert wait_until_gone(agents, timeout=SAFETY_NET) == []
    finally:
        for pid in agents:
            kill_if_alive(pid)


def test_a_second_goal_runner_is_refused_while_the_first_works(
    repo: Path, tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    marker, release = _slow_goal(repo, tmp_path)
    first = spawn_loopctl(repo, "goal", "tests green")
    spawned.append(first)
    wait_for(lambda: read_pid(marker), "the first runner's maker to start")

    second = run_loopctl(repo, "goal", "tests green")
    release.touch()
    out, err = first.communicate(timeout=30)

    assert_clean_exit(second, 1)
    assert f"pid {first.pid}" in second.stderr
    assert first.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    assert len(events(repo, "tick_started")) == 1
    assert attempt_starts(repo, TASK) == [1]


def test_damage_before_the_last_line_is_reported_not_ignored(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")
    first = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert first.exit_code == 1, first.output
    log = repo / ".loop" / "log" / "events.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    found = next(n for n, line in enumerate(lines) if b'"task_found"' in line)
    assert 0 < found < len(lines) - 1  # a record in the middle, not the last one
    lines[found] = lines[found].replace(b'"task_found"', b'"task_fouXd"')
    log.write_bytes(b"".join(lines))
    damaged = log.read_bytes()

    for args in (("status",), ("goal", "tests green", "--max-iterations", "1")):
        done = run_loopctl(repo, *args)
        assert_clean_exit(done, 1)
        assert f"{log}:{found + 1}:" in done.stderr, done.stderr
    assert log.read_bytes() == damaged  # nothing appended after a record it cannot trust

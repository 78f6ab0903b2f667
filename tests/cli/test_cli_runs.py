"""The inspection commands over real runs: status, log, replay, inbox, worktrees, demo, errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.journal import events
from support.repos import (
    GOAL_BRANCH,
    git,
    loop_worktrees,
    make_project,
    write_agent,
    write_config,
    write_loop,
)

from loopctl.journal import history
from loopctl.lock import RunnerLock

TASK = "tests-green"


def _payload(stdout: str, key: str) -> Any:
    """The listing in a --json document, whether bare or wrapped as {"version", key: ...}."""
    data = json.loads(stdout)
    return data[key] if isinstance(data, dict) and key in data else data


def _failed_goal(repo: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert result.exit_code == 1, result.output
    run = events(repo, "tick_started")[-1].run
    assert run is not None
    return run


def test_replay_rebuilds_a_run_from_a_prefix_of_its_id(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")
    run = _failed_goal(repo, monkeypatch)

    shown = invoke(monkeypatch, repo, "replay", run[:12])
    as_json = invoke(monkeypatch, repo, "replay", run[:12], "--json")

    assert shown.exit_code == 0, shown.output
    text = shown.stdout
    assert run in text
    for expected in ("goal started", "attempt 1 started", "check failed", "task failed"):
        assert expected in text, text
    assert f"task {TASK}: failed after 1 attempt(s)" in text
    # The timeline is in log order.
    assert text.index("attempt 1 started") < text.index("check failed") < text.index("task failed")
    assert as_json.exit_code == 0, as_json.output
    replay = _payload(as_json.stdout, "replay")
    assert replay["run"] == run
    assert replay["tasks"][TASK]["attempts"][0]["verdict"] == "failed"
    assert [e["seq"] for e in replay["events"]] == sorted(e["seq"] for e in replay["events"])


def test_replay_of_an_unknown_run_is_a_usage_error(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")
    run = _failed_goal(repo, monkeypatch)

    done = run_loopctl(repo, "replay", "no-such-run")

    assert_clean_exit(done, 2)
    assert "no-such-run" in done.stderr
    assert run in done.stderr  # it names the runs there are


def test_log_json_is_one_parsable_event_per_line_and_filters_by_loop(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")
    write_loop(
        repo, "other", 'goal = "tests green"\nprompt = "fix"\n\n[budget]\nmax_iterations = 1\n'
    )
    _failed_goal(repo, monkeypatch)
    assert invoke(monkeypatch, repo, "run", "other", "--once").exit_code == 1

    everything = invoke(monkeypatch, repo, "log", "--json")
    only_other = invoke(monkeypatch, repo, "log", "other", "--json")
    plain = invoke(monkeypatch, repo, "log")

    assert everything.exit_code == 0, everything.output
    lines = [json.loads(line) for line in everything.stdout.splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert {line["loop"] for line in lines} == {"goal", "other"}
    assert all({"seq", "ts", "type", "run", "loop", "task", "data"} <= set(line) for line in lines)
    other = [json.loads(line) for line in only_other.stdout.splitlines()]
    assert other
    assert {line["loop"] for line in other} == {"other"}
    assert plain.exit_code == 0
    assert len(plain.stdout.splitlines()) == len(lines)


def test_status_json_names_the_pid_of_a_running_loop(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "busy", 'goal = "tests green"\nprompt = "fix"\n')

    with RunnerLock(repo / ".loop" / "locks", "busy"):
        held = invoke(monkeypatch, repo, "status", "--json")
    free = invoke(monkeypatch, repo, "status", "--json")

    rows = {r["loop"]: r for r in _payload(held.stdout, "status")}
    assert rows["busy"]["running_pid"] == os.getpid()
    assert rows["busy"]["last_status"] is None
    rows = {r["loop"]: r for r in _payload(free.stdout, "status")}
    assert rows["busy"]["running_pid"] is None


def test_worktrees_lists_kept_ones_and_prune_follows_the_keep_policy(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py", config_extra='\n[worktree]\nkeep = "always"\n')
    write_agent(repo, "fixer", "fixer.py")
    write_loop(repo, "fix", 'goal = "tests green"\nprompt = "fix"\n\n[maker]\nagent = "fixer"\n')
    _failed_goal(repo, monkeypatch)
    assert invoke(monkeypatch, repo, "run", "fix", "--once").exit_code == 0

    listed = invoke(monkeypatch, repo, "worktrees", "--json")

    assert listed.exit_code == 0, listed.output
    rows = {(r["loop"], r["task"]): r for r in _payload(listed.stdout, "worktrees")}
    assert rows[("goal", TASK)]["task_status"] == "failed"
    assert rows[("goal", TASK)]["branch"] == GOAL_BRANCH
    assert rows[("fix", "main")]["task_status"] == "done"
    assert len(loop_worktrees(repo)) == 2

    # keep = "always" keeps everything; under "on-failure" only the failed one stays.
    assert (
        _payload(invoke(monkeypatch, repo, "worktrees", "prune", "--json").stdout, "pruned") == []
    )
    write_config(
        repo,
        (repo / ".loop" / "config.toml").read_text().replace('"always"', '"on-failure"'),
    )
    dry = invoke(monkeypatch, repo, "worktrees", "prune", "--dry-run")
    assert len(loop_worktrees(repo)) == 2
    assert "would remove" in dry.stdout
    pruned = invoke(monkeypatch, repo, "worktrees", "prune")

    assert pruned.exit_code == 0, pruned.output
    (left,) = loop_worktrees(repo)
    assert left["branch"] == f"refs/heads/{GOAL_BRANCH}"
    assert Path(left["worktree"]).is_dir()
    assert not Path(rows[("fix", "main")]["path"]).exists()
    # Branches hold the work: pruning a worktree never deletes one.
    assert git(repo, "branch", "--list", "loop/fix/main").strip() == "loop/fix/main"

    # keep = "never": the failed task's worktree goes too.
    write_config(
        repo,
        (repo / ".loop" / "config.toml").read_text().replace('"on-failure"', '"never"'),
    )
    assert invoke(monkeypatch, repo, "worktrees", "prune").exit_code == 0
    assert loop_worktrees(repo) == []
    assert git(repo, "branch", "--list", GOAL_BRANCH).strip() == GOAL_BRANCH


def test_goal_json_reports_the_outcome(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(repo, "fixer.py")

    result = invoke(monkeypatch, repo, "goal", "tests green", "--json")

    assert result.exit_code == 0, result.output
    run = _payload(result.stdout, "run")
    assert run["status"] == "done"
    assert run["tokens"] == 1200
    assert run["cost_usd"] == pytest.approx(0.01)
    (task,) = run["tasks"]
    assert task["commit"] == git(repo, "rev-parse", GOAL_BRANCH).strip()


def test_foreseeable_errors_are_one_line_with_the_documented_code(
    repo: Path, tmp_path: Path
) -> None:
    make_project(repo, "fixer.py")
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    cases = [
        (outside, ("goal", "tests green"), 1, "not a git repository"),
        (repo, ("goal", "tests green", "--agent", "nope"), 2, "nope"),
        (repo, ("run", "nope", "--once"), 2, "nope"),
        (repo, ("goal", "tests green", "--check", ""), 2, "--check"),
    ]
    for cwd, args, code, named in cases:
        done = run_loopctl(cwd, *args)
        assert_clean_exit(done, code)
        assert named in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_missing_check_program_does_not_leave_the_run_open(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")

    done = run_loopctl(repo, "goal", "tests green", "--check", "no-such-program-xyz")

    assert_clean_exit(done, 1)
    assert "no-such-program-xyz" in done.stderr
    from loopctl.journal.events import EventLog
    from loopctl.paths import ProjectPaths

    runs = history.fold(EventLog(ProjectPaths(repo).events_file).read())
    assert all(run.finished is not None for run in runs.values())


def test_demo_runs_end_to_end_and_cleans_up(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        # Only the interpreter and system tools: no real agent CLI may be picked up.
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
    }

    done = run_loopctl(tmp_path, "demo", "--no-keep", env=env)

    assert_clean_exit(done, 0)
    # The demo's story: a fix, its diff, a gated push approved, pushed once (tests/commands/
    # test_demo.py checks each step); here, that it ends there and leaves nothing behind.
    assert "the approved commit, pushed once" in done.stdout
    assert "nothing is left behind" in done.stdout
    assert list(scratch.iterdir()) == []

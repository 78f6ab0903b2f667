"""`loopctl goal` end to end: real git, real agent processes, the real CLI."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.journal import attempt_starts, events
from support.processes import kill_if_alive, wait_until_gone
from support.repos import (
    CALC,
    GOAL_BRANCH,
    PYTEST_CHECK,
    git,
    loop_worktrees,
    make_project,
    worktree_root,
    write_agent,
)

TASK = "tests-green"


def test_goal_met_commits_the_fix_and_records_spend(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py", check=PYTEST_CHECK)
    base = git(repo, "rev-parse", "HEAD").strip()

    done = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(done, 0)
    # The fix is committed on the goal's branch, on top of the base; main is untouched.
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    assert git(repo, "rev-parse", f"{GOAL_BRANCH}~1").strip() == base
    assert git(repo, "rev-parse", "main").strip() == base
    assert "return a - b" in (repo / "calc.py").read_text()
    # keep = on-failure (the default): a finished task's worktree is let go (parked, detached,
    # in the loop's pool for the next task: see test_warm_workspaces.py), its branch stays.
    assert loop_worktrees(repo) == []
    leftovers = [p for p in worktree_root().rglob("*") if p.name == TASK and ".pool" not in p.parts]
    assert leftovers == []
    state = (repo / ".loop" / "STATE.md").read_text()
    assert f"### `{TASK}` — done" in state
    assert "**done**" in state
    assert "Nothing needs you." in (repo / ".loop" / "INBOX.md").read_text()

    finished = events(repo, "agent_finished", TASK)
    assert [(e.data["input_tokens"], e.data["output_tokens"]) for e in finished] == [(1000, 200)]
    assert finished[0].data["cost_usd"] == pytest.approx(0.01)
    commits = events(repo, "commit_created", TASK)
    assert [e.data["sha"] for e in commits] == [git(repo, "rev-parse", GOAL_BRANCH).strip()]

    result = invoke(monkeypatch, repo, "status", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    rows = payload if isinstance(payload, list) else payload.get("status", payload.get("data"))
    goal = next(r for r in rows if r["loop"] == "goal")
    assert goal["last_status"] == "done"
    assert goal["spend"]["tokens"] == 1200
    assert goal["spend"]["usd"] == pytest.approx(0.01)


def test_goal_impossible_stops_after_two_identical_failures(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 1, result.output
    assert attempt_starts(repo, TASK) == [1, 2]
    checks = events(repo, "check_finished", TASK)
    assert [c.data["passed"] for c in checks] == [False, False]
    assert checks[0].data["fingerprint"] == checks[1].data["fingerprint"]
    (task_end,) = events(repo, "task_finished", TASK)
    assert task_end.data["status"] == "stopped"
    assert "identical failures" in task_end.data["reason"]

    listed = invoke(monkeypatch, repo, "inbox", "--json")
    assert listed.exit_code == 0, listed.output
    payload = json.loads(listed.stdout)
    items = payload if isinstance(payload, list) else payload.get("inbox", payload.get("data"))
    (item,) = [i for i in items if i["task"] == TASK]
    assert item["kind"] == "failed"
    assert item["evidence"]["branch"] == GOAL_BRANCH
    assert item["evidence"]["fingerprint"] == checks[0].data["fingerprint"]
    assert item["evidence"]["attempts"] == 2
    inbox_md = (repo / ".loop" / "INBOX.md").read_text()
    assert item["id"] in inbox_md
    assert "failed" in inbox_md
    # A failed task's worktree is kept (on-failure) for a human to look at.
    (kept,) = loop_worktrees(repo)
    assert kept["branch"] == f"refs/heads/{GOAL_BRANCH}"
    assert (Path(kept["worktree"]) / "notes.txt").is_file()


def test_max_iterations_one_stops_after_one_attempt(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 1, result.output
    assert attempt_starts(repo, TASK) == [1]
    (task_end,) = events(repo, "task_finished", TASK)
    assert task_end.data["status"] == "failed"
    assert "1 attempts" in task_end.data["reason"]


@pytest.mark.parametrize(
    ("budget", "named"),
    [("max_usd = 0.005", "cost budget"), ("max_tokens = 1000", "token budget")],
)
def test_budget_stops_before_the_next_attempt(
    repo: Path, monkeypatch: pytest.MonkeyPatch, budget: str, named: str
) -> None:
    # Each attempt reports 1200 tokens and $0.01: the first runs (nothing is spent yet), then
    # the budget cannot afford another.
    make_project(
        repo,
        "never_fixes.py",
        "--tokens",
        "1200",
        "--cost",
        "0.01",
        config_extra=f"\n[budget]\n{budget}\nstop_after_identical_failures = 5\n",
    )

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 1, result.output
    assert attempt_starts(repo, TASK) == [1]
    (stop,) = events(repo, "budget_stopped", TASK)
    assert named in stop.data["reason"]
    (task_end,) = events(repo, "task_finished", TASK)
    assert task_end.data["status"] == "stopped"
    assert named in task_end.data["reason"]
    items = [e for e in events(repo, "inbox_opened", TASK) if e.data["kind"] == "failed"]
    assert len(items) == 1
    assert named in items[0].data["evidence"]["reason"]


def test_failing_agent_is_a_failed_attempt(repo: Path) -> None:
    make_project(repo, "fails.py")

    done = run_loopctl(repo, "goal", "tests green", "--max-iterations", "1")

    assert_clean_exit(done, 1)
    (finished,) = events(repo, "agent_finished", TASK)
    assert finished.data["status"] == "error"
    assert finished.data["exit_code"] == 3
    (attempt,) = events(repo, "attempt_finished", TASK)
    assert attempt.data["verdict"] == "failed"
    run = events(repo, "tick_started")[0].run
    assert run is not None
    stderr = repo / ".loop" / "runs" / run / TASK / "attempt-1" / "maker.err"
    assert "the model refused" in stderr.read_text()


class _ClockHeldUntil:
    """A stand-in for loopctl.process's `time` whose monotonic clock stands still until `ready`
    exists, then runs at the real pace.

    The agent's 1 s timeout counts from its start, and on a loaded machine the two interpreters
    of hangs.py may take longer than that to come up: holding the clock until the agent has
    written its pidfile makes the timeout hit the whole tree, however slow the machine.
    """

    def __init__(self, ready: Path) -> None:
        self._ready = ready
        self._lock = threading.Lock()
        self._held_at: float | None = None  # the first reading, returned until `ready` exists
        self._lag: float | None = None  # how long the clock was held

    def monotonic(self) -> float:
        now = time.monotonic()
        with self._lock:
            if self._lag is None:
                if self._held_at is None:
                    self._held_at = now
                if not self._ready.exists():
                    return self._held_at
                self._lag = now - self._held_at
            return now - self._lag

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _hang_project(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str = ""
) -> Path:
    import loopctl.process

    pidfile = tmp_path / "pids"
    make_project(
        repo,
        "hangs.py",
        pidfile,
        *([mode] if mode else []),
        agent_timeout="1s",
        # The pids the agent records are only ours to check outside a sandbox's pid namespace.
        config_extra='\n[sandbox]\nmode = "off"\n',
    )
    monkeypatch.setattr(loopctl.process, "time", _ClockHeldUntil(pidfile))
    return pidfile


def test_timeout_kills_the_agents_process_group(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pidfile = _hang_project(repo, tmp_path, monkeypatch)

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 1, result.output
    leader, child = (int(p) for p in pidfile.read_text().split())
    assert wait_until_gone([leader, child], timeout=10) == []
    (finished,) = events(repo, "agent_finished", TASK)
    assert finished.data["status"] == "timeout"


def test_timeout_kills_a_child_that_ignores_sigterm(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pidfile = _hang_project(repo, tmp_path, monkeypatch, "--stubborn-child")
    try:
        result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
        assert result.exit_code == 1, result.output
        leader, child = (int(p) for p in pidfile.read_text().split())
        # loopctl has returned: the group must already be gone, not merely on its way out.
        assert wait_until_gone([leader, child], timeout=3) == []
    finally:
        for pid in pidfile.read_text().split() if pidfile.exists() else []:
            kill_if_alive(int(pid))


def test_agent_cannot_leave_processes_behind(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pidfile = _hang_project(repo, tmp_path, monkeypatch, "--leave-child")
    try:
        result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
        assert result.exit_code == 1, result.output
        _leader, child = (int(p) for p in pidfile.read_text().split())
        assert wait_until_gone([child], timeout=3) == []
    finally:
        for pid in pidfile.read_text().split() if pidfile.exists() else []:
            kill_if_alive(int(pid))


def test_agent_protocol_env_argv_prompt_and_cwd(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "env_dump.py", "{prompt_file}", "{worktree}", "{task}", "{attempt}")

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 1, result.output
    (kept,) = loop_worktrees(repo)
    worktree = Path(kept["worktree"])
    record = json.loads((worktree / "env.json").read_text())
    env = record["env"]
    run = events(repo, "tick_started")[0].run
    assert env["LOOPCTL_LOOP"] == "goal"
    assert env["LOOPCTL_TASK"] == TASK
    assert env["LOOPCTL_ATTEMPT"] == "1"
    assert env["LOOPCTL_ROLE"] == "maker"
    assert env["LOOPCTL_RUN"] == run
    assert Path(env["LOOPCTL_WORKTREE"]).resolve() == worktree.resolve()
    assert Path(record["cwd"]).resolve() == worktree.resolve()
    prompt_file, worktree_arg, task_arg, attempt_arg = record["argv"][1:]
    assert Path(prompt_file) == Path(env["LOOPCTL_PROMPT_FILE"])
    assert Path(worktree_arg).resolve() == worktree.resolve()
    assert (task_arg, attempt_arg) == (TASK, "1")
    # prompt_via = "both" (the default): the same prompt on stdin and in the file.
    assert record["stdin"] == Path(prompt_file).read_text()
    assert "tests green" in record["stdin"]


def test_goal_in_place_fixes_the_checkout_without_a_branch(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    head = git(repo, "rev-parse", "HEAD").strip()

    result = invoke(monkeypatch, repo, "goal", "tests green", "--in-place")

    assert result.exit_code == 0, result.output
    assert "return a + b" in (repo / "calc.py").read_text()
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert git(repo, "branch", "--list", "loop/*").strip() == ""
    assert loop_worktrees(repo) == []


def test_a_prose_goal_is_judged_by_a_separate_checker_agent(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py", config_extra="")
    write_agent(repo, "fixer", "fixer.py")
    write_agent(repo, "judge", "judge.py")
    config = repo / ".loop" / "config.toml"
    config.write_text(
        config.read_text().replace('maker = "maker"', 'maker = "maker"\nchecker = "judge"')
    )
    condition = "add really adds"

    failed = invoke(monkeypatch, repo, "goal", condition, "--max-iterations", "1")
    met = invoke(monkeypatch, repo, "goal", condition, "--agent", "fixer")

    assert failed.exit_code == 1, failed.output
    assert met.exit_code == 0, met.output
    roles = [(e.data["role"], e.data["agent"]) for e in events(repo, "agent_finished")]
    assert roles == [
        ("maker", "maker"),
        ("checker", "judge"),
        ("maker", "fixer"),
        ("checker", "judge"),
    ]
    verdicts = [e.data["reason"] for e in events(repo, "attempt_finished")]
    assert verdicts[0] == "not met: add() still subtracts"
    assert "the diff fixes add()" in verdicts[1]
    branch = "loop/goal/add-really-adds"
    assert "return a + b" in git(repo, "show", f"{branch}:calc.py")


def test_builtin_tests_green_fails_a_run_that_skips_more_tests(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "skips_tests.py", check=None)
    (repo / "calc.py").write_text(CALC + "\n\ndef mul(a, b):\n    return a * b\n")
    (repo / "tests" / "test_mul.py").write_text(
        "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "mul")

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 1, result.output
    (check,) = events(repo, "check_finished", TASK)
    assert check.data["passed"] is False
    assert check.data["exit_code"] == 0  # pytest itself was content: 1 passed, 1 skipped
    assert check.data["source"] == "weakened"
    assert "skipped 1 test" in check.data["reason"]
    assert events(repo, "commit_created") == []


def test_the_maker_prompt_stays_bounded_over_many_attempts(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopctl.engine.prompts import MAX_PROMPT_BYTES

    noisy = (sys.executable, "-c", "import sys; print('noise ' * 5000); sys.exit(1)")
    make_project(
        repo,
        "never_fixes.py",
        agent_extra='developer_instructions = "PINNED-RULE-42: keep changes minimal."\n',
        check=noisy,
        config_extra="\n[budget]\nmax_iterations = 6\nstop_after_identical_failures = 10\n",
    )

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 1, result.output
    assert attempt_starts(repo, TASK) == [1, 2, 3, 4, 5, 6]
    prompts = sorted((repo / ".loop" / "runs").rglob("maker-prompt.md"))
    assert len(prompts) == 6
    for prompt in prompts:
        text = prompt.read_text()
        assert len(text.encode()) <= MAX_PROMPT_BYTES, prompt
        assert "PINNED-RULE-42" in text, prompt
        assert "tests green" in text, prompt

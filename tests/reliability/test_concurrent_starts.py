"""Scenario 3: 50 simultaneous `loopctl run X --once`: one runs, the rest name who holds it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import crashlab
from support.processes import wait_for

STARTS = 50


def test_fifty_simultaneous_starts_one_runner(tmp_path: Path) -> None:
    repo = crashlab.make_template(tmp_path / "repo")
    home = tmp_path / "home"
    barrier = tmp_path / "go"
    env = {**os.environ, "LOOPCTL_HOME": str(home)}
    # Each child waits on the same file so all 50 reach the lock at (nearly) the same moment.
    script = (
        "import os, sys, time\n"
        f"while not os.path.exists({str(barrier)!r}): time.sleep(0.005)\n"
        "from loopctl.__main__ import main\n"
        "sys.exit(main(['run', 'crash', '--once']))\n"
    )
    children = [
        subprocess.Popen(
            [crashlab.PY, "-c", script],
            cwd=repo,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(STARTS)
    ]
    barrier.write_text("go")
    results = [
        (child.wait(timeout=600), child.stderr.read() if child.stderr else "") for child in children
    ]
    winners = [err for code, err in results if code == 0]
    refused = [err for code, err in results if code == 1]
    print(f"\n{STARTS} simultaneous starts: {len(winners)} ran, {len(refused)} refused")
    assert len(winners) == 1
    assert len(refused) == STARTS - 1
    assert all(re.search(r"already running \(pid \d+", err) for err in refused), refused[:2]
    assert all("Traceback" not in err for _, err in results)
    runs = {e.run for e in crashlab.log_of(repo)}
    assert len(runs) == 1


def test_a_lock_left_by_a_killed_runner_is_taken_over_at_once(tmp_path: Path) -> None:
    repo = crashlab.make_template(tmp_path / "repo")
    home = tmp_path / "home"
    runner = crashlab.spawn_once(repo, home)
    # Holding the lock is the first thing a run does; its first event proves it got there.
    log = repo / ".loop" / "log" / "events.jsonl"
    wait_for(lambda: log.exists() or runner.poll() is not None, "the runner to start its run")
    assert runner.poll() is None, "the runner ended before it started its run"
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    assert crashlab.run_once(repo, home) == 0


def test_eight_parallel_tasks_each_get_a_worktree(tmp_path: Path) -> None:
    """git's worktree bookkeeping is not thread-safe; loopctl serialises it (this raced once)."""
    import json

    repo = crashlab.make_template(tmp_path / "repo")
    loop = repo / ".loop" / "loops" / "crash.toml"
    items = json.dumps([{"id": f"p{n}"} for n in range(8)])
    text = loop.read_text()
    start = text.index("command = ")
    end = text.index("\n", start)
    loop.write_text(
        text[:start]
        + f"command = {json.dumps([crashlab.PY, '-c', f'print({items!r})'])}"
        + text[end:].replace("max_parallel = 1", "max_parallel = 8")
    )
    subprocess.run(["git", "commit", "-qam", "parallel"], cwd=repo, check=True, env=_identity())
    assert crashlab.run_once(repo, tmp_path / "home") == 0
    done = [e.task for e in crashlab.log_of(repo) if e.type == "task_finished"]
    assert sorted(done) == [f"p{n}" for n in range(8)]


def _identity() -> dict[str, str]:
    names = ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL")
    return {**os.environ, **dict.fromkeys(names, "t@t")}

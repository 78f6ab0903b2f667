"""An approval ends its task as the engine ends one (issue 28, item 4).

A gated task keeps its worktree while it waits for a human. When `loopctl inbox approve`
delivers it, the task lets that worktree go the way a task the engine finishes does: under the
worktree lock (git's worktree bookkeeping races under concurrent adds and removals), parked in
the loop's pool, and taken by the loop's next task. Real repositories, a real bare remote, the
real CLI in a child process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.cli import invoke, run_loopctl, spawn_loopctl
from support.delivery import the_approval
from support.journal import events
from support.processes import SAFETY_NET, wait_for
from support.repos import add_remote, commit_all, git, make_project, remote_refs, tasks_command
from support.repos import write_loop as write_loop_file

from loopctl.lock import WORKTREES_LOCK, lock_path, worktree_lock


def _write_loop(repo: Path, *tasks: str) -> None:
    write_loop_file(
        repo,
        "ship",
        'goal = "tests green"\n\n'
        f"[tasks]\n{tasks_command(*tasks)}"
        'prompt = "fix {id}"\n\n'
        '[deliver]\nactions = ["commit", "push"]\napprove = ["push"]\n',
    )
    commit_all(repo, f"ship {', '.join(tasks)}")


def _tick(monkeypatch: pytest.MonkeyPatch, repo: Path) -> dict[str, object]:
    result = invoke(monkeypatch, repo, "run", "ship", "--once", "--json")
    assert result.exit_code == 0, result.output
    (task,) = json.loads(result.stdout)["run"]["tasks"]
    assert isinstance(task, dict)
    return task


def _waits_on_lock(lock: Path, pid: int) -> bool:
    """Whether process `pid` is blocked in flock() on `lock` (/proc/locks lists each waiter
    with `->`, its pid and the file's device:inode)."""
    inode = os.stat(lock).st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if (
            len(fields) > 6
            and fields[1:3] == ["->", "FLOCK"]
            and int(fields[5]) == pid
            and int(fields[6].rsplit(":", 1)[1]) == inode
        ):
            return True
    return False


def _pooled(monkeypatch: pytest.MonkeyPatch, repo: Path) -> list[str]:
    listed = invoke(monkeypatch, repo, "worktrees", "--json")
    assert listed.exit_code == 0, listed.output
    return [r["loop"] for r in json.loads(listed.output)["worktrees"] if r["kind"] == "pooled"]


def test_an_approved_tasks_worktree_is_parked_under_the_lock_and_reused(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    _write_loop(repo, "t1")
    first = _tick(monkeypatch, repo)
    assert first["status"] == "awaiting_approval"
    worktree = Path(str(first["worktree"]))
    assert worktree.is_dir()  # `keep = "on-failure"` keeps it while a human decides
    item = the_approval(monkeypatch, repo)["id"]
    locks = repo / ".loop" / "locks"

    with worktree_lock(locks):
        approving = spawn_loopctl(repo, "inbox", "approve", item)
        try:
            state = wait_for(
                lambda: (
                    "waiting"
                    if _waits_on_lock(lock_path(locks, WORKTREES_LOCK), approving.pid)
                    else ("exited" if approving.poll() is not None else None)
                ),
                "`inbox approve` to wait for the worktree lock, or to exit",
                timeout=SAFETY_NET,
            )
        except BaseException:
            approving.kill()
            approving.communicate()
            raise
        # The push ran and the outcome is recorded; the worktree waits for the lock, untouched.
        assert state == "waiting", approving.communicate()
        assert remote_refs(remote) == {"refs/heads/loop/ship/t1": first["commit"]}
        statuses = [e.data["status"] for e in events(repo, "task_finished", "t1")]
        assert statuses == ["awaiting_approval", "done"]
        assert worktree.is_dir()
        assert _pooled(monkeypatch, repo) == []

    out, err = approving.communicate(timeout=SAFETY_NET)
    assert approving.returncode == 0, out + err
    assert f"approved {item}" in out
    assert not worktree.exists()
    assert _pooled(monkeypatch, repo) == ["ship"]
    # Parked detached: the task's branch is free, and keeps the delivered commit.
    assert git(repo, "rev-parse", "loop/ship/t1").strip() == first["commit"]
    assert "branch refs/heads/loop/ship/t1" not in git(repo, "worktree", "list", "--porcelain")

    _write_loop(repo, "t2")
    second = _tick(monkeypatch, repo)

    assert second["status"] == "awaiting_approval"
    (ready,) = [
        e.data for e in events(repo, "note", "t2") if e.data.get("what") == "workspace_ready"
    ]
    assert ready["pool"] == "hit"  # t1's worktree, made fresh for t2
    assert _pooled(monkeypatch, repo) == []
    changed = git(repo, "diff", "--name-only", "main", "loop/ship/t2").split()
    assert changed == ["calc.py"]


def test_a_rejected_tasks_worktree_stays_for_a_human(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`keep = "on-failure"` keeps what a human turned down, as the engine keeps a failure."""
    make_project(repo, "fixer.py")
    add_remote(repo, tmp_path)
    _write_loop(repo, "t1")
    first = _tick(monkeypatch, repo)
    item = the_approval(monkeypatch, repo)["id"]

    rejected = run_loopctl(repo, "inbox", "reject", item, "--reason", "no", timeout=SAFETY_NET)

    assert rejected.returncode == 0, rejected.stdout + rejected.stderr
    statuses = [e.data["status"] for e in events(repo, "task_finished", "t1")]
    assert statuses == ["awaiting_approval", "rejected"]
    assert Path(str(first["worktree"])).is_dir()
    assert _pooled(monkeypatch, repo) == []

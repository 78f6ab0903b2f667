"""`loopctl run NAME --once` end to end: task sources, parallel tasks, dedupe, keep, gates."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.journal import attempt_starts, events
from support.repos import (
    PY,
    commit_all,
    git,
    loop_worktrees,
    make_project,
    tasks_command,
    toml_value,
    write_agent,
    write_loop,
)


def tick_runs(repo: Path, loop: str) -> list[str]:
    return [e.run or "" for e in events(repo, "tick_started") if e.loop == loop]


def test_a_tick_works_every_task_in_parallel(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(repo, "fixer.py")
    write_loop(
        repo,
        "fleet",
        'goal = "tests green"\n\n[tasks]\n'
        + tasks_command("a", "b", "c")
        + 'prompt = "Fix {title}"\n\n[budget]\nmax_parallel = 2\n',
    )
    commit_all(repo, "fleet loop")

    done = run_loopctl(repo, "run", "fleet", "--once")

    assert_clean_exit(done, 0)
    finished = {e.task: e.data["status"] for e in events(repo, "task_finished")}
    assert finished == {"a": "done", "b": "done", "c": "done"}
    for task in "abc":
        assert attempt_starts(repo, task) == [1]
        assert "return a + b" in git(repo, "show", f"loop/fleet/{task}:calc.py")
    (tick_end,) = events(repo, "tick_finished")
    assert tick_end.data["status"] == "done"
    assert loop_worktrees(repo) == []


def test_max_tasks_caps_the_tasks_a_tick_takes(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(repo, "fixer.py")
    write_loop(
        repo,
        "capped",
        'goal = "tests green"\n\n[tasks]\n'
        + tasks_command("a", "b", "c")
        + "\n[budget]\nmax_tasks = 2\n",
    )

    result = invoke(monkeypatch, repo, "run", "capped", "--once")

    assert result.exit_code == 0, result.output
    assert [e.task for e in events(repo, "task_found")] == ["a", "b"]


def test_a_task_found_again_is_worked_again_without_dedupe(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "again", 'goal = "tests green"\n\n[tasks]\n' + tasks_command("t"))

    first = invoke(monkeypatch, repo, "run", "again", "--once")
    second = invoke(monkeypatch, repo, "run", "again", "--once")

    assert (first.exit_code, second.exit_code) == (0, 0), second.output
    assert len(tick_runs(repo, "again")) == 2
    assert attempt_starts(repo, "t") == [1, 1]
    assert [e.data["status"] for e in events(repo, "task_finished", "t")] == ["done", "done"]


def _dedupe_loop(repo: Path) -> None:
    make_project(repo, "fixer.py")
    write_loop(
        repo,
        "dedupe",
        'goal = "tests green"\n\n[tasks]\n' + tasks_command("t") + 'dedupe = "base"\n',
    )
    commit_all(repo, "dedupe loop")


def test_dedupe_base_skips_a_task_whose_base_has_not_moved(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dedupe_loop(repo)

    first = invoke(monkeypatch, repo, "run", "dedupe", "--once")
    second = invoke(monkeypatch, repo, "run", "dedupe", "--once")

    assert (first.exit_code, second.exit_code) == (0, 0), second.output
    assert attempt_starts(repo, "t") == [1]
    assert [e.data["status"] for e in events(repo, "task_finished", "t")] == ["done", "skipped"]


def test_dedupe_base_works_a_task_again_once_its_base_moved(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dedupe_loop(repo)
    first = invoke(monkeypatch, repo, "run", "dedupe", "--once")
    assert first.exit_code == 0, first.output

    (repo / "README.md").write_text("moved on\n")
    commit_all(repo, "move main")
    second = invoke(monkeypatch, repo, "run", "dedupe", "--once")

    assert second.exit_code == 0, second.output
    statuses = [e.data["status"] for e in events(repo, "task_finished", "t")]
    assert statuses == ["done", "done"]
    assert attempt_starts(repo, "t") == [1, 1]


def test_a_loop_without_tasks_has_one_task_from_its_prompt(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "single", 'goal = "tests green"\nprompt = "Fix add() in calc.py"\n')

    result = invoke(monkeypatch, repo, "run", "single", "--once")

    assert result.exit_code == 0, result.output
    (found,) = events(repo, "task_found")
    assert found.task == "main"
    assert found.data["prompt"] == "Fix add() in calc.py"
    assert "return a + b" in git(repo, "show", "loop/single/main:calc.py")


def test_a_failing_task_command_fails_the_tick_into_the_inbox(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    code = "import sys; print('gh: not logged in', file=sys.stderr); sys.exit(4)"
    write_loop(
        repo,
        "broken",
        f'goal = "tests green"\n\n[tasks]\ncommand = {toml_value([PY, "-c", code])}\n',
    )

    result = invoke(monkeypatch, repo, "run", "broken", "--once")

    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    (tick_end,) = events(repo, "tick_finished")
    assert tick_end.data["status"] == "failed"
    assert "exited 4" in tick_end.data["reason"]
    (item,) = events(repo, "inbox_opened")
    assert item.data["kind"] == "failed"
    assert "not logged in" in item.data["summary"]


def test_keep_never_removes_a_failed_tasks_worktree_but_keeps_its_branch(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")
    write_loop(
        repo,
        "tidy",
        'goal = "tests green"\nprompt = "fix"\n\n[worktree]\nkeep = "never"\n\n'
        "[budget]\nmax_iterations = 1\n",
    )

    result = invoke(monkeypatch, repo, "run", "tidy", "--once")

    assert result.exit_code == 1, result.output
    assert loop_worktrees(repo) == []
    assert git(repo, "branch", "--list", "loop/tidy/main").strip() == "loop/tidy/main"


def test_a_gated_push_waits_in_the_inbox_and_never_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    write_loop(
        repo,
        "ship",
        'goal = "tests green"\nprompt = "fix"\n\n'
        '[deliver]\nactions = ["commit", "push"]\napprove = ["push"]\n',
    )

    result = invoke(monkeypatch, repo, "run", "ship", "--once")

    assert result.exit_code == 0, result.output
    (commit,) = events(repo, "commit_created", "main")
    listed = invoke(monkeypatch, repo, "inbox", "--json")
    payload = json.loads(listed.stdout)
    items = payload if isinstance(payload, list) else payload.get("inbox", payload.get("data"))
    (item,) = [i for i in items if i["kind"] == "approval"]
    assert item["evidence"]["commit"] == commit.data["sha"]
    assert item["evidence"]["action"] == "push"
    # Nothing reached the remote without an approval.
    assert git(remote, "for-each-ref").strip() == ""


def test_agent_named_in_a_loop_overrides_the_default_maker(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")
    write_agent(repo, "fixer", "fixer.py")
    write_loop(repo, "chosen", 'goal = "tests green"\nprompt = "fix"\n\n[maker]\nagent = "fixer"\n')

    result = invoke(monkeypatch, repo, "run", "chosen", "--once")

    assert result.exit_code == 0, result.output
    (finished,) = events(repo, "agent_finished", "main")
    assert finished.data["agent"] == "fixer"


def _prepared_loop(repo: Path, scope: str = "") -> None:
    make_project(repo, "fixer.py")
    (repo / ".env.local").write_text("LOCAL_SETTING=only-on-this-machine\n")
    setup = toml_value([PY, "-c", "open('setup-ran', 'w').write('1')"])
    write_loop(
        repo,
        "prepared",
        'goal = "tests green"\nprompt = "fix"\n\n'
        + (f"[maker]\nscope = {toml_value([scope])}\n\n" if scope else "")
        + f'[worktree]\ncopy = [".env.local"]\nsetup = [{setup}]\n',
    )


def test_worktree_copy_and_setup_are_not_the_makers_changes(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _prepared_loop(repo, scope="calc.py")

    result = invoke(monkeypatch, repo, "run", "prepared", "--once")

    assert result.exit_code == 0, result.output
    assert attempt_starts(repo, "main") == [1]


def test_worktree_copy_and_setup_files_are_not_committed(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _prepared_loop(repo)

    result = invoke(monkeypatch, repo, "run", "prepared", "--once")

    assert result.exit_code == 0, result.output
    changed = git(repo, "diff", "--name-only", "main", "loop/prepared/main").split()
    assert changed == ["calc.py"]


def test_a_failing_worktree_setup_fails_the_task_into_the_inbox(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    setup = toml_value([PY, "-c", "raise SystemExit(7)"])
    write_loop(
        repo, "badsetup", f'goal = "tests green"\nprompt = "fix"\n\n[worktree]\nsetup = [{setup}]\n'
    )

    result = invoke(monkeypatch, repo, "run", "badsetup", "--once")

    assert result.exit_code == 1, result.output
    assert attempt_starts(repo, "main") == []
    (finished,) = events(repo, "task_finished", "main")
    assert finished.data["status"] == "failed"
    assert "exited 7" in finished.data["reason"]
    assert [e.data["kind"] for e in events(repo, "inbox_opened", "main")] == ["failed"]


def test_a_task_worked_again_starts_from_its_base_refs_current_commit(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    items = [{"id": "pr-1", "ref": "feature"}]
    code = f"import json; print(json.dumps({items!r}))"
    write_loop(
        repo,
        "babysit",
        'goal = "tests green"\n\n'
        f"[tasks]\ncommand = {toml_value([PY, '-c', code])}\n"
        'base = "{ref}"\nprompt = "fix PR {id}"\n',
    )
    commit_all(repo, "babysit loop")
    git(repo, "branch", "feature")
    assert invoke(monkeypatch, repo, "run", "babysit", "--once").exit_code == 0
    # The PR gets a new commit after the first tick.
    git(repo, "checkout", "-q", "feature")
    (repo / "NEWS.md").write_text("pushed after the first tick\n")
    git(repo, "add", "NEWS.md")
    git(repo, "commit", "-q", "-m", "new push to the PR")
    pushed = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")

    second = invoke(monkeypatch, repo, "run", "babysit", "--once")

    assert second.exit_code == 0, second.output
    ancestor = subprocess.run(
        ["git", "merge-base", "--is-ancestor", pushed, "loop/babysit/pr-1"], cwd=repo
    )
    assert ancestor.returncode == 0, "the second tick's work does not contain the new push"

"""What happens between an approval's check and the action it approved (issue 27, item 1).

A gate checks the approval against the work as it was shown; the action runs a moment later.
Something can move in between: a person pushes to the branch, the kept worktree gets another
commit. Each action checks again right before it acts, and these tests move things in exactly
that window (a hook on the first thing the action does, in this process; everything else is a
real `loopctl` run against real repositories and a real bare remote). Each test names the
one-line mutant of loopctl/delivery/ (the pipeline or a step in steps/) it kills.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke
from support.delivery import action, ledger_entries, ship_loop, the_approval
from support.journal import events
from support.repos import add_remote, git, make_project, remote_refs

from loopctl import worktrees
from loopctl.delivery.steps import StepOutcome
from loopctl.delivery.steps.push import Push

BRANCH = "loop/ship/main"


def test_a_commit_pushed_after_the_gate_check_is_never_forced_away(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills the unapproved-force-push guard in `Push.run` turned off: the approval showed a
    branch that did not exist; a person creates it just before the push. Pushing would
    replace their commit: nothing is pushed, and their commit stays."""
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    item = the_approval(monkeypatch, repo)
    assert remote_refs(remote) == {}
    main = git(repo, "rev-parse", "main").strip()
    persons = git(repo, "commit-tree", f"{main}^{{tree}}", "-p", main, "-m", "a person's").strip()
    original = Push.run
    moved: list[str] = []

    def push_after_a_person_pushed(
        self: Push, rec: Any, plan: Any, step: Any, gate: Any
    ) -> StepOutcome:
        # The window: the gate has been checked (it read the remote), the push has not begun.
        git(repo, "push", "-q", str(remote), f"{persons}:refs/heads/{BRANCH}")
        moved.append(persons)
        return original(self, rec, plan, step, gate)

    monkeypatch.setattr(Push, "run", push_after_a_person_pushed)
    invoke(monkeypatch, repo, "inbox", "approve", item["id"])

    assert moved, "the push never started"
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": persons}
    finished = events(repo, "action_finished", "main")
    assert finished, "the push left no outcome"
    assert "a force push no approval showed" in str(finished[-1].data), finished[-1].data


def test_a_deploy_refuses_a_kept_worktree_moved_after_the_gate_check(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills the custom action's "worktree at the approved sha" check turned off: the kept
    worktree gets a commit nobody approved between the gate check and the deploy; the deploy
    does not run."""
    make_project(repo, "fixer.py")
    ledger = tmp_path / "ledger.jsonl"
    ship_loop(repo, f'actions = ["commit", {action(ledger, "deploy")}]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    item = the_approval(monkeypatch, repo)
    approved = str(events(repo, "commit_created", "main")[-1].data["sha"])
    original = worktrees.ensure_worktree
    moved: list[str] = []

    def worktree_then_moved(*args: Any, **kwargs: Any) -> worktrees.Workspace:
        workspace = original(*args, **kwargs)
        if not moved:  # the window: after the gate check, before the deploy starts
            (workspace.path / "unapproved.txt").write_text("nobody approved this\n")
            git(workspace.path, "add", "unapproved.txt")
            git(workspace.path, "commit", "-q", "-m", "unapproved")
            moved.append(git(workspace.path, "rev-parse", "HEAD").strip())
        return workspace

    monkeypatch.setattr(worktrees, "ensure_worktree", worktree_then_moved)
    invoke(monkeypatch, repo, "inbox", "approve", item["id"])

    assert moved, "the deploy never looked for its worktree"
    assert ledger_entries(ledger) == []
    finished = events(repo, "action_finished", "main")
    assert finished, "the deploy left no outcome"
    assert f"not the approved {approved[:12]}" in str(finished[-1].data), finished[-1].data

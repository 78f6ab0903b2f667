"""Delivery and inbox follow-ups from issue 14: tools checked before anything runs, force pushes
said and approved, stale failures closed, and a command agent's script checked."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.cli import invoke
from support.delivery import action, inbox_items, ledger_entries, ship_loop, the_approval
from support.fake_gh import fake_gh, gh_calls
from support.journal import events
from support.repos import PY, add_remote, commit_all, git, make_project, remote_refs, write_agent

BRANCH = "loop/ship/main"


def _only_git_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH with git and nothing else: no `gh` (everything else is run by absolute path)."""
    folder = tmp_path / "only-git"
    folder.mkdir()
    found = shutil.which("git")
    assert found is not None
    (folder / "git").symlink_to(found)
    monkeypatch.setenv("PATH", str(folder))


def test_a_pr_without_gh_is_refused_before_push_or_deploy_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ledger = tmp_path / "ledger.jsonl"
    ship_loop(
        repo,
        f'actions = ["commit", "push", {action(ledger, "deploy")}, "pr"]\napprove = []',
    )
    _only_git_on_path(tmp_path, monkeypatch)

    result = invoke(monkeypatch, repo, "run", "ship", "--once")

    assert result.exit_code == 1, result.output
    assert (
        "loopctl: loop 'ship' cannot deliver: `pr` needs the GitHub CLI `gh`, which is not on"
        " PATH: install it (https://cli.github.com), then `gh auth login`; nothing ran"
    ) in result.stderr
    assert events(repo, "tick_started") == []  # no agent, no worktree
    assert remote_refs(remote) == {}
    assert ledger_entries(ledger) == []
    validate = invoke(monkeypatch, repo, "validate")
    assert (
        ".loop/loops/ship.toml:5: warning: `pr` needs the GitHub CLI `gh`, which is not on PATH"
    ) in validate.stdout


def _rerun_after_base_moved(repo: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the loop again after main moved on: the task starts afresh from the new base."""
    (repo / "README.md").write_text("hello again\n")
    commit_all(repo, "main moves on")
    result = invoke(monkeypatch, repo, "run", "ship", "--once")
    assert result.exit_code == 0, result.output
    return str(events(repo, "commit_created", "main")[-1].data["sha"])


def test_a_push_that_replaces_an_earlier_push_says_force_push_in_its_approval(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    first = str(events(repo, "commit_created", "main")[0].data["sha"])
    plain = the_approval(monkeypatch, repo)
    assert "FORCE" not in plain["summary"]
    assert invoke(monkeypatch, repo, "inbox", "approve", plain["id"]).exit_code == 0
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": first}

    second = _rerun_after_base_moved(repo, monkeypatch)

    forced = the_approval(monkeypatch, repo)
    # What it replaces is a result a human approved: the new approval says it overwrites it.
    delivered_in = events(repo, "tick_started")[0].run
    assert forced["summary"] == (
        f"approve `push` of {BRANCH} at {second[:12]} (FORCE PUSH over a delivered result:"
        f" overwrites {first[:12]}, which run {delivered_in} delivered to origin {BRANCH}"
        f" (approved in inbox {plain['id']}); {second[:12]} does not contain it)"
    )
    assert forced["evidence"]["replaces"] == first
    shown = invoke(monkeypatch, repo, "inbox", "show", forced["id"])
    assert f"Awaiting approval: push {second[:12]} to origin as branch {BRANCH} (FORCE PUSH" in (
        shown.stdout
    )
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": first}  # nothing moved yet
    assert invoke(monkeypatch, repo, "inbox", "approve", forced["id"]).exit_code == 0
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": second}
    pushed = events(repo, "action_finished", "main")[-1].data
    assert pushed["detail"].startswith(f"force-pushed (replacing {first[:12]}) {second[:12]}")


def test_an_ungated_push_never_forces_without_asking(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]\napprove = []')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    first = str(events(repo, "commit_created", "main")[0].data["sha"])
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": first}  # pushed without asking
    assert inbox_items(monkeypatch, repo) == []

    _rerun_after_base_moved(repo, monkeypatch)

    asked = the_approval(monkeypatch, repo)
    assert f"FORCE PUSH over a delivered result: overwrites {first[:12]}" in asked["summary"]
    assert "(pushed without an approval)" in asked["summary"]
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": first}
    assert events(repo, "task_finished", "main")[-1].data["status"] == "awaiting_approval"

    # Someone pushes to the branch after the approval was shown: it no longer says what would
    # be replaced, so it does not cover the push, and a new approval says so.
    moved = git(repo, "commit-tree", f"{first}^{{tree}}", "-p", first, "-m", "a person's").strip()
    git(repo, "push", "-q", str(remote), f"{moved}:refs/heads/{BRANCH}")
    again = invoke(monkeypatch, repo, "inbox", "approve", asked["id"])

    assert "waiting for approval" in again.stdout, again.output
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": moved}
    renewed = the_approval(monkeypatch, repo)
    assert renewed["id"] != asked["id"]
    assert renewed["evidence"]["replaces"] == moved


def test_a_stale_failed_item_is_closed_when_the_task_later_succeeds(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")
    failed = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert failed.exit_code == 1
    (item,) = inbox_items(monkeypatch, repo)
    assert item["kind"] == "failed"

    write_agent(repo, "maker", "fixer.py")
    fixed = invoke(monkeypatch, repo, "goal", "tests green")

    assert fixed.exit_code == 0, fixed.output
    assert inbox_items(monkeypatch, repo) == []
    (closed,) = events(repo, "inbox_closed")
    assert closed.data["id"] == item["id"]
    assert closed.data["resolution"] == "superseded"
    assert closed.data["by"] == events(repo, "tick_started")[-1].run


def test_agents_test_fails_a_missing_script_and_validate_warns_until_it_is_committed(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = repo / "agents" / "mine.toml"
    agent.parent.mkdir()
    agent.write_text(
        f'backend = "command"\nargv = [{json.dumps(PY)}, "tools/agent.py", "{{prompt_file}}"]\n'
    )
    commit_all(repo, "an agent whose script is not there")

    missing = invoke(monkeypatch, repo, "agents", "test", "mine")
    assert missing.exit_code == 1
    assert "FAIL file: tools/agent.py does not exist (fix argv in" in missing.stdout
    assert "not ready" in missing.stdout
    warned = invoke(monkeypatch, repo, "validate")
    assert warned.exit_code == 0, warned.output
    assert (
        "agents/mine.toml: warning: argv names tools/agent.py, which does not exist in the"
        " repository (not in HEAD): it will not be in the task's worktree, nor on another"
        " machine; commit it"
    ) in warned.stdout

    (repo / "tools").mkdir()
    (repo / "tools" / "agent.py").write_text("print('done')\n")
    untracked = invoke(monkeypatch, repo, "agents", "test", "mine")
    assert untracked.exit_code == 0, untracked.output
    assert "warn file: tools/agent.py is not committed" in untracked.stdout
    assert "argv names tools/agent.py, which is not committed" in (
        invoke(monkeypatch, repo, "validate").stdout
    )

    commit_all(repo, "the script")
    assert "tools/agent.py" not in invoke(monkeypatch, repo, "agents", "test", "mine").stdout
    assert "tools/agent.py" not in invoke(monkeypatch, repo, "validate").stdout
    assert os.environ.get("LOOPCTL_HOME")  # the isolated environment, not the user's


@pytest.mark.parametrize(
    ("actions", "gated", "left"),
    [
        # gh uninstalled while the push waited: the approval must not push what `pr` then strands
        ('["commit", "push", "pr"]', '["push"]', "`pr` needs"),
        # the pull request was opened; merging it is gh's work even though `pr` already ran
        ('["commit", "push", "pr", "merge"]', '["merge"]', "`merge` of the pull request needs"),
    ],
)
def test_a_tool_gone_before_the_approval_refuses_the_steps_left_before_any_runs(
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    actions: str,
    gated: str,
    left: str,
) -> None:
    calls = fake_gh(tmp_path, monkeypatch)
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, f"actions = {actions}\napprove = {gated}")
    first = invoke(monkeypatch, repo, "run", "ship", "--once")
    assert first.exit_code == 0, first.output
    item = the_approval(monkeypatch, repo)["id"]
    refs_before, gh_before = remote_refs(remote), gh_calls(calls)
    _only_git_on_path(tmp_path, monkeypatch)

    approved = invoke(monkeypatch, repo, "inbox", "approve", item)

    assert f"cannot deliver: {left} the GitHub CLI `gh`" in approved.output
    assert "nothing ran" in approved.output
    assert remote_refs(remote) == refs_before
    assert gh_calls(calls) == gh_before

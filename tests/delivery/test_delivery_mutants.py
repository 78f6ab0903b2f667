"""Delivery's promises against the one-line bugs of loopctl/delivery/pipeline.py that no other
test sees (issue 27): a force push runs only when the item a human approved said it was one, and
nothing runs after a step whose outcome is unknown.

Real `loopctl` runs against a real repository and a real bare remote, which a person moves while
an approval waits, and a real `loopctl` killed mid-delivery. Each test names the mutants it
kills.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.cli import invoke, run_loopctl
from support.delivery import action, inbox_items, ledger_entries, ship_loop, the_approval
from support.journal import events
from support.repos import PY, add_remote, git, make_project, remote_refs

BRANCH = "loop/ship/main"


def _persons_commit(repo: Path, parent: str, message: str) -> str:
    """A commit a person made on top of `parent` (not built on the task's work)."""
    return git(repo, "commit-tree", f"{parent}^{{tree}}", "-p", parent, "-m", message).strip()


def test_an_approval_shown_as_a_plain_push_is_asked_again_once_the_push_would_force(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills, in `advance`, the "replaces != what the item showed" check turned off and the
    old item's retirement dropped, and in `_retire_gate` its `is_open` guard turned off, its
    event dropped and its resolution changed: a person pushes to the task's branch while the
    approval of a plain push waits. Approving it then must not push (that would replace their
    commit, which the item never said) and must not just fail: the item is closed as
    superseded and a new one says FORCE PUSH and what it replaces. Approving that one is what
    lets the push replace it; a further move asks again."""
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    shown = the_approval(monkeypatch, repo)
    assert "FORCE" not in shown["summary"]
    assert shown["evidence"]["replaces"] is None
    sha = str(events(repo, "commit_created", "main")[-1].data["sha"])
    main = git(repo, "rev-parse", "main").strip()
    persons = _persons_commit(repo, main, "a person's")
    git(repo, "push", "-q", str(remote), f"{persons}:refs/heads/{BRANCH}")

    invoke(monkeypatch, repo, "inbox", "approve", shown["id"])

    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": persons}
    assert events(repo, "action_started", "main") == []  # the push never began
    closed = [e for e in events(repo, "inbox_closed") if e.data["id"] == shown["id"]]
    assert [(e.data["resolution"], e.data.get("reason"), e.task) for e in closed] == [
        ("superseded", "the remote branch changed since it was shown", "main")
    ]
    asked = the_approval(monkeypatch, repo)
    assert asked["id"] != shown["id"]
    assert asked["evidence"]["replaces"] == persons
    assert f"FORCE PUSH: replaces {persons[:12]}" in asked["summary"]
    assert asked["evidence"]["commit"] == sha

    # The person pushes again on top of their commit: the FORCE PUSH item no longer shows what
    # would be replaced, and is asked again too.
    again = _persons_commit(repo, persons, "a person's second")
    git(repo, "push", "-q", str(remote), f"{again}:refs/heads/{BRANCH}")
    invoke(monkeypatch, repo, "inbox", "approve", asked["id"])
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": again}
    third = the_approval(monkeypatch, repo)
    assert third["evidence"]["replaces"] == again

    # Approved as shown: the force push replaces exactly what the item named.
    done = invoke(monkeypatch, repo, "inbox", "approve", third["id"])
    assert done.exit_code == 0, done.output
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}
    (started,) = events(repo, "action_started", "main")
    assert started.data["approval"] == third["id"]
    finished = events(repo, "action_finished", "main")[-1].data
    assert finished["ok"] is True
    assert f"force-pushed (replacing {again[:12]})" in finished["detail"]


def test_after_a_step_whose_outcome_is_unknown_nothing_further_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills, in `advance`, the stop after a reconciled step that did not succeed turned off:
    loopctl dies right after it recorded the approved deploy as started. The deploy's outcome is
    unknown, so it never runs again, and the notify planned after it must not run either."""
    make_project(repo, "fixer.py")
    ledger = tmp_path / "ledger.jsonl"
    deploy, notify = action(ledger, "deploy"), action(ledger, "notify")
    ship_loop(repo, f'actions = ["commit", {deploy}, {notify}]\napprove = ["deploy"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    item = the_approval(monkeypatch, repo)

    killed = run_loopctl(repo, "inbox", "approve", item["id"], kill_at_seq="action_started")
    assert killed.returncode == -9, killed.stderr
    assert ledger_entries(ledger) == []
    # The next run finds the interrupted delivery first.
    resumed = run_loopctl(repo, "run", "ship", "--once")
    assert resumed.returncode in (0, 1), resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert ledger_entries(ledger) == []  # neither the deploy again nor the notify after it
    first_run = item["run"]
    finished = [e.data for e in events(repo, "action_finished", "main") if e.run == first_run]
    assert [(f["action"], f["ok"]) for f in finished] == [("deploy", None)]
    ended = [e.data for e in events(repo, "task_finished", "main") if e.run == first_run]
    assert ended[-1]["status"] == "failed"
    assert "was interrupted and its outcome is unknown" in ended[-1]["reason"]


def test_a_remote_that_already_has_the_approved_commit_is_left_as_it_is(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills, in `_push`, the "already has it" check turned off: a person pushed the task's
    commit to its branch themselves while the approval waited. Approving finds it there: the
    step succeeds without a push of its own, and says so."""
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    item = the_approval(monkeypatch, repo)
    sha = str(events(repo, "commit_created", "main")[-1].data["sha"])
    git(repo, "push", "-q", str(remote), f"{sha}:refs/heads/{BRANCH}")

    done = invoke(monkeypatch, repo, "inbox", "approve", item["id"])

    assert done.exit_code == 0, done.output
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}
    finished = events(repo, "action_finished", "main")[-1].data
    assert finished["ok"] is True
    assert finished["detail"] == f"origin already has {BRANCH} at {sha[:12]}"


def test_an_approved_plain_push_says_it_pushed_what_where(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outcome a human reads in the log and the inbox names a plain push as one (a force
    push says what it replaced). Kills the word `pushed` changed or emptied in `Push.run`."""
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    item = the_approval(monkeypatch, repo)
    sha = str(events(repo, "commit_created", "main")[-1].data["sha"])

    done = invoke(monkeypatch, repo, "inbox", "approve", item["id"])

    assert done.exit_code == 0, done.output
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}
    finished = events(repo, "action_finished", "main")[-1].data
    assert finished["ok"] is True
    assert str(finished["detail"]).startswith(f"pushed {sha[:12]} to origin ("), finished
    assert str(finished["detail"]).endswith(f") {BRANCH}"), finished


# A deploy that records what loopctl tells it (every LOOPCTL_* variable) and where it runs.
SEES = (
    "import json, os, sys\n"
    "seen = {k: v for k, v in os.environ.items() if k.startswith('LOOPCTL_')}\n"
    "seen['cwd'] = os.getcwd()\n"
    "seen['bytecode'] = os.environ.get('PYTHONDONTWRITEBYTECODE')\n"
    "open(sys.argv[1], 'w').write(json.dumps(seen))\n"
)


def test_an_approved_deploy_that_exits_0_delivers_and_the_next_step_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills, in `_custom`, the success branch turned off (a deploy that ran and exited 0 would
    be recorded as failed, the task as failed, and the step after it never run) and each entry
    of the environment a deploy is told what it deploys by dropped or renamed: the approved
    commit, its branch, task, run, loop, the step's name and the worktree it runs in; and, in
    `advance`, the empty reason of a delivery with no step left changed (the task would end
    with that text instead of "delivered")."""
    make_project(repo, "fixer.py")
    ledger, seen = tmp_path / "ledger.jsonl", tmp_path / "seen.json"
    deploy = '{ name = "deploy", argv = ' + json.dumps([PY, "-c", SEES, str(seen)]) + " }"
    notify = action(ledger, "notify")
    ship_loop(repo, f'actions = ["commit", {deploy}, {notify}]\napprove = ["deploy"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    item = the_approval(monkeypatch, repo)
    sha = str(events(repo, "commit_created", "main")[-1].data["sha"])

    done = invoke(monkeypatch, repo, "inbox", "approve", item["id"])

    assert done.exit_code == 0, done.output
    assert [entry["name"] for entry in ledger_entries(ledger)] == ["notify"]
    finished = [(e.data["action"], e.data["ok"]) for e in events(repo, "action_finished", "main")]
    assert finished == [("deploy", True), ("notify", True)]
    # It printed nothing: its outcome says only that it exited 0.
    assert events(repo, "action_finished", "main")[0].data["detail"] == "`deploy` exited 0"
    ended = events(repo, "task_finished", "main")[-1].data
    # What `loopctl status` and the report say of the task: delivered, nothing else.
    assert (ended["status"], ended["reason"]) == ("done", "delivered")
    told = json.loads(seen.read_text())
    # Variables the test process itself carries (its loopctl home, CI's switches) pass through
    # as they are; the assertion is about what loopctl adds.
    for name in [key for key in told if key.startswith("LOOPCTL_") and key in os.environ]:
        if told[name] == os.environ[name]:
            told.pop(name)
    worktree = item["evidence"]["worktree"]
    assert told == {
        "LOOPCTL_LOOP": "ship",
        "LOOPCTL_TASK": "main",
        "LOOPCTL_RUN": item["run"],
        "LOOPCTL_COMMIT": sha,
        "LOOPCTL_BRANCH": BRANCH,
        "LOOPCTL_WORKTREE": worktree,
        "LOOPCTL_ACTION": "deploy",
        "cwd": worktree,
        "bytecode": "1",
    }


def test_a_deploy_that_fails_silently_says_how_it_exited_and_nothing_more(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deploy that exits 3 without a word: its outcome, which a human reads in the inbox and
    the log to decide what to check, is its exit status alone, and the task fails with it.
    Kills, in `Custom.run`, the empty suffix of a failure with no output changed."""
    make_project(repo, "fixer.py")
    deploy = '{ name = "deploy", argv = ' + json.dumps([PY, "-c", "raise SystemExit(3)"]) + " }"
    ship_loop(repo, f'actions = ["commit", {deploy}]\napprove = ["deploy"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    item = the_approval(monkeypatch, repo)

    invoke(monkeypatch, repo, "inbox", "approve", item["id"])

    (finished,) = [e.data for e in events(repo, "action_finished", "main")]
    assert (finished["action"], finished["ok"]) == ("deploy", False)
    assert finished["detail"] == "`deploy` exited 3"
    ended = events(repo, "task_finished", "main")[-1].data
    assert ended["status"] == "failed"
    assert ended["reason"].endswith("`deploy` exited 3"), ended


def test_an_approval_whose_deploy_finished_just_before_a_crash_is_closed_on_resume(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """loopctl dies right after it recorded the approved deploy's outcome, before it closed the
    approval. The next run closes it as approved (a person must not find it still open, as if
    the deploy waited for them) and does not run the deploy again. Kills, in `advance`, the
    closing of finished steps' approvals dropped."""
    make_project(repo, "fixer.py")
    ledger = tmp_path / "ledger.jsonl"
    ship_loop(repo, f'actions = ["commit", {action(ledger, "deploy")}]\napprove = ["deploy"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    item = the_approval(monkeypatch, repo)

    killed = run_loopctl(repo, "inbox", "approve", item["id"], kill_at_seq="action_finished")
    assert killed.returncode == -9, killed.stderr
    assert [entry["name"] for entry in ledger_entries(ledger)] == ["deploy"]
    resumed = run_loopctl(repo, "run", "ship", "--once")
    assert resumed.returncode in (0, 1), resumed.stderr
    assert "Traceback" not in resumed.stderr

    assert [entry["name"] for entry in ledger_entries(ledger)] == ["deploy"]  # not again
    closed = [e.data for e in events(repo, "inbox_closed") if e.data["id"] == item["id"]]
    assert [c["resolution"] for c in closed] == ["approved"]
    # (The run's own new tick may ask anew; this item is no longer among the open ones.)
    assert item["id"] not in [i["id"] for i in inbox_items(monkeypatch, repo)]

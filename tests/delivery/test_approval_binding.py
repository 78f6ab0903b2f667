"""An approval covers exactly the sha it was shown (invariants 3 and 9), checked twice: by the
policy (`gates.approval_problem`) and again at delivery time (`pipeline._gate_check`).

Every other test writes approvals with the item's own sha; these present a mismatched one, as a
forged or stale `approved` event in the log would (a hand edit, a `state push` from an older
clone), and an arbitrary sequence of them (a property test).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.cli import invoke
from support.delivery import inbox_items, ledger_entries, ship_loop, the_approval
from support.journal import events
from support.repos import add_remote, make_project, remote_refs

from loopctl.delivery.gates import Plan, Step, approval_problem, delivery_view
from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import ItemKind
from loopctl.journal.schema import InboxClosed
from loopctl.paths import ProjectPaths

SHA = "a" * 40
OTHER = "b" * 40
BRANCH = "loop/ship/main"


def plan(commit: str = SHA) -> Plan:
    return Plan(
        run="r1",
        loop="ship",
        task="main",
        commit=commit,
        branch=BRANCH,
        base_sha="c" * 40,
        base_branch="main",
        remote="origin",
        worktree=None,
        keep="on-failure",
        steps=(Step(1, "push", gated=True),),
    )


def test_an_approval_of_the_planned_commit_on_an_unmoved_branch_applies() -> None:
    assert approval_problem(SHA, plan(), SHA) is None


def test_an_approval_of_another_sha_does_not_apply_even_on_an_unmoved_branch() -> None:
    problem = approval_problem(OTHER, plan(), SHA)
    assert problem == f"the approval was for {OTHER[:12]}, but the task delivers {SHA[:12]}"


def test_a_missing_approval_sha_does_not_apply() -> None:
    assert approval_problem(None, plan(), SHA) == (
        f"the approval was for None, but the task delivers {SHA[:12]}"
    )


def test_an_approval_does_not_survive_its_branch_being_deleted_or_moved() -> None:
    assert approval_problem(SHA, plan(), None) == (
        f"branch {BRANCH} no longer exists; the approved work is gone from it"
    )
    assert approval_problem(SHA, plan(), OTHER) == (
        f"branch {BRANCH} moved from {SHA[:12]} to {OTHER[:12]} since the approval was shown;"
        " the approval does not cover the new work"
    )


def test_a_forged_approval_of_another_sha_is_refused_at_delivery(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    first = invoke(monkeypatch, repo, "run", "ship", "--once")
    assert first.exit_code == 0, first.output
    item = the_approval(monkeypatch, repo)
    sha = events(repo, "commit_created", "main")[0].data["sha"]
    assert item["evidence"]["commit"] == sha
    forged = "0123456789ab" + "0" * 28
    # What `inbox approve` writes, but bound to a sha the item never showed.
    from loopctl.journal.events import EventLog

    EventLog(ProjectPaths(repo).events_file).append(
        EventType.APPROVED,
        run=item["run"],
        loop="ship",
        task="main",
        data={"id": item["id"], "sha": forged, "step": 1, "action": "push"},
    )

    again = invoke(monkeypatch, repo, "run", "ship", "--once")

    assert again.exit_code == 0, again.output
    assert remote_refs(remote) == {}  # nothing was pushed
    assert events(repo, "action_started") == []
    refusals = [e.data["reason"] for e in events(repo, "approval_refused")]
    assert refusals, "the forged approval was not refused"
    assert refusals[0] == f"the approval was for {forged[:12]}, but the task delivers {sha[:12]}"
    # A real approval still delivers exactly the commit the item showed, once.
    approved = invoke(monkeypatch, repo, "inbox", "approve", item["id"])
    assert approved.exit_code == 0, approved.output
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}
    assert len(events(repo, "action_started")) == 1
    closed = [e.data for e in events(repo, "inbox_closed") if e.data["id"] == item["id"]]
    assert [(c["resolution"], c.get("outcome")) for c in closed] == [("approved", "delivered")]


# --- approval binding under arbitrary sequences ------------------------------------------------

ITEM = "it-1"


def _event(seq: int, type_: str, /, **data: object) -> Event:
    return Event(seq, "2026-12-01T00:00:00+00:00", type_, "r1", "ship", "main", dict(data))


def _planned(seq: int, commit: str) -> Event:
    return _event(seq, EventType.DELIVERY_PLANNED, plan=plan(commit).to_json())


def _opened(seq: int, item: str, commit: str) -> Event:
    return _event(
        seq,
        EventType.INBOX_OPENED,
        kind="approval",
        id=item,
        evidence={"step": 1, "commit": commit},
    )


ACTIONS = st.sampled_from(["approve-shown", "approve-other", "refuse", "close", "reopen"])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
@given(st.lists(ACTIONS, max_size=12), st.booleans())
def test_a_gate_counts_as_approved_only_for_the_sha_it_showed(
    actions: list[str], moved: bool
) -> None:
    """Whatever the order of approvals, refusals, closes and re-opened items, delivery may go
    ahead exactly when the latest item's last word is an approval of the sha it showed, the item
    is open, and the branch still points at it."""
    log = [_planned(1, SHA), _opened(2, ITEM, SHA)]
    current, approved_sha, refused, closed = ITEM, None, False, False
    for n, act in enumerate(actions):
        seq = len(log) + 1
        if act == "reopen":
            current, approved_sha, refused, closed = f"it-{n + 2}", None, False, False
            log.append(_opened(seq, current, SHA))
        elif closed:
            continue  # a closed item takes no more decisions
        elif act in ("approve-shown", "approve-other"):
            approved_sha = SHA if act == "approve-shown" else OTHER
            refused = False
            log.append(_event(seq, EventType.APPROVED, id=current, sha=approved_sha))
        elif act == "refuse":
            approved_sha, refused = None, True
            log.append(_event(seq, EventType.APPROVAL_REFUSED, id=current, reason="no"))
        else:
            closed = True
            log.append(_event(seq, EventType.INBOX_CLOSED, id=current, resolution="rejected"))

    view = delivery_view(log, "r1", "main")
    gate = view.gates[1]
    assert gate.item == current
    assert gate.sha == SHA
    assert gate.is_open is not closed
    assert gate.approved is (approved_sha is not None and not refused)
    head = OTHER if moved else SHA
    assert view.plan is not None
    may_deliver = (
        gate.is_open
        and gate.approved
        and approval_problem(gate.approved_sha, view.plan, head) is None
    )
    assert may_deliver is (not closed and approved_sha == SHA and not moved)


def test_an_approval_item_shows_exactly_what_it_covers_and_what_follows(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.delivery import action

    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ledger = tmp_path / "ledger.jsonl"
    deploy = action(ledger, "deploy")
    ship_loop(
        repo,
        f'actions = ["commit", "push", {deploy}, "merge", {action(ledger, "notify")}]\n'
        'approve = ["push", "merge"]',
    )
    first = invoke(monkeypatch, repo, "run", "ship", "--once")
    assert first.exit_code == 0, first.output
    item = the_approval(monkeypatch, repo)
    sha = events(repo, "commit_created", "main")[0].data["sha"]
    evidence = item["evidence"]

    assert item["summary"] == f"approve `push` of {BRANCH} at {sha[:12]}"
    assert (evidence["action"], evidence["step"], evidence["commit"]) == ("push", 1, sha)
    assert evidence["describe"] == f"push {sha[:12]} to origin as branch {BRANCH}"
    assert evidence["replaces"] is None
    assert evidence["argv"] is None
    # The ungated deploy runs with this approval; merge needs its own; notify comes after it.
    assert evidence["then"] == [
        f"run `{' '.join(json.loads(deploy.split('argv = ')[1].rstrip(' }')))}` in the task's"
        f" worktree (at {sha[:12]})",
        "then `merge` waits for another approval",
    ]
    assert (evidence["branch"], evidence["base_branch"], evidence["remote"]) == (
        BRANCH,
        "main",
        "origin",
    )
    assert evidence["remote_url"] == str(remote)
    assert ledger_entries(ledger) == []


def test_a_long_failure_is_kept_as_its_last_2000_characters(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.repos import git

    make_project(repo, "fixer.py")
    # A remote path whose every error message runs past 2000 characters.
    far = "/" + "/".join(["d" * 200] * 11) + "/remote.git"
    git(repo, "remote", "add", "origin", far)
    ship_loop(repo, 'actions = ["commit", "push"]\napprove = []')

    invoke(monkeypatch, repo, "run", "ship", "--once")

    (finished,) = events(repo, "action_finished", "main")
    assert finished.data["ok"] is False
    detail = finished.data["detail"]
    assert len(detail) == 2000, detail
    assert far[-100:] in detail  # the end of the message is what is kept


# --- a delivery resumed after its gate was decided elsewhere ------------------------------------


def _waiting(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict]:
    """A run stopped at a gated push; the Recorder delivery code uses, and the item."""
    from loopctl.definitions import load_project
    from loopctl.journal.recorder import Recorder

    make_project(repo, "fixer.py")
    add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    return Recorder(load_project(repo)), the_approval(monkeypatch, repo)


@pytest.mark.parametrize(
    ("resolution", "status", "reason"),
    [
        ("rejected", "rejected", "`push` was rejected"),
        ("dismissed", "rejected", "`push` was dismissed"),
        ("superseded", "stopped", "a newer run of the task superseded this delivery"),
    ],
)
def test_a_delivery_resumed_after_its_gate_was_closed_delivers_nothing(
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    resolution: str,
    status: str,
    reason: str,
) -> None:
    from loopctl.delivery import pipeline

    rec, item = _waiting(repo, tmp_path, monkeypatch)
    rec.emit(
        EventType.INBOX_CLOSED,
        run=item["run"],
        loop="ship",
        task="main",
        id=item["id"],
        resolution=resolution,
    )

    result = pipeline.advance(rec, item["run"], "main")

    assert (str(result.status), result.reason) == (status, reason)
    assert events(repo, "action_started") == []


def test_a_refused_approval_is_named_while_the_gate_waits_again(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopctl.delivery import pipeline

    rec, item = _waiting(repo, tmp_path, monkeypatch)
    rec.emit(
        EventType.APPROVAL_REFUSED,
        run=item["run"],
        loop="ship",
        task="main",
        id=item["id"],
        reason="branch moved",
    )

    result = pipeline.advance(rec, item["run"], "main")

    assert str(result.status) == "awaiting_approval"
    assert result.reason == (
        f"waiting for approval of `push` (loopctl inbox approve {item['id']});"
        " the last approval was refused: branch moved"
    )
    assert result.item == item["id"]


def test_a_step_that_finished_before_a_crash_closed_its_gate_is_closed_on_resume(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopctl.delivery import pipeline

    rec, item = _waiting(repo, tmp_path, monkeypatch)
    sha = item["evidence"]["commit"]
    common = {"run": item["run"], "loop": "ship", "task": "main"}
    # What a delivery leaves when it dies between finishing the push and closing the item.
    rec.emit(EventType.APPROVED, **common, id=item["id"], sha=sha, step=1)
    rec.emit(
        EventType.ACTION_STARTED, **common, step=1, action="push", commit=sha, approval=item["id"]
    )
    rec.emit(
        EventType.ACTION_FINISHED, **common, step=1, action="push", commit=sha, ok=True, detail=""
    )

    result = pipeline.advance(rec, item["run"], "main")

    assert str(result.status) == "done"
    closed = [e for e in events(repo, "inbox_closed") if e.data["id"] == item["id"]]
    assert [e.data["resolution"] for e in closed] == ["approved"]
    assert len(events(repo, "action_started")) == 1  # the push is not run again


def test_a_push_onto_a_pull_requests_branch_says_so_in_its_item(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopctl.delivery import pipeline

    rec, item = _waiting(repo, tmp_path, monkeypatch)
    sha = item["evidence"]["commit"]
    pr_plan = dataclasses.replace(plan(sha), run=item["run"], task="main", push_branch="feature")
    opened = pipeline.open_gate(rec, pr_plan, pr_plan.steps[0])

    (shown,) = [i for i in inbox_items(monkeypatch, repo) if i["id"] == opened]
    assert shown["summary"] == (
        f"approve `push` of {BRANCH} at {sha[:12]} onto feature, the pull request's branch"
    )
    assert shown["evidence"]["remote_url"] == str(tmp_path / "remote.git")


def test_a_force_push_and_an_unpinned_remote_are_shown_as_such(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopctl.delivery import pipeline

    rec, item = _waiting(repo, tmp_path, monkeypatch)
    sha = item["evidence"]["commit"]
    replaced = "9876543210ab" + "e" * 28
    # The run pinned `origin`; a plan for another remote shows no URL rather than a wrong one.
    other = dataclasses.replace(plan(sha), run=item["run"], task="main", remote="upstream")
    opened = pipeline.open_gate(rec, other, other.steps[0], replaces=replaced)

    (shown,) = [i for i in inbox_items(monkeypatch, repo) if i["id"] == opened]
    force = (
        f"FORCE PUSH: replaces {replaced[:12]}, which upstream already has on {BRANCH} and"
        f" {sha[:12]} does not contain"
    )
    assert shown["summary"] == f"approve `push` of {BRANCH} at {sha[:12]} ({force})"
    assert shown["evidence"]["describe"] == (
        f"push {sha[:12]} to upstream as branch {BRANCH} ({force})"
    )
    assert shown["evidence"]["replaces"] == replaced
    assert shown["evidence"]["remote_url"] is None


def test_a_newer_runs_approval_supersedes_only_the_same_tasks_older_ones(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The older items have nothing left to deliver once a newer run of their task asks again;
    an approval of another task or another loop stays open, and so does a run's own."""
    from loopctl.delivery import pipeline

    rec, item = _waiting(repo, tmp_path, monkeypatch)
    old_sha, old_run = item["evidence"]["commit"], item["run"]
    same_run = dataclasses.replace(plan(SHA), run=old_run, task="main")
    other_task = dataclasses.replace(plan(SHA), run="r-other-task", task="docs")
    other_loop = dataclasses.replace(plan(SHA), run="r-other-loop", loop="nightly", task="main")
    opened = {
        p.run + p.loop + p.task: pipeline.open_gate(rec, p, p.steps[0])
        for p in (same_run, other_task, other_loop)
    }

    # An older run's failure of the task, and an approval a human already rejected.
    failed = rec.open_item(
        ItemKind.FAILED, "main: red", {"commit": SHA}, run="r-failed", loop="ship", task="main"
    )
    rejected = rec.open_item(
        ItemKind.APPROVAL, "approve", {"commit": SHA}, run="r-rejected", loop="ship", task="main"
    )
    assert rejected is not None
    no = InboxClosed(id=rejected, resolution="rejected")
    rec.record(no, run="r-rejected", loop="ship", task="main")

    assert {i["id"] for i in inbox_items(monkeypatch, repo)} == {
        item["id"],
        failed,
        *opened.values(),
    }
    assert [e.data["id"] for e in events(repo, "inbox_closed")] == [rejected]

    newer = dataclasses.replace(plan(OTHER), run="r-newer", task="main")
    newest = pipeline.open_gate(rec, newer, newer.steps[0])

    kept = {opened["r-other-taskshipdocs"], opened["r-other-loopnightlymain"], failed, newest}
    assert {i["id"] for i in inbox_items(monkeypatch, repo)} == kept
    superseded = {item["id"], opened[old_run + "shipmain"]}
    closed = events(repo, "inbox_closed")[1:]
    assert {e.data["id"] for e in closed} == superseded
    assert {(e.run, e.data["resolution"], e.data["by"]) for e in closed} == {
        (old_run, "superseded", "r-newer")
    }
    ended = [e for e in events(repo, "task_finished", "main") if e.run == old_run][-2:]
    assert [e.data for e in ended] == [
        {
            "status": "stopped",
            "reason": "superseded by run r-newer before it was approved",
            "commit": commit,
            "outcome": "superseded",
        }
        for commit in (old_sha, SHA)
    ]
    assert {e.run for e in events(repo, "task_finished")} == {old_run}

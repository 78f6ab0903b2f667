"""A delivered result ends the task (issue 23, item 4).

A scheduled loop whose result was pushed, opened as a pull request or merged does not work the
task again on the next tick (which would ask a human to force push over what they approved);
only a newer base on which the goal fails again makes it work, and the approval that would
overwrite the delivered result says so. After success the run says what to do next, and the
commit carries the maker's own summary. Real repositories, a real bare remote, the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke
from support.delivery import inbox_items, ship_loop, the_approval
from support.fake_gh import fake_gh, gh_calls
from support.journal import events
from support.repos import (
    GOAL_BRANCH,
    add_remote,
    commit_all,
    git,
    make_project,
    remote_refs,
)

from loopctl.delivery.gates import Delivered, deliveries, follow_up, last_delivery
from loopctl.delivery.gates import delivery_view as fold_delivery
from loopctl.engine.commit import SUMMARY_LINES, maker_summary
from loopctl.journal.events import Event

BRANCH = "loop/ship/main"


def _tick(monkeypatch: pytest.MonkeyPatch, repo: Path, code: int = 0) -> dict[str, Any]:
    """`loopctl run ship --once --json`: the one task's outcome."""
    result = invoke(monkeypatch, repo, "run", "ship", "--once", "--json")
    assert result.exit_code == code, result.output
    (task,) = json.loads(result.stdout)["run"]["tasks"]
    assert isinstance(task, dict)
    return task


def _pushes(repo: Path) -> list[Event]:
    return [e for e in events(repo, "action_started", "main") if e.data["action"] == "push"]


def _delivered_once(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str, str]:
    """A gated push loop's first tick, approved with `loopctl inbox approve`: (remote, the
    pushed commit, the approval item)."""
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]\napprove = ["push"]')
    first = _tick(monkeypatch, repo)
    assert first["status"] == "awaiting_approval"
    item = the_approval(monkeypatch, repo)["id"]
    approved = invoke(monkeypatch, repo, "inbox", "approve", item)
    assert approved.exit_code == 0, approved.output
    assert f"next: git merge {BRANCH}" in approved.stdout
    sha = first["commit"]
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}
    return remote, sha, item


def test_the_tick_after_an_approved_push_does_nothing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote, sha, item = _delivered_once(repo, tmp_path, monkeypatch)
    base = git(repo, "rev-parse", "HEAD").strip()

    again = _tick(monkeypatch, repo)

    assert again["status"] == "skipped"
    assert again["reason"] == (
        f"already delivered at {sha[:12]} (pushed to origin {BRANCH} in run"
        f" {events(repo, 'tick_started')[0].run}, approved in inbox {item}); nothing to do until"
        f" the base moves on from {base[:12]}"
    )
    assert len(_pushes(repo)) == 1  # exactly one delivery
    assert len(events(repo, "attempt_started", "main")) == 1  # no agent ran again
    assert len(events(repo, "commit_created", "main")) == 1
    assert len(events(repo, "check_finished", "main")) == 1  # nor a check on the base
    assert inbox_items(monkeypatch, repo) == []  # no force push is asked for
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}
    text = invoke(monkeypatch, repo, "run", "ship", "--once")
    assert text.exit_code == 0, text.output
    assert f"  already delivered at {sha[:12]} (pushed to origin {BRANCH}" in text.stdout
    assert len(_pushes(repo)) == 1
    assert inbox_items(monkeypatch, repo) == []


def test_a_newer_base_on_which_the_goal_fails_again_is_new_work_and_says_what_it_overwrites(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote, sha, item = _delivered_once(repo, tmp_path, monkeypatch)
    delivered_in = events(repo, "tick_started")[0].run
    (repo / "README.md").write_text("main moves on, add() still subtracts\n")
    commit_all(repo, "main moves on")

    again = _tick(monkeypatch, repo)

    assert again["status"] == "awaiting_approval"
    assert len(events(repo, "attempt_started", "main")) == 2  # worked again
    second = again["commit"]
    assert second != sha
    asked = the_approval(monkeypatch, repo)
    assert asked["summary"] == (
        f"approve `push` of {BRANCH} at {second[:12]} (FORCE PUSH over a delivered result:"
        f" overwrites {sha[:12]}, which run {delivered_in} delivered to origin {BRANCH}"
        f" (approved in inbox {item}); {second[:12]} does not contain it)"
    )
    assert asked["evidence"]["replaces"] == sha
    assert asked["evidence"]["overwrites_delivery"] == {
        "run": delivered_in,
        "commit": sha,
        "approved_in": [item],
    }
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}  # nothing moved unasked
    shown = invoke(monkeypatch, repo, "inbox", "show", asked["id"])
    assert "FORCE PUSH over a delivered result" in shown.stdout


def test_a_newer_base_on_which_the_goal_holds_ends_the_task_without_an_agent(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote, sha, _ = _delivered_once(repo, tmp_path, monkeypatch)
    # A person merges the delivered branch (with a merge commit: the base is a new commit).
    (repo / "README.md").write_text("main moves on\n")
    commit_all(repo, "main moves on")
    git(repo, "merge", "-q", "--no-edit", BRANCH)

    again = _tick(monkeypatch, repo)

    assert again["status"] == "done"
    assert again["reason"].startswith("the goal already holds")
    assert len(events(repo, "attempt_started", "main")) == 1
    assert len(_pushes(repo)) == 1
    assert inbox_items(monkeypatch, repo) == []
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}


def test_a_merged_delivery_rests_on_the_base_it_moved(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    ship_loop(repo, 'actions = ["commit", "merge"]\napprove = []')
    first = _tick(monkeypatch, repo)
    assert first["status"] == "done"
    assert first["next"] is None  # already in main: nothing left to do
    assert git(repo, "rev-parse", "main").strip() == first["commit"]

    again = _tick(monkeypatch, repo)

    assert again["status"] == "skipped"
    assert again["reason"].startswith(
        f"already delivered at {first['commit'][:12]} (merged into main"
    )
    assert len(events(repo, "attempt_started", "main")) == 1


def test_a_pull_request_delivery_prints_its_url_and_is_opened_once(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_gh(tmp_path, monkeypatch)
    make_project(repo, "fixer.py")
    add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push", "pr"]\napprove = []')
    url = "https://github.com/octo/repo/pull/1"

    first = _tick(monkeypatch, repo)
    text = invoke(monkeypatch, repo, "run", "ship", "--once")

    assert (first["status"], first["next"]) == ("done", url)
    assert text.exit_code == 0, text.output
    said = f"already delivered at {first['commit'][:12]} (pushed to origin {BRANCH}, pull request"
    assert f"{said} {url} in run" in text.stdout
    assert [c[:2] for c in gh_calls(calls)].count(["pr", "create"]) == 1
    assert len(events(repo, "attempt_started", "main")) == 1


def test_a_retry_asked_by_a_human_works_a_delivered_task_again(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The push succeeds; the custom step after it fails: the human's `retry` is new work.
    make_project(repo, "fixer.py")
    add_remote(repo, tmp_path)
    fails = '{ name = "deploy", argv = ["false"] }'
    ship_loop(repo, f'actions = ["commit", "push", {fails}]\napprove = []')
    first = _tick(monkeypatch, repo, code=1)
    assert first["status"] == "failed"
    (failed,) = inbox_items(monkeypatch, repo)
    assert _tick(monkeypatch, repo)["status"] == "skipped"  # delivered: not on its own

    assert invoke(monkeypatch, repo, "inbox", "retry", failed["id"]).exit_code == 0

    assert len(events(repo, "attempt_started", "main")) == 2


def test_a_goal_prints_the_merge_that_takes_its_branch(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")

    result = invoke(monkeypatch, repo, "goal", "tests green", "--json")

    assert result.exit_code == 0, result.output
    (task,) = json.loads(result.stdout)["run"]["tasks"]
    assert task["next"] == f"git merge {GOAL_BRANCH}"
    git(repo, *task["next"].split()[1:])  # the printed step works as printed
    assert "a + b" in (repo / "calc.py").read_text()
    again = invoke(monkeypatch, repo, "goal", "tests green")
    assert again.exit_code == 0, again.output
    assert "the goal already holds" in again.stdout
    assert "next:" not in again.stdout  # nothing new to merge


def test_the_makers_summary_is_the_commit_body_without_escapes_and_bounded(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "summarises.py")

    result = invoke(monkeypatch, repo, "goal", "tests green")

    assert result.exit_code == 0, result.output
    assert f"  next: git merge {GOAL_BRANCH}" in result.stdout
    message = git(repo, "log", "-1", "--format=%B", GOAL_BRANCH)
    subject, blank, body = message.split("\n", 2)
    assert subject == "loopctl: goal/tests-green (attempt 1)"
    assert blank == ""
    assert body.startswith("fixed add(): it subtracted b instead of adding it\n\ndetail 0\n")
    assert "\x1b" not in message
    assert "[2J" not in message
    summary = body.split("\n\nPrompt: ")[0]
    assert summary.endswith("\n[…]")
    assert len(summary.splitlines()) == SUMMARY_LINES + 1
    assert "Prompt: Make this condition hold: tests green" in body


def test_a_summary_drops_control_characters_and_the_protocol_line() -> None:
    def turn(attempt: int, text: str, role: str = "maker") -> Event:
        data = {"attempt": attempt, "role": role, "text": text}
        return Event(1, "2026-12-01T00:00:00+00:00", "agent_finished", "r", "l", "t", data)

    finished = [
        turn(1, "first try"),
        turn(2, '\x1b]0;title\x07done\x00 it\n{"result": "done it"}\n'),
        turn(2, "I judge it met", role="judge"),
    ]
    assert maker_summary(finished, 2) == "done it"
    assert maker_summary(finished, 1) == "first try"
    assert maker_summary(finished, 3) == ""


# --- the delivered state, folded from the log ----------------------------------------------------

PLAN = {
    "format": 1,
    "commit": "c" * 40,
    "branch": BRANCH,
    "base_sha": "b" * 40,
    "base_branch": "main",
    "remote": "origin",
    "worktree": None,
    "keep": "on-failure",
    "steps": [
        {"index": 1, "name": "push", "argv": None, "gated": True},
        {"index": 2, "name": "pr", "argv": None, "gated": False},
    ],
}


def _log(*rows: tuple[str, dict[str, Any]], task: str = "main") -> list[Event]:
    return [
        Event(seq, "2026-12-01T00:00:00+00:00", kind, "r1", "ship", task, data)
        for seq, (kind, data) in enumerate(rows, start=1)
    ]


def _finished(step: int, action: str, ok: object, **extra: object) -> tuple[str, dict[str, Any]]:
    return "action_finished", {"step": step, "action": action, "ok": ok, **extra}


PLANNED = ("delivery_planned", {"plan": PLAN})
PUSH_APPROVED = ("action_started", {"step": 1, "action": "push", "approval": "a1"})


@pytest.mark.parametrize(
    ("rows", "actions"),
    [
        ([PLANNED], None),  # planned, nothing ran
        ([PLANNED, PUSH_APPROVED, _finished(1, "push", False)], None),  # the push failed
        ([PLANNED, PUSH_APPROVED, _finished(1, "push", None)], None),  # outcome unknown
        ([PUSH_APPROVED, _finished(1, "push", True)], None),  # no plan: nothing to trust
        ([PLANNED, PUSH_APPROVED, _finished(1, "push", True)], ("push",)),
        (
            [PLANNED, PUSH_APPROVED, _finished(1, "push", True), _finished(2, "pr", True)],
            ("push", "pr"),
        ),
        (
            [PLANNED, _finished(1, "push", True), ("task_requeued", {"reason": "retry"})],
            None,  # a human asked for the task again
        ),
        ([PLANNED, _finished(1, "push", True, commit="d" * 40)], None),  # not the plan's commit
        ([PLANNED, _finished(1, "deploy", True)], None),  # a custom step delivers nothing known
    ],
)
def test_a_task_is_delivered_once_a_push_pr_or_merge_of_its_plan_succeeded(
    rows: list[tuple[str, dict[str, Any]]], actions: tuple[str, ...] | None
) -> None:
    found = last_delivery(_log(*rows), "ship", "main")
    assert (found.actions if found else None) == actions
    assert last_delivery(_log(*rows, task="other"), "ship", "main") is None


def test_a_delivery_remembers_who_approved_it_and_the_pull_request() -> None:
    url = "https://example.test/pr/7"
    log = _log(
        PLANNED, PUSH_APPROVED, _finished(1, "push", True), _finished(2, "pr", True, url=url)
    )
    found = last_delivery(log, "ship", "main")
    assert found == Delivered(
        run="r1",
        seq=4,
        commit="c" * 40,
        base_sha="b" * 40,
        branch=BRANCH,
        remote="origin",
        base_branch="main",
        push_branch=None,
        actions=("push", "pr"),
        url=url,
        approvals=("a1",),
    )
    assert (
        found.describe()
        == f"pushed to origin {BRANCH}, pull request {url} in run r1, approved in inbox a1"
    )
    assert follow_up(fold_delivery(log, "r1", "main"), BRANCH) == url
    assert follow_up(fold_delivery(log[:3], "r1", "main"), BRANCH) == f"git merge {BRANCH}"
    assert follow_up(fold_delivery([], "r1", "main"), None) is None


def test_a_delivery_approved_in_two_items_names_both() -> None:
    merge_approved = ("action_started", {"step": 2, "action": "merge", "approval": "a2"})
    plan = {**PLAN, "steps": [*PLAN["steps"][:1], {"index": 2, "name": "merge", "gated": True}]}
    log = _log(
        ("delivery_planned", {"plan": plan}),
        PUSH_APPROVED,
        _finished(1, "push", True),
        merge_approved,
        _finished(2, "merge", True),
    )
    found = last_delivery(log, "ship", "main")
    assert found is not None
    assert found.describe().endswith(" in run r1, approved in inbox a1, a2")


def test_an_unapproved_delivery_says_only_where_it_went() -> None:
    found = last_delivery(_log(PLANNED, _finished(1, "push", True)), "ship", "main")
    assert found is not None
    assert found.describe() == f"pushed to origin {BRANCH} in run r1"


def _run_rows(run: str, *rows: tuple[str, dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(run, kind, data) for kind, data in rows]


def test_deliveries_are_one_per_run_and_commit() -> None:
    second = ("delivery_planned", {"plan": {**PLAN, "commit": "d" * 40}})
    rows = [
        *_run_rows("r1", PLANNED, _finished(1, "push", True)),
        # the same commit delivered again by another run
        *_run_rows("r2", PLANNED, _finished(1, "push", True)),
        # another commit of the same task later in that run
        *_run_rows("r2", second, _finished(1, "push", True)),
    ]
    log = [
        Event(seq, "2026-12-01T00:00:00+00:00", kind, run, "ship", "main", data)
        for seq, (run, kind, data) in enumerate(rows, start=1)
    ]

    found = deliveries(log, "ship", "main")

    assert [(d.run, d.commit, d.actions) for d in found] == [
        ("r1", "c" * 40, ("push",)),
        ("r2", "c" * 40, ("push",)),
        ("r2", "d" * 40, ("push",)),
    ]


@pytest.mark.parametrize(
    "plan",
    [
        {k: v for k, v in PLAN.items() if k != "commit"},  # KeyError
        {**PLAN, "steps": 5},  # TypeError
        {**PLAN, "steps": [{"index": "first", "name": "push"}]},  # ValueError
    ],
)
def test_a_hand_edited_plan_is_no_delivery_and_no_crash(plan: object) -> None:
    log = _log(("delivery_planned", {"plan": plan}), _finished(1, "push", True))
    assert last_delivery(log, "ship", "main") is None


def test_a_pull_request_tasks_push_leaves_nothing_to_merge_by_hand() -> None:
    # Its push went to the pull request's own branch: that request is where it goes next.
    on_pr = ("delivery_planned", {"plan": {**PLAN, "push_branch": "feature"}})
    pushed = _log(on_pr, PUSH_APPROVED, _finished(1, "push", True))
    assert follow_up(fold_delivery(pushed, "r1", "main"), BRANCH) is None
    unpushed = _log(on_pr, PUSH_APPROVED, _finished(1, "push", False))
    assert follow_up(fold_delivery(unpushed, "r1", "main"), BRANCH) == f"git merge {BRANCH}"

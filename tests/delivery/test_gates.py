"""The approval policy as pure functions over definitions and events (delivery/gates.py): what
needs a human, what a plan records and shows, and where a delivery stands after any log."""

from __future__ import annotations

from typing import Any

import pytest

from loopctl.definitions.loops import Action, DeliverSpec
from loopctl.delivery.gates import (
    PLAN_FORMAT,
    Plan,
    Step,
    asked_question,
    delivery_view,
    gated_names,
    plan_steps,
)
from loopctl.journal.events import Event, EventType
from loopctl.journal.history import human_answers, requeued_tasks

SHA = "1234567890ab" + "c" * 28
BASE = "fedcba987654" + "0" * 28

DELIVER = DeliverSpec(
    actions=(
        Action("commit"),
        Action("push"),
        Action("deploy", ("make", "deploy")),
        Action("pr"),
        Action("merge"),
    ),
    approve=("commit", "push", "merge"),
)


def plan(**changes: Any) -> Plan:
    fields: dict[str, Any] = {
        "run": "r1",
        "loop": "ship",
        "task": "t",
        "commit": SHA,
        "branch": "loop/ship/t",
        "base_sha": BASE,
        "base_branch": "main",
        "remote": "origin",
        "worktree": "/wt/t",
        "keep": "always",
        "steps": plan_steps(DELIVER),
    }
    return Plan(**{**fields, **changes})


def event(seq: int, type_: str, /, run: str = "r1", task: str | None = "t", **data: Any) -> Event:
    return Event(seq, "2026-12-01T00:00:00+00:00", type_, run, "ship", task, data)


def test_commit_is_never_gated_and_the_rest_only_when_named() -> None:
    assert gated_names(DELIVER) == ("push", "merge")
    assert plan_steps(DELIVER) == (
        Step(1, "push", None, True),
        Step(2, "deploy", ("make", "deploy"), False),
        Step(3, "pr", None, False),
        Step(4, "merge", None, True),
    )
    assert gated_names(DeliverSpec()) == ()
    assert plan_steps(DeliverSpec()) == ()


def test_a_step_round_trips_through_json_and_rejects_loose_values() -> None:
    custom = Step(2, "deploy", ("make", "deploy"), True)
    assert custom.custom
    assert not Step(1, "push").custom
    assert Step.from_json(custom.to_json()) == custom
    assert Step.from_json({"index": "3", "name": "pr", "argv": ["a", 1], "gated": "yes"}) == Step(
        3, "pr", ("a", "1"), False
    )
    assert Step.from_json({"index": 1, "name": "push", "argv": "rm -rf /"}).argv is None


def test_a_plan_round_trips_through_its_event() -> None:
    # What the approval later runs comes from this event: the remote pushed to, the branch a
    # PR task pushes to, and the findings the review step shows.
    findings = ({"path": "tests/conftest.py", "rule": "skips every test", "line": 3},)
    original = plan(push_branch="feature", remote="upstream", review=findings)
    data = original.to_json()
    assert data["format"] == PLAN_FORMAT == 1  # stored in logs: never changes silently
    assert data["push_branch"] == "feature"
    assert (data["remote"], data["review"]) == ("upstream", list(findings))
    assert "push_branch" not in plan().to_json()
    back = Plan.from_event(event(1, EventType.DELIVERY_PLANNED, plan=data))
    assert back == original
    sparse = {"commit": SHA, "branch": "b", "base_sha": BASE}
    defaults = Plan.from_event(
        Event(1, "t", EventType.DELIVERY_PLANNED, None, None, None, {"plan": sparse})
    )
    assert (defaults.run, defaults.loop, defaults.task) == ("", "", "")
    assert (defaults.remote, defaults.keep, defaults.steps, defaults.push_branch) == (
        "origin",
        "on-failure",
        (),
        None,
    )


def test_plan_lookups() -> None:
    p = plan()
    assert p.step(4) == Step(4, "merge", None, True)
    assert p.step(9) is None
    assert p.has("pr")
    assert not p.has("commit")


def test_each_step_is_described_as_the_approver_should_read_it() -> None:
    p = plan()
    push, deploy, pr, merge = p.steps
    assert p.describe(push) == f"push {SHA[:12]} to origin as branch loop/ship/t"
    assert p.describe(deploy) == f"run `make deploy` in the task's worktree (at {SHA[:12]})"
    assert p.describe(pr) == "open or update a pull request from loop/ship/t into main"
    assert p.describe(merge) == f"merge the pull request of loop/ship/t (head must be {SHA[:12]})"
    no_pr = plan(steps=(merge,))
    assert no_pr.describe(merge) == f"fast-forward main to {SHA[:12]}"
    head = plan(push_branch="feature")
    assert head.describe(push) == (
        f"push {SHA[:12]} to origin as branch feature (the pull request's head), only if it is"
        f" still at {BASE[:12]}"
    )


def _opened(seq: int, item: str, step: Any, commit: str = SHA, **kw: Any) -> Event:
    return event(
        seq,
        EventType.INBOX_OPENED,
        kind="approval",
        id=item,
        evidence={"step": step, "commit": commit},
        **kw,
    )


def test_the_delivery_view_folds_plans_gates_and_steps() -> None:
    log = [
        event(1, EventType.DELIVERY_PLANNED, plan=plan().to_json()),
        event(2, EventType.DELIVERY_PLANNED, run="r2", plan=plan().to_json()),  # another run
        _opened(3, "g1", 1),
        # Not an approval, though it carries what one would: no gate.
        event(
            4,
            EventType.INBOX_OPENED,
            kind="escalation",
            id="q1",
            evidence={"step": 2, "commit": SHA},
        ),
        event(5, EventType.NOTE, kind="approval", id="n1", evidence={"step": 3, "commit": SHA}),
        _opened(5, "bad", "1"),  # no integer step: ignored
        _opened(5, "bad2", None),
        event(6, EventType.APPROVED, id="g1", sha=SHA),
        event(7, EventType.ACTION_STARTED, step=1, approval="g1"),
        event(8, EventType.ACTION_FINISHED, step=1, ok=True, detail="pushed"),
        event(9, EventType.INBOX_CLOSED, id="g1", resolution="approved"),
        event(10, EventType.APPROVED, id="g1", sha="late"),  # a closed item takes no more
        event(11, EventType.ACTION_STARTED, step=2),
        event(12, EventType.ACTION_FINISHED, step=2, ok="maybe"),
        event(13, EventType.ACTION_STARTED, step="3"),  # no integer step: ignored
        event(14, EventType.ACTION_FINISHED, step="3", ok=True),
        event(15, EventType.NOTE, step=3, ok=True),  # only action events move a step
    ]
    view = delivery_view(log, "r1", "t")
    assert view.plan == plan()
    assert set(view.gates) == {1}
    gate = view.gates[1]
    assert (gate.item, gate.step, gate.sha, gate.opened_seq) == ("g1", 1, SHA, 3)
    assert (gate.approved_sha, gate.approved_seq, gate.resolution) == (SHA, 6, "approved")
    assert gate.approved
    assert not gate.is_open
    first, second = view.state(1), view.state(2)
    assert (first.starts, first.finished, first.ok, first.detail, first.approval) == (
        1,
        True,
        True,
        "pushed",
        "g1",
    )
    assert (second.starts, second.finished, second.ok, second.approval) == (1, True, None, None)
    assert (view.state(3).starts, view.state(3).finished) == (0, False)
    assert view.next_step() == plan().steps[2]


def test_a_new_plan_starts_the_view_afresh_and_a_refusal_undoes_an_approval() -> None:
    log = [
        event(1, EventType.DELIVERY_PLANNED, plan=plan(commit=BASE).to_json()),
        _opened(2, "old", 1, BASE),
        event(3, EventType.ACTION_STARTED, step=1),
        event(4, EventType.DELIVERY_PLANNED, plan=plan().to_json()),
        _opened(5, "new", 1),
        event(6, EventType.APPROVED, id="old", sha=BASE),  # an item of the replaced plan
        event(7, EventType.APPROVED, id="new", sha=SHA),
        event(8, EventType.APPROVAL_REFUSED, id="new", reason="branch moved"),
    ]
    view = delivery_view(log, "r1", "t")
    assert view.plan == plan()
    assert view.state(1).starts == 0
    gate = view.gates[1]
    assert gate.item == "new"
    assert (gate.approved_sha, gate.approved_seq, gate.refused) == (None, None, "branch moved")
    assert not gate.approved
    assert gate.is_open
    again = delivery_view([*log, event(9, EventType.APPROVED, id="new", sha=SHA)], "r1", "t")
    assert again.gates[1].approved
    assert again.gates[1].refused is None
    closed = delivery_view([*log, event(9, EventType.INBOX_CLOSED, id="new")], "r1", "t")
    assert closed.gates[1].resolution == "closed"


def test_no_plan_means_no_next_step_and_a_finished_plan_has_none_left() -> None:
    assert delivery_view([], "r1", "t").next_step() is None
    done = [
        event(1, EventType.DELIVERY_PLANNED, plan=plan(steps=(Step(1, "push"),)).to_json()),
        event(2, EventType.ACTION_FINISHED, step=1, ok=False),
    ]
    view = delivery_view(done, "r1", "t")
    assert view.next_step() is None
    assert view.state(1).ok is False


def test_requeued_tasks_wait_until_a_run_finds_them() -> None:
    log = [
        event(1, EventType.TASK_REQUEUED, task="a"),
        event(2, EventType.TASK_REQUEUED, task="b"),
        event(3, EventType.TASK_FOUND, task="a"),
        event(4, EventType.TASK_REQUEUED, task=None),
        Event(5, "t", EventType.TASK_REQUEUED, "r1", "other", "c", {}),
        event(6, EventType.TASK_REQUEUED, task="b", note="again"),
    ]
    pending = requeued_tasks(log, "ship")
    assert [(e.task, e.seq) for e in pending] == [("b", 6)]


def test_a_reply_reaches_the_first_run_that_finds_the_task() -> None:
    log = [
        event(1, EventType.TASK_REQUEUED, run=None, task="a", question="which?", answer="this"),
        event(2, EventType.TASK_REQUEUED, run=None, task="b", answer=None),
        event(3, EventType.TASK_REQUEUED, run=None, task="c", answer="no question"),
        event(4, EventType.TASK_FOUND, run="r2", task="a"),
        event(5, EventType.TASK_FOUND, run="r3", task="a"),  # already given to r2
        event(6, EventType.TASK_FOUND, run="r2", task="b"),
        event(7, EventType.TASK_FOUND, run="r4", task="c"),
        event(8, EventType.TASK_FOUND, run="r5", task=None),
    ]
    assert human_answers(log) == {
        ("r2", "a"): ("which?", "this"),
        ("r4", "c"): ("", "no question"),
    }


@pytest.mark.parametrize(
    ("escalate", "text", "asked"),
    [
        ("  which branch?  ", "", "which branch?"),
        ("   ", 'done\n{"escalate": "from the text"}', "from the text"),
        (None, 'done\n{"escalate": "from the text"}', "from the text"),
        (None, "no question here", None),
        (None, "", None),
        (3, '{"result": "ok"}', None),
    ],
)
def test_a_question_comes_from_the_protocol_or_the_final_line(
    escalate: object, text: str, asked: str | None
) -> None:
    assert asked_question(escalate, text) == asked

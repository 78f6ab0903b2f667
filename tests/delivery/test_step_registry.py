"""The delivery step registry and its users agree (issue 28 item 2).

Every action a loop may name (definitions' BUILTIN_ACTIONS) has one registered object, and every
step object says what it needs and how it reads; a step registered at run time is planned,
described to its approver, checked for its tool and run by the real pipeline, with no other
module told its name.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import ClassVar

import pytest
from support.cli import invoke
from support.delivery import ship_loop, the_approval
from support.journal import events
from support.repos import make_project

from loopctl.definitions import loops
from loopctl.definitions.loops import Action
from loopctl.delivery import tools
from loopctl.delivery.gates import Delivered, GateView, Plan, Step, plan_steps
from loopctl.delivery.steps import CUSTOM, STEPS, DeliveryStep, StepOutcome, Tool, step_for
from loopctl.journal.recorder import Recorder

SHA = "a" * 40
PLAN = Plan(
    run="r1",
    loop="ship",
    task="t",
    commit=SHA,
    branch="loop/ship/t",
    base_sha="b" * 40,
    base_branch="main",
    remote="origin",
    worktree=None,
    keep="on-failure",
    steps=(Step(1, "push"), Step(2, "pr"), Step(3, "merge")),
    review=({"path": "tests/x.py", "line": 1, "text": "pass", "why": "skips"},),
)


def test_every_action_a_loop_may_name_has_exactly_one_step_object() -> None:
    listed = {name for name, step in STEPS.items() if step.listed}

    assert sorted(set(loops.BUILTIN_ACTIONS) ^ listed) == []
    assert [name for name, step in STEPS.items() if step.name != name] == []
    assert CUSTOM not in STEPS.values()
    assert step_for(Action("deploy", ("make", "deploy"))) is CUSTOM


@pytest.mark.parametrize("name", [*sorted(STEPS), "deploy"])
def test_every_step_declares_its_tools_and_describes_itself(name: str) -> None:
    argv = ("make", "deploy") if name not in STEPS else None
    action = Action(name, argv)
    step = step_for(action)
    among = [*loops.BUILTIN_ACTIONS, name]

    needs = step.tools(action, among, Path(".loop/loops/ship.toml"))
    said = step.describe(PLAN, Step(4, name, argv))

    assert isinstance(needs, tuple)
    assert all(isinstance(t, Tool) and t.program and t.missing for t in needs)
    assert isinstance(said, str)
    assert said.strip()
    assert type(step).run is not DeliveryStep.run  # each step runs itself
    if step.planned:
        assert said == PLAN.describe(Step(4, name, argv))  # the approver reads the same
    if step.delivering:
        result = Delivered(
            "r1", 9, SHA, PLAN.base_sha, PLAN.branch, "origin", "main", None, (name,)
        )
        assert result.describe() == f"{step.delivered(result)} in run r1"
        assert step.delivered(result).strip()


def test_the_tools_each_step_declares_are_what_the_preflight_looks_for() -> None:
    nowhere = "/nonexistent-loopctl-path"
    actions = [Action("commit"), Action("push"), Action("pr"), Action("merge")]

    missing = tools.missing_tools([*actions, Action("deploy", ("make", "x"))], nowhere)

    assert missing == [
        "`pr` needs the GitHub CLI `gh`, which is not on PATH: install it"
        " (https://cli.github.com), then `gh auth login`",
        "`merge` of the pull request needs the GitHub CLI `gh`, which is not on PATH: install it"
        " (https://cli.github.com), then `gh auth login`",
        "`deploy` runs 'make', which is not on PATH (install it, or fix [deliver] actions)",
    ]
    # A merge without a pull request fast-forwards with git; one after a `pr` that already
    # ran still needs gh.
    assert tools.missing_tools([Action("merge")], nowhere) == []
    assert len(tools.missing_tools([Action("merge")], nowhere, among=["pr", "merge"])) == 1


class Stamp(DeliveryStep):
    """A step the registry learns only at run time: it writes the commit it delivers."""

    name: ClassVar[str] = "stamp"
    delivering: ClassVar[bool] = True
    program: ClassVar[str] = "git"  # on every PATH the suite runs with

    def __init__(self, out: Path) -> None:
        self.out = out

    def tools(self, action: Action, among: Collection[str], where: Path | None) -> tuple[Tool, ...]:
        return (Tool(self.program, f"`stamp` needs {self.program!r}"),)

    def describe(self, plan: Plan, step: Step) -> str:
        return f"stamp {plan.commit[:12]} into {self.out.name}"

    def run(self, rec: Recorder, plan: Plan, step: Step, gate: GateView | None) -> StepOutcome:
        self.out.write_text(json.dumps({"commit": plan.commit, "approval": gate and gate.item}))
        return StepOutcome(True, f"stamped {plan.commit[:12]}")

    def reconcile(self, rec: Recorder, plan: Plan, step: Step) -> StepOutcome | None:
        return StepOutcome(True, "stamped before") if self.out.exists() else None


def test_a_step_registered_at_run_time_is_planned_described_gated_and_run(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "stamp.json"
    monkeypatch.setitem(STEPS, "stamp", Stamp(out))
    # The one name definitions must accept (they sit below delivery; the test above checks it).
    monkeypatch.setattr(loops, "BUILTIN_ACTIONS", (*loops.BUILTIN_ACTIONS, "stamp"))
    make_project(repo, "fixer.py")
    ship_loop(repo, 'actions = ["commit", "stamp"]\napprove = ["stamp"]')

    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    item = the_approval(monkeypatch, repo)
    commit = str(events(repo, "commit_created", "main")[-1].data["sha"])

    assert not out.exists()  # gated: nothing ran before the approval
    assert item["evidence"]["action"] == "stamp"
    assert item["evidence"]["describe"] == f"stamp {commit[:12]} into stamp.json"
    assert item["summary"] == f"approve `stamp` of loop/ship/main at {commit[:12]}"

    approved = invoke(monkeypatch, repo, "inbox", "approve", item["id"])

    assert approved.exit_code == 0, approved.output
    assert json.loads(out.read_text()) == {"commit": commit, "approval": item["id"]}
    (finished,) = events(repo, "action_finished", "main")
    assert finished.data["action"] == "stamp"
    assert finished.data["ok"] is True
    assert finished.data["detail"] == f"stamped {commit[:12]}"


def test_a_step_registered_at_run_time_is_refused_when_its_tool_is_missing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "stamp.json"
    missing = Stamp(out)
    monkeypatch.setattr(Stamp, "program", "loopctl-no-such-stamp-tool")
    monkeypatch.setitem(STEPS, "stamp", missing)
    monkeypatch.setattr(loops, "BUILTIN_ACTIONS", (*loops.BUILTIN_ACTIONS, "stamp"))
    make_project(repo, "fixer.py")
    ship_loop(repo, 'actions = ["commit", "stamp"]')

    result = invoke(monkeypatch, repo, "run", "ship", "--once")

    assert result.exit_code == 1, result.output
    assert (
        "loop 'ship' cannot deliver: `stamp` needs 'loopctl-no-such-stamp-tool'; nothing ran"
    ) in result.stderr
    assert events(repo, "tick_started") == []
    assert plan_steps(loops.DeliverSpec((Action("commit"), Action("stamp")))) == (Step(1, "stamp"),)

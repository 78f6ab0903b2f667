"""`merge`: the task's pull request merged (its head must still be the commit), or, without a
pull request, the base branch fast-forwarded to the commit.

An interrupted merge is found again: a merged pull request, or a base that contains the commit.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from loopctl import git
from loopctl.delivery.steps.base import DeliveryStep, StepOutcome, Tool
from loopctl.delivery.steps.github import find_pr, gh_call, gh_tool
from loopctl.delivery.steps.pr import NAME as PR

if TYPE_CHECKING:
    from loopctl.definitions.loops import Action
    from loopctl.delivery.gates import Delivered, GateView, Plan, Step
    from loopctl.journal.recorder import Recorder


class Merge(DeliveryStep):
    name: ClassVar[str] = "merge"
    delivering: ClassVar[bool] = True

    def tools(self, action: Action, among: Collection[str], where: Path | None) -> tuple[Tool, ...]:
        # Only a pull request's merge runs gh; a fast-forward is git's.
        return (gh_tool("`merge` of the pull request"),) if PR in among else ()

    def describe(self, plan: Plan, step: Step) -> str:
        short = plan.commit[:12]
        if plan.has(PR):
            return f"merge the pull request of {plan.branch} (head must be {short})"
        return f"fast-forward {plan.base_branch} to {short}"

    def delivered(self, result: Delivered) -> str:
        return f"merged into {result.base_branch}" if result.base_branch else "merged"

    def run(self, rec: Recorder, plan: Plan, step: Step, gate: GateView | None) -> StepOutcome:
        if plan.has(PR):
            found = find_pr(rec, plan)
            if found is None:
                return StepOutcome(False, f"no open pull request for {plan.branch} to merge")
            number = str(found["number"])
            args = ["pr", "merge", number, "--merge", f"--match-head-commit={plan.commit}"]
            gh_call(rec, plan, args)
            return StepOutcome(True, f"merged pull request #{number}", found.get("url"))
        if plan.base_branch is None:
            return StepOutcome(False, "no base branch to fast-forward (HEAD was detached)")
        moved = git.fast_forward(rec.paths.root, plan.base_branch, plan.commit)
        if not moved:
            return StepOutcome(True, f"{plan.base_branch} already contains {plan.commit[:12]}")
        return StepOutcome(True, f"fast-forwarded {plan.base_branch} to {plan.commit[:12]}")

    def reconcile(self, rec: Recorder, plan: Plan, step: Step) -> StepOutcome | None:
        if plan.has(PR):
            found = find_pr(rec, plan, state="merged")
            if found is not None:
                return StepOutcome(True, "merged (found after an interruption)", found.get("url"))
            return None
        if plan.base_branch is None:
            return None
        head = git.branch_head(rec.paths.root, plan.base_branch)
        if head is not None and git.is_ancestor(rec.paths.root, plan.commit, head):
            return StepOutcome(True, f"{plan.base_branch} already contains the commit")
        return None


STEP = Merge()

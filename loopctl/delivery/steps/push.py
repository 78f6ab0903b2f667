"""`push`: the task's commit to the loop's remote, as its branch (or onto a pull request's head).

Pushes go to the URL the run recorded before any agent ran (loopctl.delivery.remotes), never to
whatever the remote's name points at now. A push that would replace what the remote has is a
force push: it waits for a human who was shown the commit it replaces, and runs only if the
remote still has that commit. An interrupted push is found again on the remote.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from loopctl import git
from loopctl.delivery import remotes
from loopctl.delivery.steps.base import DeliveryStep, StepOutcome, shown_replaces
from loopctl.errors import LoopctlError

if TYPE_CHECKING:
    from loopctl.delivery.gates import Delivered, GateView, Plan, Step
    from loopctl.journal.events import Event
    from loopctl.journal.recorder import Recorder


class Push(DeliveryStep):
    name: ClassVar[str] = "push"
    delivering: ClassVar[bool] = True

    def describe(self, plan: Plan, step: Step) -> str:
        short = plan.commit[:12]
        if plan.push_branch:
            return (
                f"push {short} to {plan.remote} as branch {plan.push_branch} (the pull request's"
                f" head), only if it is still at {plan.base_sha[:12]}"
            )
        return f"push {short} to {plan.remote} as branch {plan.branch}"

    def delivered(self, result: Delivered) -> str:
        return f"pushed to {result.remote} {result.push_branch or result.branch}"

    def summary(self, plan: Plan, step: Step) -> str:
        summary = super().summary(plan, step)
        if plan.push_branch:
            summary += f" onto {plan.push_branch}, the pull request's branch"
        return summary

    def evidence(self, events: list[Event], plan: Plan) -> dict[str, Any]:
        # The approver sees where the push goes: the URL recorded before the agent ran.
        pin = remotes.run_pin(events, plan.run)
        return {"remote_url": pin.url if pin is not None and pin.name == plan.remote else None}

    def overwrites(self, rec: Recorder, plan: Plan) -> str | None:
        """The commit a push of the plan would replace on the remote, or None (a fast-forward).

        A pull request's branch is never forced (its push leases the head it started from). A
        remote that cannot be read is left to the push itself, which reads it again.
        """
        if plan.push_branch:
            return None
        root = rec.paths.root
        try:
            current = git.remote_branch_sha(root, push_url(rec, plan), plan.branch)
        except LoopctlError:
            return None
        if current is None or current == plan.commit or git.is_ancestor(root, current, plan.commit):
            return None
        return current

    def run(self, rec: Recorder, plan: Plan, step: Step, gate: GateView | None) -> StepOutcome:
        root = rec.paths.root
        url = push_url(rec, plan)
        if plan.push_branch:
            return _push_to_pr_head(rec, plan, plan.push_branch, url)
        current = git.remote_branch_sha(root, url, plan.branch)
        if current == plan.commit:
            return StepOutcome(
                True, f"{plan.remote} already has {plan.branch} at {plan.commit[:12]}"
            )
        forced = current is not None and not git.is_ancestor(root, current, plan.commit)
        if forced and _approved_replaces(rec, gate) != current:
            assert current is not None
            # The remote moved after the approval was shown: this force push was never approved.
            return StepOutcome(
                False,
                f"{plan.remote} has {plan.branch} at {current[:12]}, which pushing"
                f" {plan.commit[:12]} would replace (a force push no approval showed); nothing"
                " was pushed",
            )
        git.push_commit(root, url, plan.commit, plan.branch, expect=current)
        shown = git.display_url(url)
        verb = f"force-pushed (replacing {str(current)[:12]})" if forced else "pushed"
        return StepOutcome(
            True, f"{verb} {plan.commit[:12]} to {plan.remote} ({shown}) {plan.branch}"
        )

    def reconcile(self, rec: Recorder, plan: Plan, step: Step) -> StepOutcome | None:
        target = plan.push_branch or plan.branch
        remote = git.remote_branch_sha(rec.paths.root, push_url(rec, plan), target)
        if remote == plan.commit:
            return StepOutcome(True, "found on the remote after an interruption")
        return None


def push_url(rec: Recorder, plan: Plan) -> str:
    """Where the plan's pushes go: the URL its run recorded before any agent ran, never the
    remote's name, which an agent could have repointed since (see loopctl.delivery.remotes)."""
    return remotes.push_url(rec.paths.root, rec.log.read(), plan.run, plan.remote)


def _approved_replaces(rec: Recorder, gate: GateView | None) -> str | None:
    """The remote commit the approved `push` item of this plan said it replaces."""
    if gate is None or not gate.approved:
        return None
    return shown_replaces(rec, gate)


def _push_to_pr_head(rec: Recorder, plan: Plan, target: str, url: str) -> StepOutcome:
    """Add the task's commits to a pull request's branch; never replace what others pushed.

    The work was built on the PR head as it was (base_sha): the push leases exactly that, so a
    commit someone pushed meanwhile is never overwritten, and the task is found again next tick.
    """
    root = rec.paths.root
    current = git.remote_branch_sha(root, url, target)
    if current == plan.commit:
        return StepOutcome(True, f"{plan.remote} already has {target} at {plan.commit[:12]}")
    if current != plan.base_sha:
        now = current[:12] if current else "deleted"
        return StepOutcome(
            False,
            f"the pull request's branch {target} moved from {plan.base_sha[:12]} to {now}"
            " since the task started; nothing was pushed (the next tick works on the new head)",
        )
    git.push_commit(root, url, plan.commit, target, expect=plan.base_sha)
    shown = git.display_url(url)
    return StepOutcome(True, f"pushed {plan.commit[:12]} to {plan.remote} ({shown}) {target}")


STEP = Push()

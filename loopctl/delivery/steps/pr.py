"""`pr`: open (or update) a pull request from the task's branch into its base, through `gh`.

An interrupted `pr` is found again by the pull request's head branch.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from loopctl.delivery.steps.base import DeliveryStep, StepOutcome, Tool
from loopctl.delivery.steps.github import find_pr, gh_call, gh_tool
from loopctl.journal import history

if TYPE_CHECKING:
    from loopctl.definitions.loops import Action
    from loopctl.delivery.gates import Delivered, GateView, Plan, Step
    from loopctl.journal.events import Event
    from loopctl.journal.recorder import Recorder

NAME = "pr"


class PullRequest(DeliveryStep):
    name: ClassVar[str] = NAME
    delivering: ClassVar[bool] = True

    def tools(self, action: Action, among: Collection[str], where: Path | None) -> tuple[Tool, ...]:
        return (gh_tool("`pr`"),)

    def describe(self, plan: Plan, step: Step) -> str:
        return f"open or update a pull request from {plan.branch} into {plan.base_branch}"

    def delivered(self, result: Delivered) -> str:
        return f"pull request {result.url}" if result.url else "pull request opened"

    def run(self, rec: Recorder, plan: Plan, step: Step, gate: GateView | None) -> StepOutcome:
        title, body = pr_text(rec.log.read(), plan)
        existing = find_pr(rec, plan)
        if existing is not None:
            number = str(existing["number"])
            args = ["pr", "edit", number, f"--title={title}", "--body-file=-"]
            gh_call(rec, plan, args, stdin=body)
            return StepOutcome(True, f"updated pull request #{number}", existing.get("url"))
        args = ["pr", "create", f"--head={plan.branch}", f"--title={title}", "--body-file=-"]
        if plan.base_branch:
            args.insert(3, f"--base={plan.base_branch}")
        done = gh_call(rec, plan, args, stdin=body)
        lines = reversed(done.stdout_tail.splitlines())
        url = next((ln.strip() for ln in lines if ln.strip()), "")
        return StepOutcome(True, "opened a pull request", url or None)

    def reconcile(self, rec: Recorder, plan: Plan, step: Step) -> StepOutcome | None:
        found = find_pr(rec, plan)
        if found is not None:
            return StepOutcome(True, "found after an interruption", found.get("url"))
        return None


def pr_text(events: list[Event], plan: Plan) -> tuple[str, str]:
    """A pull request's title and body, from the task and its attempts."""
    run = history.fold(events).get(plan.run)
    view = run.tasks.get(plan.task) if run else None
    prompt = view.prompt.strip() if view else ""
    subject = (view.title if view and view.title else "") or (prompt.splitlines() or [""])[0]
    title = " ".join((subject or f"{plan.loop}: {plan.task}").split())
    if len(title) > 72:
        title = title[:71] + "…"
    lines = ["## Task", "", prompt[:2000] or plan.task, "", "## How it was checked", ""]
    for attempt in view.attempts if view else []:
        fp = f" `{attempt.fingerprint}`" if attempt.fingerprint else ""
        reason = " ".join(attempt.reason.split())[:200]
        lines.append(
            f"- attempt {attempt.number}: {attempt.verdict or 'interrupted'}{fp}: {reason}"
        )
    lines += [
        "",
        f"Made by loopctl: loop `{plan.loop}`, task `{plan.task}`, run `{plan.run}`,"
        f" commit `{plan.commit[:12]}`.",
        f"<!-- loopctl:{plan.loop}/{plan.task} -->",
    ]
    return title, "\n".join(lines) + "\n"


STEP = PullRequest()

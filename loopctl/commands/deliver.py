"""Deliver a finished goal by hand: merge its commit into the base branch, push it, or open a
pull request, each bound to the commit the human saw and each at most once.

A `loopctl goal` that ends `done` leaves one commit on its task branch and no delivery plan.
`deliver` records a one-step plan for the action asked (so the log says what was delivered, as
a loop's `[deliver]` does) and runs that step through the delivery pipeline's own step objects
(loopctl.delivery.steps) between `action_started` and `action_finished`. The commit is bound
like an approval's: a request naming another sha, or a task branch that moved since, is refused
and the refusal recorded (a `note`). A step that already succeeded for that commit is not run
again: a second click, or a replayed request, does nothing more.

A goal records no push remote before its agent runs (only a loop that pushes does), so its
push goes to the URL the remote has now, which the page shows and the request must name again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loopctl import git
from loopctl.commands.inbox import ActionResult, lock_name
from loopctl.definitions.loops import Action
from loopctl.delivery import remotes
from loopctl.delivery.gates import Plan, Step, approval_problem
from loopctl.delivery.pipeline import base_branch, run_step
from loopctl.delivery.steps import StepOutcome
from loopctl.delivery.tools import delivery_path, missing_tools
from loopctl.engine import GOAL_LOOP
from loopctl.errors import LockHeld, LoopctlError
from loopctl.journal.events import Event, EventType
from loopctl.journal.history import TaskView, find_run
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import ActionFinished, ActionStarted, DeliveryPlanned, Note, read
from loopctl.journal.statuses import TaskStatus
from loopctl.lock import RunnerLock

if TYPE_CHECKING:
    from loopctl.definitions import Project

# Each action's step index, fixed: one plan per click, but each action's events stay apart.
ACTIONS = {"push": 1, "pr": 2, "merge": 3}
REMOTE = "origin"
REFUSED = "delivery_refused"
# One delivery at a time in this process (the dashboard runs actions on two threads): a second
# request waits and then finds the first one's result, instead of finding the goal busy. Another
# process is kept out by the goal's RunnerLock.
_IN_PROCESS = threading.Lock()


class DeliverError(LoopctlError):
    """The run is no finished goal with a commit, or the action is unknown (exit 1)."""


@dataclass(frozen=True, slots=True)
class Offer:
    """What a finished goal can deliver, as the page shows it."""

    run: str
    task: str
    commit: str
    branch: str
    base_sha: str
    base_branch: str | None
    head: str | None  # the task branch now
    remote_url: str | None  # where a push goes now (None: no remote)
    done: dict[str, str]  # action -> what it did, for those that succeeded for this commit
    unavailable: dict[str, str]  # action -> why it cannot run here

    def patch(self, project: Project) -> str:
        if self.commit == self.base_sha:
            return ""
        return git.patch_between(project.root, self.base_sha, self.commit).decode(
            "utf-8", "replace"
        )


def finished_goal(events: list[Event], ref: str) -> tuple[str, TaskView] | None:
    """The run and its task when `ref` names a goal that ended done with a commit."""
    run = find_run(events, ref)
    if run.loop != GOAL_LOOP:
        return None
    for task in run.tasks.values():
        if task.status == TaskStatus.DONE and task.commit and task.branch and task.base_sha:
            return run.run, task
    return None


def offer(project: Project, ref: str) -> Offer | None:
    """What the finished goal `ref` can deliver now; None for any other run."""
    events = Recorder(project).log.read()
    found = finished_goal(events, ref)
    if found is None:
        return None
    run, task = found
    assert task.commit
    assert task.branch
    assert task.base_sha
    root = project.root
    url = _remote_url(project)
    unavailable: dict[str, str] = {}
    if url is None:
        why = f"no remote {REMOTE!r} (`git remote add {REMOTE} URL`)"
        unavailable.update(push=why, pr=why)
    missing = missing_tools([Action("pr")], delivery_path(project), None)
    if missing:
        unavailable.setdefault("pr", missing[0])
    return Offer(
        run=run,
        task=task.task,
        commit=task.commit,
        branch=task.branch,
        base_sha=task.base_sha,
        base_branch=base_branch(root, task.base_ref),
        head=git.branch_head(root, task.branch),
        remote_url=url,
        done=_succeeded(events, run, task.task, task.commit),
        unavailable=unavailable,
    )


def deliver(
    project: Project, ref: str, action: str, sha: str, remote_url: str | None = None
) -> ActionResult:
    """Run `action` (merge | push | pr) on the finished goal `ref`, bound to commit `sha`."""
    if action not in ACTIONS:
        raise DeliverError(f"no delivery action {action!r}: use one of {', '.join(ACTIONS)}")
    rec = Recorder(project)
    found = finished_goal(rec.log.read(), ref)
    if found is None:
        raise DeliverError(f"run {ref} is not a goal that finished done with a commit")
    run, task = found
    runner = RunnerLock(project.paths.locks_dir, lock_name(GOAL_LOOP, task.task))
    with _IN_PROCESS:
        try:
            runner.acquire()
        except LockHeld as exc:
            raise DeliverError(f"the goal is busy (running or being delivered): {exc}") from None
        try:
            return _deliver_locked(rec, run, task, action, sha, remote_url)
        finally:
            runner.release()


def _deliver_locked(
    rec: Recorder, run: str, task: TaskView, action: str, sha: str, remote_url: str | None
) -> ActionResult:
    project = rec.project
    assert task.commit
    assert task.branch
    assert task.base_sha
    if len(sha) >= 7 and task.commit.startswith(sha.lower()):
        sha = task.commit  # an abbreviated sha, as `git log` and the page show it
    # Read again under the lock: whoever held it a moment ago may have delivered it since.
    done = _succeeded(rec.log.read(), run, task.task, task.commit)
    if action in done and sha == task.commit:
        return ActionResult(run, action, f"already done: {done[action]}")
    plan = Plan(
        run=run,
        loop=GOAL_LOOP,
        task=task.task,
        commit=task.commit,
        branch=task.branch,
        base_sha=task.base_sha,
        base_branch=base_branch(project.root, task.base_ref),
        remote=REMOTE,
        worktree=None,  # the goal's worktree is left as the goal left it
        keep="always",
        steps=(Step(ACTIONS[action], action),),
    )
    problem = approval_problem(sha, plan, git.branch_head(project.root, plan.branch))
    if problem is None and action in ("push", "pr"):
        problem = _remote_problem(project, remote_url)
    if problem is not None:
        refused = Note(what=REFUSED, reason=problem, extra={"action": action, "sha": sha})
        rec.record(refused, run=run, loop=GOAL_LOOP, task=task.task)
        return ActionResult(run, action, f"{action} refused: {problem}", ok=False)
    rec.record(DeliveryPlanned(plan=plan.to_json()), run=run, loop=GOAL_LOOP, task=task.task)
    step = plan.steps[0]
    started = ActionStarted(step=step.index, action=action, commit=plan.commit, gated=False)
    rec.record(started, run=run, loop=GOAL_LOOP, task=task.task)
    if action == "push" and remotes.run_pin(rec.log.read(), run) is None:
        outcome = _push_unpinned(rec, plan)
    else:
        outcome = run_step(rec, plan, step)
    finished = ActionFinished(
        step=step.index,
        action=action,
        commit=plan.commit,
        ok=outcome.ok,
        detail=outcome.detail[-2000:],
        url=outcome.url,
    )
    rec.record(finished, run=run, loop=GOAL_LOOP, task=task.task)
    rec.refresh_projections()
    return ActionResult(run, action, outcome.detail, ok=outcome.ok is True)


def _succeeded(events: list[Event], run: str, task: str, commit: str) -> dict[str, str]:
    """The actions that succeeded for this commit of the task, with what they did."""
    done: dict[str, str] = {}
    for event in events:
        if event.type != EventType.ACTION_FINISHED or event.run != run or event.task != task:
            continue
        finished = read(ActionFinished, event)
        if finished.commit == commit and finished.ok is True:
            done[str(finished.action)] = finished.detail
    return done


def _remote_url(project: Project) -> str | None:
    try:
        push, _fetch = git.remote_urls(project.root, REMOTE)
    except LoopctlError:
        return None
    return git.display_url(push) if push is not None else None


def _remote_problem(project: Project, shown: str | None) -> str | None:
    """Why a push or pull request may not go where the page said, if it may not."""
    now = _remote_url(project)
    if now is None:
        return f"no remote {REMOTE!r}"
    if shown is not None and shown != now:
        return f"remote {REMOTE!r} now leads to {now}, not to {shown} as shown; nothing was sent"
    return None


def _push_unpinned(rec: Recorder, plan: Plan) -> StepOutcome:
    """A goal's push: to the URL the remote has now (checked against the page's), never forced."""
    root = rec.paths.root
    push, _fetch = git.remote_urls(root, REMOTE)
    if push is None:
        return StepOutcome(False, f"no remote {REMOTE!r}")
    try:
        current = git.remote_branch_sha(root, push, plan.branch)
        if current == plan.commit:
            return StepOutcome(True, f"{REMOTE} already has {plan.branch} at {plan.commit[:12]}")
        if current is not None and not git.is_ancestor(root, current, plan.commit):
            return StepOutcome(
                False,
                f"{REMOTE} has {plan.branch} at {current[:12]}, which pushing"
                f" {plan.commit[:12]} would replace (a force push); nothing was pushed",
            )
        git.push_commit(root, push, plan.commit, plan.branch, expect=current)
    except LoopctlError as exc:
        return StepOutcome(False, str(exc))
    shown = git.display_url(push)
    return StepOutcome(True, f"pushed {plan.commit[:12]} to {REMOTE} ({shown}) {plan.branch}")

"""The regression gate of an approved proposal (issue 31, item 3): the loop's last recorded
tasks, done under the definitions it had, must still pass under the proposed ones.

Which gate runs is said in every answer (`Gate.kind`):

- `replay` (item 5, loopctl.replaying.offline): the loop's last runs whose every agent turn has
  a complete cassette are replayed offline, with no model and no network, under the proposed
  definitions (`strict=False`: a divergence is answered with the recorded responses in order, so
  each task's replayed outcome is known); a task recorded `done` that does not replay `done`
  breaks the gate. Used whenever the loop has such runs.
- `checks`, otherwise: each of the loop's last `LIMIT` tasks recorded `done` (with a commit) is
  checked again under the proposed definitions: its commit is checked out in a temporary
  worktree, the proposed definition files laid over it, and the proposed loop's protected paths
  and scope held against what the task changed, then its check commands run there, confined as
  a check always is (invariant 11). The first task that fails is named, with why.
- `none`: the loop has no recorded task done with a commit; nothing to hold the proposal to.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from loopctl import git, process, sandbox
from loopctl.checks.conditions import ResolvedCondition, resolve_condition
from loopctl.checks.verdicts import check_commands, command_verdict, protected_violations
from loopctl.definitions import Project, load_project
from loopctl.definitions.loops import Loop
from loopctl.definitions.proposals import DEFINITION_GLOBS
from loopctl.definitions.sandbox import SandboxMode
from loopctl.engine.egress_policy import check_policy
from loopctl.engine.runner import GOAL_LOOP
from loopctl.errors import LoopctlError
from loopctl.journal import history
from loopctl.journal.events import EventLog, EventType
from loopctl.journal.schema import tick_started
from loopctl.journal.statuses import TaskStatus
from loopctl.nofollow import remove_tree, write_new
from loopctl.paths import cache_home, repo_slug
from loopctl.replaying.offline import OfflineReplay, replay_offline, replayable_runs
from loopctl.secrets import build_env

logger = logging.getLogger(__name__)

# How many of the loop's last done tasks the gate checks again.
LIMIT = 3
# A check under the gate gets as long as the loop's checker would, within this.
MAX_CHECK_S = 1800.0


@dataclass(frozen=True, slots=True)
class Recorded:
    """A task the loop finished `done` with a commit, and what it ran under."""

    run: str
    task: str
    commit: str
    base: str
    condition: str | None  # a goal run's condition text


@dataclass(frozen=True, slots=True)
class Gate:
    """What the gate did: which gate, the tasks it checked, and the first it broke (if any)."""

    kind: str  # checks | none
    checked: tuple[str, ...] = ()
    broken: str | None = None  # the task id
    reason: str = ""

    @property
    def passed(self) -> bool:
        return self.broken is None


def recorded_tasks(log: EventLog, loop: str, limit: int = LIMIT) -> list[Recorded]:
    """The loop's last `limit` distinct tasks recorded done with a commit, newest first."""
    found: list[Recorded] = []
    with history.runs_of(log) as runs:
        views = [r for r in runs.values() if r.loop == loop]
        for run in reversed(views):
            started = next((e for e in run.events if e.type == EventType.TICK_STARTED), None)
            condition = tick_started(started).condition if started is not None else None
            for task in run.tasks.values():
                if len(found) >= limit:
                    return found
                if task.status != TaskStatus.DONE or not task.commit or not task.base_sha:
                    continue
                if any(r.task == task.task for r in found):
                    continue
                found.append(Recorded(run.run, task.task, task.commit, task.base_sha, condition))
    return found


def run_gate(
    project: Project, log: EventLog, proposal: str, loop: str, tree: str, proposed: Path
) -> Gate:
    """The gate for `loop` under the definitions of `tree` (checked out at `proposed`): the
    replay gate when the loop has replayable runs, else the checks gate."""
    replayed = replay_gate(project.root, loop, proposed)
    if replayed is not None:
        return replayed
    return checks_gate(project, proposal, loop, tree, recorded_tasks(log, loop))


def replay_gate(root: Path, loop: str, proposed: Path) -> Gate | None:
    """Replay the loop's last replayable runs offline under the definitions at `proposed`;
    None when there is nothing to replay."""
    try:
        runs = replayable_runs(root, loop, limit=LIMIT)
        if not runs:
            return None
        checked: list[str] = []
        for run in runs:
            replay = replay_offline(root, run, strict=False, definitions=proposed)
            gate = replay_verdict(run, replay)
            checked += gate.checked
            if not gate.passed:
                return Gate("replay", tuple(checked), gate.broken, gate.reason)
    except LoopctlError as exc:
        # A run replayable_runs offered but that cannot be replayed after all (a cassette
        # refused): the checks gate answers instead.
        logger.debug("the replay gate cannot run: %s", exc)
        return None
    return Gate("replay", tuple(dict.fromkeys(checked)))


def replay_verdict(run: str, replay: OfflineReplay) -> Gate:
    """The replay gate's word on one replayed run: the first task recorded `done` that did not
    replay `done` breaks it."""
    checked: list[str] = []
    for task, recorded in replay.recorded_outcomes.items():
        if recorded != "done":
            continue
        checked.append(task)
        again = replay.replayed_outcomes.get(task)
        if again != "done":
            where = f" (first divergence: {replay.diverged.detail})" if replay.diverged else ""
            why = f"recorded done in run {run}, it replays {again or 'not at all'}{where}"
            return Gate("replay", tuple(checked), task, why)
    return Gate("replay", tuple(checked))


def checks_gate(
    project: Project, proposal: str, loop: str, proposed_tree: str, tasks: Sequence[Recorded]
) -> Gate:
    """Check each of `tasks` again with the definitions of `proposed_tree`; the first broken
    one ends the gate."""
    if not tasks:
        return Gate("none", reason=f"loop {loop!r} has no recorded task done with a commit")
    checked: list[str] = []
    for task in tasks:
        with _task_checkout(project.root, proposal, task, proposed_tree) as checkout:
            problem = _check_task(project, checkout, loop, task)
        checked.append(task.task)
        if problem is not None:
            return Gate("checks", tuple(checked), task.task, problem)
    return Gate("checks", tuple(checked))


@contextlib.contextmanager
def _task_checkout(root: Path, proposal: str, task: Recorded, tree: str) -> Iterator[Path]:
    """A temporary worktree of the task's commit with the proposed definition files laid over
    (those the proposal has not: removed), removed again afterwards."""
    parent = cache_home() / "proposals" / repo_slug(root)
    parent.mkdir(parents=True, exist_ok=True)
    checkout = Path(tempfile.mkdtemp(prefix=f"{proposal}-", dir=parent)) / "tree"
    try:
        git.worktree_add_detached(root, checkout, task.commit)
        for _mode, _sha, path in git.tree_files(root, task.commit, DEFINITION_GLOBS):
            remove_tree(checkout / path, within=checkout)
        for mode, _sha, path in git.tree_files(root, tree, DEFINITION_GLOBS):
            content = git.read_blob(root, tree, path) or ""
            target = checkout / path
            target.parent.mkdir(parents=True, exist_ok=True)
            write_new(target, content.encode("utf-8", "surrogateescape"), within=checkout)
            target.chmod(0o755 if mode == "100755" else 0o644)
        yield checkout
    finally:
        with contextlib.suppress(LoopctlError):
            git.worktree_remove(root, checkout, force=True)
        shutil.rmtree(checkout.parent, ignore_errors=True)


def _loop_and_condition(
    proposed: Project, loop: str, task: Recorded
) -> tuple[Loop | None, ResolvedCondition | None]:
    configured = proposed.config.condition_map()
    if loop == GOAL_LOOP:
        if task.condition is None:
            return None, None
        return None, resolve_condition(task.condition, proposed.root, configured=configured)
    found = proposed.loop(loop)
    if not found.goal:
        return found, None
    return found, resolve_condition(found.goal, proposed.root, configured=configured)


def _check_task(project: Project, checkout: Path, loop: str, task: Recorded) -> str | None:
    """Why the task, as committed, fails under the definitions in `checkout`; None: it passes."""
    proposed = load_project(checkout)
    try:
        found, condition = _loop_and_condition(proposed, loop, task)
    except LoopctlError as exc:
        return f"its loop cannot run under the proposal: {exc}"
    changed = git.tree_changes(project.root, task.base, task.commit)
    protect: list[str] = []
    scope: tuple[str, ...] = ()
    if found is not None:
        protect += found.checker.protect
        scope = found.maker.scope
    if condition is not None and condition.source == "builtin":
        protect += condition.protect
    violations = protected_violations(changed, protected=protect, scope=scope)
    if violations:
        return f"it changed what the proposal forbids: {'; '.join(violations)}"
    checker = found.checker if found is not None else None
    commands = (
        check_commands(checker, condition)
        if checker is not None
        else ((condition.argv,) if condition is not None and condition.argv else ())
    )
    env = build_env(allow=proposed.config.env_allow, extra={"PYTHONDONTWRITEBYTECODE": "1"})
    timeout = min(found.checker.timeout_s if found is not None else MAX_CHECK_S, MAX_CHECK_S)
    for argv in commands:
        box = None
        if project.config.sandbox is not SandboxMode.OFF:
            policy = check_policy(checker) if checker is not None else None
            box = sandbox.make_sandbox(root=project.root, worktree=checkout, egress=policy)
        done = process.run(list(argv), cwd=checkout, env=env, timeout=timeout, sandbox=box)
        verdict = command_verdict(argv, done.exit_code, done.timed_out, done.output_tail(4000))
        if not verdict.passed:
            return f"`{' '.join(argv)}` fails on its commit {task.commit[:12]}: {verdict.reason}"
    return None

"""A custom action (`{ name = "…", argv = [...] }`): the loop's own program, run in the task's
worktree at the commit, with a scrubbed environment that names the task.

loopctl cannot observe what it did, so it runs at most once: an interrupted one is never run
again, its outcome recorded as unknown for a person to check.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from loopctl import git, process, worktrees
from loopctl.delivery.steps.base import DeliveryStep, StepOutcome, Tool
from loopctl.secrets import build_env

if TYPE_CHECKING:
    from loopctl.definitions.loops import Action
    from loopctl.delivery.gates import GateView, Plan, Step
    from loopctl.journal.recorder import Recorder

CUSTOM_TIMEOUT = 1800.0


class Custom(DeliveryStep):
    # Not a name a loop lists: every action with an argv and no built-in name is one of these.
    name: ClassVar[str] = "custom"

    def tools(self, action: Action, among: Collection[str], where: Path | None) -> tuple[Tool, ...]:
        program = action.argv[0] if action.argv else None
        if program is None or "/" in program:
            return ()  # a program named by a path runs from the task's worktree: not on PATH
        fix = f" in {where}" if where is not None else ""
        return (
            Tool(
                program,
                f"`{action.name}` runs {program!r}, which is not on PATH (install it, or"
                f" fix [deliver] actions{fix})",
            ),
        )

    def describe(self, plan: Plan, step: Step) -> str:
        argv = " ".join(step.argv or ())
        return f"run `{argv}` in the task's worktree (at {plan.commit[:12]})"

    def run(self, rec: Recorder, plan: Plan, step: Step, gate: GateView | None) -> StepOutcome:
        config = rec.project.config
        worktree_root = config.worktree_root or rec.paths.default_worktree_root()
        workspace = worktrees.ensure_worktree(
            rec.paths.root, worktree_root, plan.loop, plan.task, plan.commit
        )
        head = git.head_sha(workspace.path)
        if head != plan.commit:
            return StepOutcome(
                False, f"the worktree is at {head[:12]}, not the approved {plan.commit[:12]}"
            )
        env = build_env(
            allow=config.env_allow,
            extra={
                "LOOPCTL_LOOP": plan.loop,
                "LOOPCTL_TASK": plan.task,
                "LOOPCTL_RUN": plan.run,
                "LOOPCTL_COMMIT": plan.commit,
                "LOOPCTL_BRANCH": plan.branch,
                "LOOPCTL_WORKTREE": str(workspace.path),
                "LOOPCTL_ACTION": step.name,
                "PYTHONDONTWRITEBYTECODE": "1",
            },
        )
        folder = rec.paths.runs_dir / plan.run / plan.task
        assert step.argv is not None
        done = process.run(
            list(step.argv),
            cwd=workspace.path,
            env=env,
            timeout=CUSTOM_TIMEOUT,
            stdout_path=folder / f"deliver-{step.index}-{step.name}.out",
            stderr_path=folder / f"deliver-{step.index}-{step.name}.err",
            redactor=rec.redactor,
        )
        tail = done.output_tail(600).strip()
        if done.ok:
            said = f": {tail[-300:]}" if tail else ""
            return StepOutcome(True, f"`{step.name}` exited 0{said}")
        why = "timed out" if done.timed_out else f"exited {done.exit_code}"
        return StepOutcome(False, f"`{step.name}` {why}" + (f": {tail}" if tail else ""))

    def reconcile(self, rec: Recorder, plan: Plan, step: Step) -> StepOutcome | None:
        # Its effect is invisible to loopctl: at most once means never again.
        return StepOutcome(
            None,
            f"`{' '.join(step.argv or ())}` was interrupted and its outcome is unknown; loopctl"
            " does not run it again — check by hand",
        )


STEP = Custom()

"""`commit`: the checked snapshot committed to the task's branch.

The engine makes this commit before delivery starts (loopctl.engine.commit): the step is never
planned, run or reconciled by the pipeline; it is registered so every action a loop may list
has one object that says what it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from loopctl.delivery.steps.base import DeliveryStep

if TYPE_CHECKING:
    from loopctl.delivery.gates import GateView, Plan, Step
    from loopctl.delivery.steps.base import StepOutcome
    from loopctl.journal.recorder import Recorder


class Commit(DeliveryStep):
    name: ClassVar[str] = "commit"
    planned: ClassVar[bool] = False

    def describe(self, plan: Plan, step: Step) -> str:
        return f"commit the checked snapshot to {plan.branch} as {plan.commit[:12]}"

    def run(self, rec: Recorder, plan: Plan, step: Step, gate: GateView | None) -> StepOutcome:
        raise AssertionError("the engine commits before delivery; a plan never holds `commit`")


STEP = Commit()

"""`review`: a change that looks like it tampers with the test run waits for a human first.

loopctl plans it itself (step 0, gated) when the sabotage scan (loopctl.checks.sabotage) flagged
the diff; once approved it does nothing, and an interrupted one is simply run again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from loopctl.checks.sabotage import Finding
from loopctl.checks.sabotage import summary as sabotage_summary
from loopctl.delivery.steps.base import DeliveryStep, StepOutcome

if TYPE_CHECKING:
    from loopctl.delivery.gates import GateView, Plan, Step
    from loopctl.journal.events import Event
    from loopctl.journal.recorder import Recorder

NAME = "review"


class Review(DeliveryStep):
    name: ClassVar[str] = NAME
    listed: ClassVar[bool] = False

    def describe(self, plan: Plan, step: Step) -> str:
        short = plan.commit[:12]
        return (
            f"let {short} through although the change looks like it tampers with the test"
            f" run ({len(plan.review)} line{'' if len(plan.review) == 1 else 's'} quoted)"
        )

    def asks(self, step: Step) -> str:
        return "a change that looks like it tampers with the test run"

    def summary(self, plan: Plan, step: Step) -> str:
        findings = [Finding.from_json(r) for r in plan.review]
        return f"{sabotage_summary(findings)} (approve to let {plan.commit[:12]} through)"

    def evidence(self, events: list[Event], plan: Plan) -> dict[str, Any]:
        return {"sabotage": list(plan.review)}

    def run(self, rec: Recorder, plan: Plan, step: Step, gate: GateView | None) -> StepOutcome:
        return StepOutcome(True, "a human let the change through")

    # reconcile: the default None; it does nothing, so it is run again.


STEP = Review()

"""What a delivery step is: one object that runs, reconciles, names its tools and describes itself.

The pipeline (loopctl.delivery.pipeline), the approval policy (loopctl.delivery.gates) and the
preflight (loopctl.delivery.tools) ask a step these questions; none of them branches on a step's
name. A step is registered once, by name, in loopctl.delivery.steps.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from loopctl.journal.inbox import items

if TYPE_CHECKING:
    from loopctl.definitions.loops import Action
    from loopctl.delivery.gates import Delivered, GateView, Plan, Step
    from loopctl.journal.events import Event
    from loopctl.journal.recorder import Recorder

GH_HINT = "install it (https://cli.github.com), then `gh auth login`"


@dataclass(frozen=True, slots=True)
class StepOutcome:
    ok: bool | None  # None: the outcome is unknown (a custom action that was interrupted)
    detail: str
    url: str | None = None


@dataclass(frozen=True, slots=True)
class Tool:
    """A program a step runs, and what to tell a person whose PATH lacks it."""

    program: str
    missing: str


class DeliveryStep:
    """One kind of delivery step. Subclasses override what differs; the defaults suit a step
    that needs no program, asks nothing special of its approver and cannot be found again."""

    name: ClassVar[str]
    # False: the engine does it before the pipeline starts (`commit`); it is never planned.
    planned: ClassVar[bool] = True
    # True: once it succeeded the task's work reached someone (see gates.Delivered).
    delivering: ClassVar[bool] = False
    # False: loopctl adds it itself (the sabotage `review`); a loop cannot list it by name.
    listed: ClassVar[bool] = True

    def tools(self, action: Action, among: Collection[str], where: Path | None) -> tuple[Tool, ...]:
        """The programs `action` runs. `among`: the names of every step of its delivery;
        `where`: the loop's definition file, for the fix a message suggests (None: unknown)."""
        return ()

    def describe(self, plan: Plan, step: Step) -> str:
        """The exact action, as a person approving it should read it."""
        raise NotImplementedError

    def delivered(self, result: Delivered) -> str:
        """How a delivering step's success reads in a delivered result ("pushed to …")."""
        return f"`{self.name}` ran"

    def asks(self, step: Step) -> str:
        """What an approval of the step lets through, in a sentence's middle."""
        return f"`{step.name}`"

    def summary(self, plan: Plan, step: Step) -> str:
        """The approval item's one line."""
        return f"approve `{step.name}` of {plan.branch} at {plan.commit[:12]}"

    def evidence(self, events: list[Event], plan: Plan) -> dict[str, Any]:
        """What the approval item shows besides the plan (added after the common keys)."""
        return {}

    def overwrites(self, rec: Recorder, plan: Plan) -> str | None:
        """A commit running the step would replace (a force push): it then always waits for a
        human who was told so. None: it replaces nothing."""
        return None

    def run(self, rec: Recorder, plan: Plan, step: Step, gate: GateView | None) -> StepOutcome:
        """Run the step. `gate`: its approval item as folded before it started (None: none).
        A LoopctlError raised here becomes a failed outcome."""
        raise NotImplementedError

    def reconcile(self, rec: Recorder, plan: Plan, step: Step) -> StepOutcome | None:
        """The outcome of the step found started but never finished (the process died), when
        it can be known; None: it did not happen, run it again. A LoopctlError raised here
        becomes "cannot tell whether the interrupted step happened"."""
        return None


def shown_replaces(rec: Recorder, gate: GateView) -> str | None:
    """The remote commit the approval item said its push replaces (None: a plain push)."""
    item = next((i for i in items(rec.log.read()) if i.id == gate.item), None)
    shown = item.evidence.get("replaces") if item is not None else None
    return shown if isinstance(shown, str) else None

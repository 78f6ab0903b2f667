"""The delivery steps, by name: each one object in one module (see steps.base.DeliveryStep).

Every module of this package that defines `STEP` (a DeliveryStep) is imported and registered
here, so a new step is one new module. A step a loop names (`push`) is the registered one; any
other name is the loop's own custom action. `definitions.loops.BUILTIN_ACTIONS` lists the names
a loop may use without an argv (definitions sit below delivery and cannot ask this registry);
tests/delivery/test_step_registry.py fails when the two disagree.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

from loopctl.delivery.steps import custom
from loopctl.delivery.steps.base import DeliveryStep, StepOutcome, Tool

if TYPE_CHECKING:
    from loopctl.definitions.loops import Action
    from loopctl.delivery.gates import Step

__all__ = [
    "CUSTOM",
    "STEPS",
    "DeliveryStep",
    "StepOutcome",
    "Tool",
    "delivers",
    "register",
    "step_for",
    "step_for_name",
]

STEPS: dict[str, DeliveryStep] = {}
CUSTOM: DeliveryStep = custom.STEP


def register(step: DeliveryStep) -> DeliveryStep:
    """Make `step` the object for its name (a test registers a fake one this way)."""
    STEPS[step.name] = step
    return step


def _discover() -> None:
    """Register the `STEP` of every module in this package (helpers such as `base` have none)."""
    for found in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{found.name}")
        step = getattr(module, "STEP", None)
        if isinstance(step, DeliveryStep) and step is not CUSTOM:
            register(step)


_discover()


def step_for(step: Step | Action) -> DeliveryStep:
    """The object that runs, reconciles, checks and describes `step`."""
    return step_for_name(step.name)


def step_for_name(name: str) -> DeliveryStep:
    """The registered step named `name`; a custom action's object for any other name."""
    return STEPS.get(name, CUSTOM)


def delivers(name: object) -> bool:
    """Whether the step named `name`, once it succeeded, handed the task's work to someone."""
    found = STEPS.get(name) if isinstance(name, str) else None
    return found is not None and found.delivering

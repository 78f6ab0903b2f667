"""`loopctl up --engine temporal`: each loop's interval or cron trigger as a Temporal Schedule.

The cadence semantics map exactly: `overlap = "skip"` → Skip, `"queue-one"` → BufferOne (one run
waits while one works); `catch_up = "one"` → a long catch-up window, in which the missed slots
after an outage meet the overlap policy, so one tick runs for them, not one per slot;
`"none"` → Temporal's shortest window, so a slot missed by more than that is dropped. File
watches stay local (`loopctl up`): no schedule can see this machine's files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleUpdate,
    ScheduleUpdateInput,
)

from loopctl.definitions import Loop
from loopctl.definitions.loops import TriggerKind
from loopctl.temporal.shapes import AttemptRequest

WORKFLOW = "loopctl.LoopTick"
OVERLAP = {"skip": ScheduleOverlapPolicy.SKIP, "queue-one": ScheduleOverlapPolicy.BUFFER_ONE}
# Temporal's own default (and loopctl's `catch_up = "one"` has no bound either); 10 s is the
# shortest window Temporal accepts.
CATCH_UP = {"one": timedelta(days=365), "none": timedelta(seconds=10)}


@dataclass(frozen=True, slots=True)
class Scheduled:
    loop: str
    schedule_id: str
    describe: str
    created: bool


def schedule_id(loop: str) -> str:
    """One schedule per loop; a workflow it starts is `<id>-<slot time>`, the attempt id."""
    return f"loopctl-{loop}"


def schedulable(loop: Loop) -> bool:
    """Whether `loop` has a trigger a schedule can fire (every or cron)."""
    return loop.trigger is not None and loop.trigger.kind in (TriggerKind.EVERY, TriggerKind.CRON)


def schedule_for(loop: Loop, task_queue: str) -> Schedule:
    """The Temporal Schedule that fires `loop` as its trigger, overlap and catch-up say."""
    trigger = loop.trigger
    if trigger is None or not schedulable(loop):
        raise ValueError(f"loop {loop.name!r} has no interval or cron trigger")
    if trigger.kind is TriggerKind.EVERY:
        assert trigger.every_s is not None
        spec = ScheduleSpec(
            intervals=[ScheduleIntervalSpec(every=timedelta(seconds=trigger.every_s))]
        )
    else:
        assert trigger.cron is not None
        spec = ScheduleSpec(cron_expressions=[trigger.cron], time_zone_name=loop.tz)
    if loop.jitter_s:
        spec.jitter = timedelta(seconds=loop.jitter_s)
    action = ScheduleActionStartWorkflow(
        WORKFLOW,
        AttemptRequest(loop=loop.name, attempt_id="", fired="schedule"),
        id=schedule_id(loop.name),
        task_queue=task_queue,
    )
    policy = SchedulePolicy(overlap=OVERLAP[loop.overlap], catchup_window=CATCH_UP[loop.catch_up])
    return Schedule(action=action, spec=spec, policy=policy)


async def apply(client: Client, loops: Sequence[Loop], task_queue: str) -> list[Scheduled]:
    """Create each loop's schedule, or bring an existing one up to its definition."""
    done = []
    for loop in loops:
        wanted = schedule_for(loop, task_queue)
        sid = schedule_id(loop.name)
        assert loop.trigger is not None
        try:
            await client.create_schedule(sid, wanted)
            created = True
        except ScheduleAlreadyRunningError:

            def update(_: ScheduleUpdateInput, wanted: Schedule = wanted) -> ScheduleUpdate:
                return ScheduleUpdate(schedule=wanted)

            await client.get_schedule_handle(sid).update(update)
            created = False
        done.append(Scheduled(loop.name, sid, loop.trigger.describe(), created))
    return done


async def pause(client: Client, loops: Sequence[str], note: str) -> None:
    """Pause the loops' schedules (`loopctl down`/`stop` for a loop on Temporal)."""
    for name in loops:
        await client.get_schedule_handle(schedule_id(name)).pause(note=note)


async def unpause(client: Client, loops: Sequence[str], note: str) -> None:
    """Unpause the loops' schedules (`loopctl up --engine temporal` after a `down`)."""
    for name in loops:
        await client.get_schedule_handle(schedule_id(name)).unpause(note=note)

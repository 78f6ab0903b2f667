"""What one run carries (`RunContext`), and the small helpers every part of the engine uses.

The engine's functions take the run's context, `ctx`, and record through `ctx.rec` (the project's
one `Recorder`) or `ctx.record(task, payload)`; a few take the recorder alone, before a run exists.
"""

from __future__ import annotations

import hashlib
import secrets as pysecrets
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from loopctl import git, nofollow
from loopctl.checks import verdicts as checks
from loopctl.checks.conditions import ResolvedCondition
from loopctl.definitions import Agent, Loop, Project
from loopctl.definitions.fields import format_duration
from loopctl.journal import budgets, history
from loopctl.journal.events import Event, EventLog
from loopctl.journal.inbox import ItemKind
from loopctl.journal.payload import Payload
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import BudgetStopped
from loopctl.paths import ProjectPaths
from loopctl.secrets import build_env
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import sanitize_task_id

GOAL_LOOP = "goal"


class StopSignal(threading.Event):
    """A tick's stop event that can say who set it (`up`'s mandate), for its `run_interrupted`.

    Set without a reason it is Ctrl-C's plain stop; the first reason given is kept.
    """

    def __init__(self) -> None:
        super().__init__()
        self.reason = ""

    def halt(self, reason: str = "") -> None:
        if reason and not self.reason:
            self.reason = reason
        self.set()


@dataclass(frozen=True, slots=True)
class Tick:
    """What a scheduler tells the engine about a tick it fires (see `run_loop_once`)."""

    changed: tuple[str, ...] = ()
    trigger: dict[str, Any] | None = None
    stop: threading.Event | None = None
    requeued_only: bool = False  # work only the tasks `loopctl inbox retry/reply` queued


@dataclass(slots=True)
class RunContext:
    """What one run carries through its tasks: the recorder, the loop, its agents and checks."""

    rec: Recorder
    project: Project
    loop: Loop
    run_id: str
    condition: ResolvedCondition | None
    maker: Agent
    judge: Agent | None
    in_place: bool
    base_ref: str
    protected: tuple[str, ...]
    stop: threading.Event = field(default_factory=threading.Event)
    top: Path | None = None  # the repository's top folder, once asked (see repo_top)
    common: Path | None = None  # the git dir its worktrees share, once asked (see repo_common)

    @property
    def paths(self) -> ProjectPaths:
        return self.rec.paths

    @property
    def log(self) -> EventLog:
        return self.rec.log

    def clock(self) -> datetime:
        return self.rec.clock()

    def repo_top(self) -> Path:
        """The top folder of the repository the project is in (asked once a run)."""
        if self.top is None:
            self.top = git.toplevel(self.paths.root)
        return self.top

    def repo_common(self) -> Path:
        """The git dir the repository's worktrees share, resolved (asked once a run)."""
        if self.common is None:
            self.common = git.common_dir(self.repo_top()).resolve()
        return self.common

    def record(self, task: str | None, payload: Payload, keep: Collection[str] = ()) -> Event:
        """An event of this run, about `task` (`keep`: see `journal.payload.data_of`)."""
        return self.rec.record(payload, run=self.run_id, loop=self.loop.name, task=task, keep=keep)


def goal_task_id(condition: str) -> str:
    """A readable task id for a goal: "tests green" -> "tests-green"."""
    slug = "-".join("".join(c if c.isalnum() else " " for c in condition.lower()).split())
    return sanitize_task_id(slug[:48] or "goal")


def new_run_id(now: datetime) -> str:
    return now.strftime("%Y%m%dT%H%M%S") + "-" + pysecrets.token_hex(2)


def judge_name(loop: Loop, condition: ResolvedCondition | None, default: str | None) -> str | None:
    """The checker agent a run of `loop` asks: its own `[checker] agent`, else, for a prose goal
    (one no command checks), the default checker. A goal a command checks needs no LLM judge."""
    if loop.checker.agent is not None:
        return loop.checker.agent
    return default if condition is not None and condition.judged else None


def from_github(loop: Loop) -> bool:
    return loop.tasks is not None and loop.tasks.source == "github"


def author(text: str) -> tuple[str, str]:
    if "<" in text and text.rstrip().endswith(">"):
        name, _, email = text.partition("<")
        return name.strip() or "loopctl", email.rstrip(">").strip() or "loopctl@localhost"
    return text.strip() or "loopctl", "loopctl@localhost"


def printable(text: str) -> str:
    """Task text for a commit message: git refuses NUL, and control characters help nobody."""
    return "".join(c if c.isprintable() or c in "\n\t" else " " for c in text)


def file_hashes(root: Path, paths: Sequence[str]) -> dict[str, str | None]:
    """Content hashes of repository files (None: deleted, or no regular file: a link, or a
    FIFO an agent left, which a plain read would wait on for ever), to tell later edits apart."""

    hashes: dict[str, str | None] = {}
    for relative in paths:
        target = root / relative
        try:
            hashes[relative] = hashlib.sha256(nofollow.read_regular(target)).hexdigest()[:16]
        except OSError:
            hashes[relative] = None
    return hashes


def ctx_events(events: Sequence[Event], run_id: str, task: str, type_: str) -> list[Event]:
    return [e for e in events if e.run == run_id and e.task == task and e.type == type_]


def git_date(iso: str) -> str:
    """An event's ISO time as git's "<unix seconds> +0000" (a redone commit is the same object)."""
    return f"{int(datetime.fromisoformat(iso).timestamp())} +0000"


def task_view(rec: Recorder, run_id: str, task_id: str) -> history.TaskView | None:
    run = history.fold(rec.log.read()).get(run_id)
    return run.tasks.get(task_id) if run else None


def agent_allow(rec: Recorder, agent: Agent) -> tuple[str, ...]:
    return (*agent.env_allow, *rec.project.config.env_allow)


def scrub(rec: Recorder, spec: TaskSpec) -> TaskSpec:
    redact = rec.redactor.redact
    return replace(
        spec,
        prompt=redact(spec.prompt),
        title=redact(spec.title),
        raw_id=redact(spec.raw_id),
        base_ref=redact(spec.base_ref) if spec.base_ref else None,
        fields=rec.redact_values(spec.fields),
    )


def check_env(rec: Recorder) -> dict[str, str]:

    # Bytecode written by one run can be older than the source the next attempt edits
    # within the same second; checks must always see the maker's latest code.
    return build_env(allow=rec.project.config.env_allow, extra={"PYTHONDONTWRITEBYTECODE": "1"})


def attempt_dir(ctx: RunContext, task_id: str, attempt: int) -> Path:
    folder = (
        ctx.paths.runs_dir / ctx.run_id / task_id / (f"attempt-{attempt}" if attempt else "setup")
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def wall_cap(ctx: RunContext, timeout: float) -> tuple[float, bool]:
    """`timeout`, cut to what is left of the run's `max_wall`; True when that is the limit."""
    run_events = [e for e in ctx.log.read() if e.run == ctx.run_id]
    left = budgets.wall_left(ctx.loop.budget, run_events, ctx.clock())
    if left is None or left >= timeout:
        return timeout, False
    return max(left, 0.1), True  # spent already: what starts now ends at once


def wall_capped(ctx: RunContext, agent: Agent) -> Agent:
    timeout, capped = wall_cap(ctx, agent.timeout_s)
    return replace(agent, timeout_s=timeout) if capped else agent


def out_of_wall(ctx: RunContext, spec: TaskSpec, what: str) -> str:
    """Record that `max_wall` ended `what` mid-attempt; the reason the attempt stops with."""

    limit = format_duration(ctx.loop.budget.max_wall_s or 0)
    reason = f"time budget: max_wall ({limit}) ran out during {what}, which was ended"
    ctx.record(spec.id, BudgetStopped(reason=reason))
    return reason


def check_commands(ctx: RunContext) -> tuple[tuple[str, ...], ...]:
    return checks.check_commands(ctx.loop.checker, ctx.condition)


def open_item(
    rec: Recorder,
    run_id: str,
    loop: str,
    task: str | None,
    kind: ItemKind,
    summary: str,
    evidence: dict[str, Any],
) -> str:
    item_id = rec.open_item(kind, summary, evidence, run=run_id, loop=loop, task=task)
    assert item_id is not None  # an item without a fixed id always opens
    return item_id

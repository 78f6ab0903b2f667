"""What each page shows, gathered from the log and the project with the CLI's own folds.

No rendering here: `pages` turns these into HTML. The folds are the CLI's (`commands.status`,
`journal.spending`, `journal.history`, `commands.inbox_show.show`), so the page and the terminal
agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl.commands.deliver import offer as goal_offer
from loopctl.commands.inbox_show import InboxError, patch, show
from loopctl.commands.status import LoopStatus, describe, loop_statuses
from loopctl.errors import LoopctlError
from loopctl.journal import history, pauses
from loopctl.journal.events import Event, EventType
from loopctl.journal.history import find_run
from loopctl.journal.inbox import InboxItem, ItemKind
from loopctl.journal.pauses import Pause
from loopctl.journal.spending import GroupBy, SpendRow, spend_report
from loopctl.journal.statuses import RunStatus, TaskStatus
from loopctl.scheduling.daemon import up_info
from loopctl.scheduling.pauses import loop_backends

if TYPE_CHECKING:
    from loopctl.commands.deliver import Offer
    from loopctl.commands.inbox_show import ItemDetail
    from loopctl.definitions import Project

CHART_DAYS = 14
RECENT_RUNS = 5
PAGE_SIZE = 100
# An attempt file shown in the page: its tail past this many bytes (the file has the rest).
FILE_TAIL_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class LoopCard:
    status: LoopStatus
    recent: tuple[history.RunView, ...]
    days: tuple[SpendRow, ...]


@dataclass(frozen=True, slots=True)
class LoopsView:
    loops: tuple[LoopCard, ...]
    days: tuple[SpendRow, ...]  # every loop together
    up: str | None  # "pid N since T" while `loopctl up` runs
    # Backends a rate limit, quota or overload pauses now, each with the loops it holds.
    paused: tuple[tuple[Pause, tuple[str, ...]], ...] = ()


def loops_view(
    project: Project,
    events: list[Event],
    now: datetime,
    tz: tzinfo,
    *,
    runs: dict[str, history.RunView] | None = None,
    every: list[InboxItem] | None = None,
) -> LoopsView:
    """Each loop's trigger, next tick, last runs and spend per day (as `status` and `spend`).

    `runs` and `every`: `history.fold` and `journal.inbox.items` of `events`, when known."""

    if runs is None:
        runs = history.fold(events)
    waiting = None if every is None else [i for i in every if i.is_open]
    statuses = loop_statuses(project, events, runs=runs, waiting=waiting)
    by_loop: dict[str, list[history.RunView]] = {}
    for run in runs.values():
        by_loop.setdefault(run.loop, []).append(run)
    since = now - timedelta(days=CHART_DAYS - 1)
    spent = [e for e in events if e.type == EventType.AGENT_FINISHED]
    cards = []
    for status in statuses:
        mine = [e for e in spent if e.loop == status.loop]
        report = spend_report(mine, by=GroupBy.DAY, since=since, now=now, tz=tz)
        recent = sorted(by_loop.get(status.loop, []), key=lambda r: r.started)[-RECENT_RUNS:]
        cards.append(LoopCard(status, tuple(reversed(recent)), report.days))
    total = spend_report(spent, by=GroupBy.DAY, since=since, now=now, tz=tz)
    up = up_info(project.paths, events)
    running = None
    if up is not None:
        # The night's mandate, when `up` has one: "up until 07:30, $3.20 of $20".
        running = f"pid {up.pid} since {str(up.since)[:19]}" + (
            f"; {up.mandate}" if up.mandate else ""
        )
    return LoopsView(tuple(cards), total.days, running, paused_backends(project, events, now))


def paused_backends(
    project: Project, events: list[Event], now: datetime
) -> tuple[tuple[Pause, tuple[str, ...]], ...]:
    """The pauses in force at `now` (journal.pauses), each with the loops whose agents use it."""
    found = []
    for backend, pause in sorted(pauses.holding(events, now).items()):
        held = tuple(
            name
            for name, loop in sorted(project.loops.items())
            if backend in loop_backends(project, loop)
        )
        found.append((pause, held))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class InboxView:
    shown: tuple[InboxItem, ...]
    total: int
    page: int
    pages: int
    closed: bool  # closed items included
    loop: str | None = None  # only this loop's items


def inbox_view(
    every: list[InboxItem], *, page: int = 1, closed: bool = False, loop: str | None = None
) -> InboxView:
    """The items `loopctl inbox` lists (with `closed`: `--all`), newest first, one page.

    `every`: `journal.inbox.items` of the log."""
    found = [i for i in every if (closed or i.is_open) and (loop is None or i.loop == loop)]
    found.reverse()
    pages = max(1, -(-len(found) // PAGE_SIZE))
    page = min(max(1, page), pages)
    start = (page - 1) * PAGE_SIZE
    shown = tuple(found[start : start + PAGE_SIZE])
    return InboxView(shown, len(found), page, pages, closed, loop)


@dataclass(frozen=True, slots=True)
class ItemView:
    detail: ItemDetail
    patch: str | None  # an approval's whole patch, undecodable bytes as U+FFFD


def item_view(project: Project, ref: str) -> ItemView:
    """`loopctl inbox show ID`: the evidence, and an approval's whole patch (`inbox diff`)."""

    detail = show(project, ref)
    text: str | None = None
    if detail.item.kind == ItemKind.APPROVAL and detail.commit and detail.base_sha:
        try:
            text = patch(project, detail.item.id).decode("utf-8", "replace")
        except InboxError:
            text = None
        except LoopctlError as exc:
            text = f"(the patch is unavailable: {exc})"
    return ItemView(detail, text)


@dataclass(frozen=True, slots=True)
class DeliverView:
    """A finished goal's diff and what its delivery buttons may do (`commands.deliver`)."""

    offer: Offer
    patch: str


def deliver_view(project: Project, run: str) -> DeliverView | None:
    """The diff and delivery of a finished goal; None for any other run."""

    found = goal_offer(project, run)
    if found is None:
        return None
    try:
        text = found.patch(project)
    except LoopctlError as exc:
        text = f"(the patch is unavailable: {exc})"
    return DeliverView(found, text)


@dataclass(frozen=True, slots=True)
class TimelineLine:
    seq: int
    offset_s: float
    text: str


@dataclass(frozen=True, slots=True)
class AttemptFile:
    name: str
    text: str
    size: int
    truncated: bool


@dataclass(frozen=True, slots=True)
class AttemptFolder:
    task: str
    name: str  # attempt-N or setup
    path: Path
    files: tuple[AttemptFile, ...]


@dataclass(frozen=True, slots=True)
class RunPage:
    run: history.RunView
    timeline: tuple[TimelineLine, ...]
    folders: tuple[AttemptFolder, ...]
    last_seq: int


def timeline_line(event: Event, start: str) -> TimelineLine:
    """One line of `loopctl replay`: seconds since the run started, and what happened."""
    offset = (datetime.fromisoformat(event.ts) - datetime.fromisoformat(start)).total_seconds()
    return TimelineLine(event.seq, offset, describe(event))


def run_page(project: Project, events: list[Event], ref: str) -> RunPage:
    """`loopctl replay RUN`, and the files of each attempt under .loop/runs/RUN/."""
    run = find_run(events, ref)
    start = run.events[0].ts if run.events else run.started
    lines = tuple(timeline_line(e, start) for e in run.events)
    return RunPage(run, lines, _folders(project.paths.runs_dir / run.run), events[-1].seq)


def _folders(run_dir: Path) -> tuple[AttemptFolder, ...]:
    found = []
    if not run_dir.is_dir():
        return ()
    for task_dir in sorted(p for p in run_dir.iterdir() if p.is_dir() and not p.is_symlink()):
        for folder in sorted(
            (p for p in task_dir.iterdir() if p.is_dir() and not p.is_symlink()),
            key=lambda p: (p.name != "setup", _number(p.name), p.name),
        ):
            files = tuple(
                _read_tail(f)
                for f in sorted(folder.iterdir())
                if f.is_file() and not f.is_symlink()
            )
            found.append(AttemptFolder(task_dir.name, folder.name, folder, files))
    return tuple(found)


def _number(name: str) -> int:
    tail = name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else 0


def _read_tail(path: Path) -> AttemptFile:
    size = path.stat().st_size
    with path.open("rb") as handle:
        if size > FILE_TAIL_BYTES:
            handle.seek(size - FILE_TAIL_BYTES)
        data = handle.read(FILE_TAIL_BYTES)
    return AttemptFile(path.name, data.decode("utf-8", "replace"), size, size > FILE_TAIL_BYTES)


def recent_runs(events: list[Event], limit: int = 50) -> list[history.RunView]:
    """The latest runs, newest first."""
    runs = sorted(history.fold(events).values(), key=lambda r: r.started)
    return list(reversed(runs[-limit:]))


def is_skipped(run: history.RunView) -> bool:
    """A tick that found nothing to do: it ended done and every task it found was skipped
    (base unchanged, already delivered, waiting for a human)."""
    return (
        run.status == RunStatus.DONE
        and bool(run.tasks)
        and all(t.status == TaskStatus.SKIPPED for t in run.tasks.values())
    )


@dataclass(frozen=True, slots=True)
class SkippedRuns:
    """Consecutive skipped ticks of one loop, for the same reason: one row."""

    loop: str
    reason: str
    runs: tuple[history.RunView, ...]  # newest first


@dataclass(frozen=True, slots=True)
class RunsList:
    rows: tuple[history.RunView | SkippedRuns, ...]
    skipped: int  # skipped ticks among the runs listed
    skipped_shown: bool  # each as a row of its own, not folded


def runs_list(runs: list[history.RunView], *, show_skipped: bool = False) -> RunsList:
    """`runs` (newest first) with each streak of skipped ticks of a loop folded into one row,
    unless `show_skipped`."""
    rows: list[history.RunView | SkippedRuns] = []
    skipped = 0
    for run in runs:
        if not is_skipped(run):
            rows.append(run)
            continue
        skipped += 1
        reason = _skip_reason(run)
        last = rows[-1] if rows else None
        if show_skipped:
            rows.append(run)
        elif isinstance(last, SkippedRuns) and (last.loop, last.reason) == (run.loop, reason):
            rows[-1] = SkippedRuns(last.loop, last.reason, (*last.runs, run))
        else:
            rows.append(SkippedRuns(run.loop, reason, (run,)))
    return RunsList(tuple(rows), skipped, show_skipped)


def _skip_reason(run: history.RunView) -> str:
    reasons = sorted({t.reason for t in run.tasks.values() if t.reason})
    if not reasons:
        return "nothing to do"
    # A base's sha differs from tick to tick; the words around it do not.
    words = [" ".join("…" if _is_sha(w) else w for w in r.split()) for r in reasons]
    return "; ".join(sorted(set(words)))


def _is_sha(word: str) -> bool:
    return len(word) >= 7 and all(c in "0123456789abcdef" for c in word)


def now_utc() -> datetime:
    return datetime.now(UTC)

"""The morning report: one screen of what the loops did since a point in time (issue 30).

A pure fold over the event log: the tasks done, the deliveries made, what waits for a human,
what stalled, was rate-limited, failed or was stopped, and what it all cost against the daily
fuse; every line with the command (and the dashboard link) that acts on it. `loopctl report`,
the dashboard's Report page and the daily `[notify] digest` all render this one result.

How a task ended is its `task_finished` outcome (statuses.Outcome); a log written before the
outcome was recorded reads it from the task's status (`journal.outcomes.task_outcome`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from enum import StrEnum
from typing import Any

from loopctl.definitions.config import Config
from loopctl.journal import history, sessions
from loopctl.journal.events import Event, EventType
from loopctl.journal.fuse import day_spend
from loopctl.journal.inbox import InboxItem, ItemKind, items
from loopctl.journal.outcomes import task_outcome
from loopctl.journal.overnight import ReportShown
from loopctl.journal.schema import (
    ActionFinished,
    read,
    read_note,
    task_finished,
    tick_finished,
)
from loopctl.journal.spending import GroupBy, SpendRow, spend_report
from loopctl.journal.statuses import Outcome, TaskStatus, outcome
from loopctl.text import shorten, strip_controls

REPORT_FORMAT = 1
CAP = 8  # lines per section on one screen; the rest is one "and N more" line
TEXT_WIDTH = 72  # a line's own words, before its command


class Section(StrEnum):
    DONE = "done"
    DELIVERED = "delivered"
    WAITING = "waiting"
    STALLED = "stalled"
    RATE_LIMITED = "rate-limited"
    TROUBLE = "failed"
    STOPPED = "stopped"  # why `up` (or a bounded `run`) stopped: journal.sessions


TITLES = {
    Section.DONE: "Done",
    Section.DELIVERED: "Delivered",
    Section.WAITING: "Waiting for you",
    Section.STALLED: "Stalled",
    Section.RATE_LIMITED: "Rate-limited",
    Section.TROUBLE: "Failed or stopped",
    Section.STOPPED: "Why up stopped",
}

# Where a task's outcome puts it; the outcomes not named here (needs-approval, needs-reply,
# waiting-for-review) are shown by the inbox item that waits, nothing-to-do only as a count.
SECTION_OF: dict[Outcome, Section] = {
    Outcome.DONE: Section.DONE,
    Outcome.STALLED: Section.STALLED,
    Outcome.RATE_LIMITED: Section.RATE_LIMITED,
    Outcome.FAILED: Section.TROUBLE,
    Outcome.REPEATED_FAILURE: Section.TROUBLE,
    Outcome.BUDGET_STOP: Section.TROUBLE,
    Outcome.TAMPERED: Section.TROUBLE,
    Outcome.CRASHED_RECOVERED: Section.TROUBLE,
    Outcome.REJECTED: Section.TROUBLE,
    Outcome.INTERRUPTED: Section.TROUBLE,
}
# The delivery steps that hand work over to someone (a commit or a review hands over nothing).
HANDED_OVER = frozenset({"push", "pr", "merge"})
_IN_TASK_BOOK = frozenset({"commit", "review"})


@dataclass(frozen=True, slots=True)
class Line:
    """One thing that happened or waits, and how to act on it."""

    text: str  # one line, agent text cleaned of control characters
    commands: tuple[str, ...]  # what acts on it, the first the one to run first
    link: str | None = None  # the dashboard's page for it (/inbox/ID, /runs/RUN) or a PR's URL
    when: str = ""
    loop: str | None = None
    task: str | None = None
    run: str | None = None
    item: str | None = None
    outcome: str | None = None  # an Outcome's value, for task and run lines
    url: str | None = None  # a pull request's (or a push's) URL

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "commands": list(self.commands),
            "link": self.link,
            "when": self.when,
            "loop": self.loop,
            "task": self.task,
            "run": self.run,
            "item": self.item,
            "outcome": self.outcome,
            "url": self.url,
        }


@dataclass(frozen=True, slots=True)
class Spent:
    """What the window's agent calls cost, per loop and in all, beside the daily fuse."""

    loops: tuple[SpendRow, ...]
    total: SpendRow
    today_tokens: int = 0
    today_usd: float = 0.0
    cap_tokens: int | None = None  # [budget] max_tokens_per_day
    cap_usd: float | None = None  # [budget] max_usd_per_day

    def to_json(self) -> dict[str, Any]:
        return {
            "loops": [row.to_json() for row in self.loops],
            "total": self.total.to_json(),
            "today": {"tokens": self.today_tokens, "usd": round(self.today_usd, 6)},
            "fuse": {"max_tokens_per_day": self.cap_tokens, "max_usd_per_day": self.cap_usd},
        }

    def line(self) -> str:
        total = self.total
        if not total.calls:
            spent = "nothing"
        else:
            spent = _money(total)
            if len(self.loops) > 1:
                spent += " (" + ", ".join(f"{r.key} {_money(r, short=True)}" for r in self.loops)
                spent += ")"
        fuse = []
        if self.cap_usd is not None:
            fuse.append(f"${self.today_usd:.2f} of ${self.cap_usd:.2f}")
        if self.cap_tokens is not None:
            fuse.append(f"{self.today_tokens:,} of {self.cap_tokens:,} tokens")
        if fuse:
            return f"{spent}; today {' and '.join(fuse)} of the daily fuse"
        return spent


@dataclass(frozen=True, slots=True)
class Report:
    """The report of a window: sections in reading order, the empty ones left out."""

    since: datetime | None  # None: since the log began
    until: datetime
    window: str  # the window in words: "since your last report (…)", "the last 24h"
    sections: tuple[tuple[Section, tuple[Line, ...]], ...]
    spent: Spent
    quiet: int = 0  # tasks and runs in the window that found nothing to do
    held: int = 0  # tasks and runs that waited for review capacity ([review] max_open)
    stops: tuple[sessions.Ended, ...] = ()  # the scheduler sessions that ended in the window

    @property
    def empty(self) -> bool:
        """Nothing happened and nothing waits: the night in one line."""
        return not self.sections and not self.spent.total.calls and not self.held

    def section(self, which: Section) -> tuple[Line, ...]:
        return next((lines for name, lines in self.sections if name is which), ())

    def to_json(self) -> dict[str, Any]:
        return {
            "format": REPORT_FORMAT,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat(),
            "window": self.window,
            "empty": self.empty,
            "sections": {
                name.value: [line.to_json() for line in lines] for name, lines in self.sections
            },
            "spent": self.spent.to_json(),
            "nothing_to_do": self.quiet,
            "waiting_for_review": self.held,
            "stopped": [stop.to_json() for stop in self.stops],
        }

    def more_command(self) -> str:
        """The command that lists every line of this same window, moving nothing."""
        since = self.since.isoformat(timespec="seconds") if self.since else "all"
        return f"loopctl report --since {since} --all --no-mark"

    def text(self, *, cap: int | None = CAP, title: str | None = None) -> str:
        """The report as plain text: one screen with `cap` lines a section (None: every line),
        the rest of a section as one line saying the command that lists it."""
        head = title or f"loopctl report — {self.window}"
        if self.empty:
            return f"{head}\nNothing happened, and nothing waits for you.\n"
        lines = [head]
        if self.quiet:
            lines.append(f"{self.quiet} tick(s) found nothing to do.")
        if self.held:
            lines.append(
                f"{self.held} tick(s) waited for review ([review] max_open)  → loopctl inbox"
            )
        for name, found in self.sections:
            lines.append(f"{TITLES[name]} ({len(found)}):")
            shown = found if cap is None else found[:cap]
            lines += [f"- {line.text}  → {' · '.join(line.commands)}" for line in shown]
            if len(found) > len(shown):
                also = "loopctl inbox" if name is Section.WAITING else self.more_command()
                lines.append(f"- …and {len(found) - len(shown)} more: {also}")
        if not self.section(Section.WAITING):
            lines.append("Nothing waits for you.")
        lines.append(f"Spent: {self.spent.line()}  → loopctl spend --by loop")
        return "\n".join(lines) + "\n"


@dataclass(slots=True)
class _Task:
    event: Event
    outcome: Outcome
    reason: str
    commit: str | None


@dataclass(slots=True)
class _Fold:
    """What one pass over the log collects."""

    finished: dict[tuple[str | None, str | None], _Task] = field(default_factory=dict)
    runs: list[tuple[Event, Outcome, str]] = field(default_factory=list)
    delivered: list[tuple[Event, ActionFinished]] = field(default_factory=list)


def build_report(
    events: Sequence[Event],
    *,
    since: datetime | None,
    now: datetime,
    tz: tzinfo,
    config: Config | None = None,
    window: str = "",
) -> Report:
    """The report of what `events` recorded from `since` to `now` (days for the fuse in `tz`)."""
    runs = history.fold(events)
    every = items(events)
    fold = _fold(events, since, now)
    item_of = _items_by_task(every)
    sections: list[tuple[Section, tuple[Line, ...]]] = []
    by_section: dict[Section, list[Line]] = {name: [] for name in Section}
    counted: Counter[Outcome] = Counter()
    lined: set[tuple[str, Section]] = set()
    for task in fold.finished.values():
        section = SECTION_OF.get(task.outcome)
        if section is None:
            counted[task.outcome] += 1
            continue
        view = runs.get(task.event.run or "")
        found = view.tasks.get(task.event.task or "") if view is not None else None
        by_section[section].append(_task_line(task, found, item_of))
        lined.add((task.event.run or "", section))
    for event, ended, reason in fold.runs:
        section = SECTION_OF.get(ended)
        if section is None or section is Section.DONE:
            if section is None and not runs_tasks(runs, event):
                counted[ended] += 1  # a run with tasks is counted by its tasks
            continue
        if (event.run or "", section) in lined:
            continue  # its task's line says it already
        by_section[section].append(_run_line(event, ended, reason, item_of))
    for event, reason in sessions.left_interrupted(events, runs, since, now):
        if (event.run or "", Section.TROUBLE) not in lined:  # checkpointed, not yet resumed
            by_section[Section.TROUBLE].append(
                _run_line(event, Outcome.INTERRUPTED, reason, item_of)
            )
    stops = sessions.ended(events, since, now)
    by_section[Section.STOPPED] = [_stop_line(stop, tz) for stop in stops]
    by_section[Section.DELIVERED] = [_delivered_line(e, a) for e, a in fold.delivered]
    by_section[Section.WAITING] = [_waiting_line(item) for item in every if item.is_open]
    for name in Section:
        if by_section[name]:
            sections.append((name, tuple(by_section[name])))
    report = spend_report(events, by=GroupBy.LOOP, since=since, now=now, tz=tz)
    today = day_spend(events, now, tz)
    spent = Spent(
        loops=report.rows,
        total=report.total,
        today_tokens=today.tokens,
        today_usd=today.usd,
        cap_tokens=config.max_tokens_per_day if config else None,
        cap_usd=config.max_usd_per_day if config else None,
    )
    return Report(
        since,
        now,
        window,
        tuple(sections),
        spent,
        quiet=counted[Outcome.NOTHING_TO_DO],
        held=counted[Outcome.WAITING_FOR_REVIEW],
        stops=tuple(stops),
    )


def runs_tasks(runs: dict[str, history.RunView], event: Event) -> bool:
    view = runs.get(event.run or "")
    return view is not None and bool(view.tasks)


def last_shown(events: Iterable[Event]) -> datetime | None:
    """When the last report was shown (the end of its window), from `report_shown` notes."""
    found = None
    for event in events:
        note = read_note(ReportShown, event)
        if note is not None and note.until:
            try:
                found = datetime.fromisoformat(note.until)
            except ValueError:
                continue  # a hand-edited note: the one before it stands
    return found


def _fold(events: Iterable[Event], since: datetime | None, now: datetime) -> _Fold:
    fold = _Fold()
    stopped: set[tuple[str | None, str | None]] = set()
    attempts: dict[tuple[str | None, str | None], int] = {}
    for event in events:
        key = (event.run, event.task)
        if event.type == EventType.BUDGET_STOPPED:
            stopped.add(key)
        elif event.type == EventType.ATTEMPT_STARTED:
            attempts[key] = attempts.get(key, 0) + 1
        if not _within(event, since, now):
            continue
        if event.type == EventType.TASK_FINISHED:
            ended = task_finished(event)
            status = ended.status or TaskStatus.DONE
            named = task_outcome(
                ended.outcome,
                status,
                ended.reason,
                attempts=ended.attempts if ended.attempts is not None else attempts.get(key, 0),
                budget_stopped=key in stopped,
            )
            # A task ends again in the same run when its approval delivers it: the last word.
            fold.finished.pop(key, None)
            fold.finished[key] = _Task(event, named, ended.reason, ended.commit)
        elif event.type == EventType.TICK_FINISHED:
            tick = tick_finished(event)
            named_run = outcome(tick.outcome)
            if named_run is not None:  # an older log's run says it through its tasks
                fold.runs.append((event, named_run, tick.reason))
        elif event.type == EventType.ACTION_FINISHED:
            action = read(ActionFinished, event)
            if action.ok and (action.action or "") not in _IN_TASK_BOOK:
                fold.delivered.append((event, action))
    return fold


def _within(event: Event, since: datetime | None, now: datetime) -> bool:
    try:
        when = event.time
    except ValueError:
        return False
    return (since is None or when >= since) and when <= now


def _items_by_task(every: Iterable[InboxItem]) -> dict[tuple[str, str], InboxItem]:
    """The latest inbox item of each (run, task), and of each run as (run, "")."""
    found: dict[tuple[str, str], InboxItem] = {}
    for item in every:
        if item.run:
            found[(item.run, item.task or "")] = item
            found.setdefault((item.run, ""), item)
    return found


def _clean(text: str, width: int = TEXT_WIDTH) -> str:
    return shorten(" ".join(strip_controls(text).split()), width)


def _where(loop: str | None, task: str | None) -> str:
    return "/".join(p for p in (loop, task) if p) or "-"


def _task_line(
    task: _Task,
    found: history.TaskView | None,
    item_of: dict[tuple[str, str], InboxItem],
) -> Line:
    event = task.event
    run = event.run or ""
    title = (found.title or found.task) if found is not None else (event.task or "")
    commit = task.commit or (found.commit if found is not None else None)
    branch = found.branch if found is not None else None
    item = item_of.get((run, event.task or ""))
    if task.outcome is Outcome.DONE:
        words = f"{event.loop or '-'}: {_clean(title, 50)}"
        if commit:
            words += f" — commit {commit[:12]}" + (f" on {branch}" if branch else "")
        commands: tuple[str, ...] = (f"git show --stat {commit[:12]}",) if commit else ()
        commands += (f"loopctl replay {run}",)
        return Line(
            words,
            commands,
            link=f"/runs/{run}",
            when=event.ts,
            loop=event.loop,
            task=event.task,
            run=run,
            outcome=task.outcome.value,
        )
    words = f"{task.outcome.value}: {_where(event.loop, title)}"
    if task.reason:
        words += f" — {_clean(task.reason, 60)}"
    return _acting_line(words, event, task.outcome, item)


def _run_line(
    event: Event, ended: Outcome, reason: str, item_of: dict[tuple[str, str], InboxItem]
) -> Line:
    words = f"{ended.value}: {event.loop or '-'} run {event.run}"
    if reason:
        words += f" — {_clean(reason, 60)}"
    return _acting_line(words, event, ended, item_of.get((event.run or "", "")))


def _acting_line(words: str, event: Event, ended: Outcome, item: InboxItem | None) -> Line:
    run = event.run or ""
    if item is not None and item.is_open:
        commands: tuple[str, ...] = (f"loopctl inbox show {item.id}", *_verbs(item))
        link = f"/inbox/{item.id}"
    else:
        commands, link = (f"loopctl replay {run}",), f"/runs/{run}"
    return Line(
        words,
        commands,
        link=link,
        when=event.ts,
        loop=event.loop,
        task=event.task,
        run=run,
        item=item.id if item is not None and item.is_open else None,
        outcome=ended.value,
    )


def _delivered_line(event: Event, action: ActionFinished) -> Line:
    name = action.action or "action"
    url = action.url if action.url and action.url.startswith(("https://", "http://")) else None
    words = f"{_where(event.loop, event.task)}: {name}"
    if url:
        words += f" {url}"
    elif action.detail:
        words += f" — {_clean(action.detail, 60)}"
    run = event.run or ""
    if url:
        commands: tuple[str, ...] = (url,)
    elif action.commit:
        commands = (f"git log --oneline -1 {action.commit[:12]}",)
    else:
        commands = (f"loopctl replay {run}",)
    return Line(
        words,
        commands,
        link=url or f"/runs/{run}",
        when=event.ts,
        loop=event.loop,
        task=event.task,
        run=run,
        url=url,
    )


def _stop_line(stop: sessions.Ended, tz: tzinfo) -> Line:
    """Why a scheduler stopped; its command starts it again (and resumes what it checkpointed)."""
    return Line(stop.words(tz), (stop.command(),), when=stop.event.ts)


def _verbs(item: InboxItem) -> tuple[str, ...]:
    if item.kind == ItemKind.APPROVAL:
        return (f"loopctl inbox approve {item.id}", f"loopctl inbox reject {item.id}")
    if item.kind == ItemKind.ESCALATION:
        return (f'loopctl inbox reply {item.id} "ANSWER"',)
    if item.kind == ItemKind.FAILED:
        return (f"loopctl inbox retry {item.id}", f"loopctl inbox dismiss {item.id}")
    return (f"loopctl inbox dismiss {item.id}",)


def _waiting_line(item: InboxItem) -> Line:
    words = f"{item.id} {item.kind} {_where(item.loop, item.task)}: {_clean(item.summary, 60)}"
    return Line(
        words,
        (f"loopctl inbox show {item.id}", *_verbs(item)),
        link=f"/inbox/{item.id}",
        when=item.opened,
        loop=item.loop,
        task=item.task,
        run=item.run,
        item=item.id,
    )


def _money(row: SpendRow, *, short: bool = False) -> str:
    usd = f"${row.usd:.2f}"
    if short:
        return usd if row.usd or not row.tokens else f"{row.tokens:,} tokens"
    text = f"{usd}, {row.tokens:,} tokens in {row.calls} call(s)"
    if row.unpriced:
        text += f" ({row.unpriced} unpriced)"
    return text

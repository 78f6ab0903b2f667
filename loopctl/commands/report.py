"""`loopctl report`: the morning report of a window, and "since you last looked".

The report itself is a fold of the log (loopctl.journal.report). This module resolves the
window (`--since last|all|<duration>|<ISO time>`), remembers when a report was shown — a
`report_shown` note in the log, as the daily digest's `digest_sent` remembers its slots, so it
follows the log through `state push/pull` — and sends the report through `[notify]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from loopctl.definitions import Project
from loopctl.definitions.fields import format_duration, parse_duration
from loopctl.errors import UsageError
from loopctl.journal import notify
from loopctl.journal.events import Event, EventLog
from loopctl.journal.overnight import ReportShown
from loopctl.journal.recorder import Recorder
from loopctl.journal.report import Report, build_report, last_shown
from loopctl.journal.schema import NotifyFailed
from loopctl.scheduling.timing import zone

# `--since last` before any report was shown: the night before.
FIRST_WINDOW = timedelta(hours=24)
SINCE_FORMS = (
    "last, all, a duration like 24h or 90m, a time of day like 07:30, or a time like"
    " 2026-12-05T07:30"
)
CLOCK = re.compile(r"([01]?\d|2[0-3]):[0-5]\d")


@dataclass(frozen=True, slots=True)
class Window:
    since: datetime | None  # None: since the log began
    words: str  # the window in words, for the report's first line


def parse_since(text: str, now: datetime, last: datetime | None, tz: tzinfo) -> Window:
    """`--since`: last (the last report shown), all, a duration back from `now`, a time of day
    (its latest passing), or a time (ISO 8601; without an offset it is local time). A
    UsageError (exit 2) says the forms."""
    value = text.strip()
    if value.lower() == "last":
        if last is None:
            since = now - FIRST_WINDOW
            return Window(since, f"the last 24 hours (no report shown before) until {_at(now, tz)}")
        return Window(last, f"since your last report ({_at(last, tz)}) until {_at(now, tz)}")
    if value.lower() == "all":
        return Window(None, f"since the log began, until {_at(now, tz)}")
    try:
        seconds = parse_duration(value)
    except ValueError:
        seconds = None
    if seconds is not None:
        if seconds <= 0:
            raise UsageError(f"--since: {text!r} is no time at all; use {SINCE_FORMS}")
        try:
            since = now - timedelta(seconds=seconds)
        except OverflowError:
            return Window(None, f"since the log began, until {_at(now, tz)}")
        return Window(since, f"the last {format_duration(seconds)} until {_at(now, tz)}")
    if CLOCK.fullmatch(value):
        # A time of day: its latest passing, today or else yesterday (as the digest's slot).
        when = notify.digest_slot(now, value, tz)
        return Window(when, f"since {_at(when, tz)} until {_at(now, tz)}")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"--since: expected {SINCE_FORMS}; not {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=tz)
    if when > now:
        raise UsageError(f"--since: {text!r} is in the future; use {SINCE_FORMS}")
    return Window(when, f"since {_at(when, tz)} until {_at(now, tz)}")


def _at(when: datetime, tz: tzinfo) -> str:
    return when.astimezone(tz).strftime("%Y-%m-%d %H:%M")


def build(
    project: Project,
    since: str = "last",
    *,
    now: datetime | None = None,
    tz: tzinfo | None = None,
    events: list[Event] | None = None,
) -> Report:
    """The report of `project`'s log over the `--since` window (nothing is recorded)."""
    moment = now or datetime.now(UTC)
    zone_ = tz or zone(None)
    seen = events if events is not None else EventLog(project.paths.events_file).read()
    window = parse_since(since, moment, last_shown(seen), zone_)
    return build_report(
        seen, since=window.since, now=moment, tz=zone_, config=project.config, window=window.words
    )


def mark_shown(project: Project, report: Report, via: str) -> None:
    """Remember that `report` was shown: the next `--since last` starts where it ended.

    Not in a repository loopctl never ran in: a report there must not create `.loop/`."""
    if not project.paths.events_file.exists():
        return
    shown = ReportShown(
        until=report.until.isoformat(),
        since=report.since.isoformat() if report.since else None,
        via=via,
    )
    Recorder(project).record(shown, run=None, loop=None)


@dataclass(frozen=True, slots=True)
class Notified:
    """How each `[notify]` channel took the report."""

    sent: tuple[notify.Sent, ...]

    @property
    def ok(self) -> bool:
        return bool(self.sent) and all(s.ok for s in self.sent)


def send(project: Project, report: Report) -> Notified:
    """Send the report's text (and its JSON) through every `[notify]` channel; a channel that
    fails is recorded as `notify_failed` and said in the result, never raised."""
    config = project.config
    if not notify.configured(config.notify):
        raise UsageError(
            "--notify: no [notify] channel in .loop/config.toml (set webhook, webhook_env or"
            " command; see docs/inbox.md)"
        )
    text = report.text()
    results = notify.send(
        config.notify,
        project.paths.root,
        config.env_allow,
        text,
        {"version": 1, "report": report.to_json()},
        {"summary": text.splitlines()[0]},
    )
    rec = Recorder(project)
    for result in results:
        if not result.ok:
            failed = NotifyFailed(
                channel=result.channel, attempts=result.attempts, error=result.error
            )
            rec.record(failed, run=None, loop=None)
    return Notified(tuple(results))

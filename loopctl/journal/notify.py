"""Telling a human the inbox needs them: a webhook, a command, and one digest a day.

A notification is a courtesy, never a step of the work: a webhook that fails is retried with
backoff and then recorded as `notify_failed`; it never stops a loop. The webhook URL (which
often carries a token in its path) is never written to the log or to any message.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopctl import process
from loopctl.definitions.config import Config, Notify, load_config
from loopctl.definitions.source import Problems
from loopctl.errors import LoopctlError
from loopctl.journal import history
from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import InboxItem, items
from loopctl.journal.report import build_report
from loopctl.journal.schema import (
    DigestSent,
    InboxOpened,
    NotifyFailed,
    RunInterrupted,
    inbox_closed,
    read,
)
from loopctl.secrets import Redactor, build_env, withheld_values
from loopctl.text import strip_controls

if TYPE_CHECKING:
    from loopctl.journal.recorder import Recorder

BACKOFF = (0.25, 0.5, 1.0)  # seconds before the 2nd, 3rd and 4th try
WEBHOOK_TIMEOUT = 5.0  # a hanging receiver may delay a loop by at most ~4 x this
COMMAND_TIMEOUT = 30.0
DIGEST_WINDOW = timedelta(hours=24)
# How late a day's digest may still go out (an `up` restarted, a laptop woken after its time).
# Past this the day's digest is not sent: sent the next morning, before that day's own time,
# it would read as an early digest, and a second one would follow at the set time.
DIGEST_GRACE = timedelta(hours=1)
PLACEHOLDERS = ("id", "kind", "loop", "task", "summary", "text", "outcome")


class NotifyError(LoopctlError):
    """A notification could not be delivered (the message never holds the webhook URL)."""


@dataclass(frozen=True, slots=True)
class Sent:
    channel: str  # webhook | command
    ok: bool
    attempts: int = 1
    error: str = ""


# --- sending -------------------------------------------------------------------------------------


def webhook_url(config: Notify, environ: dict[str, str] | None = None) -> str | None:
    """The webhook URL: from the file, or from the variable `webhook_env` names."""

    if config.webhook:
        return config.webhook
    if config.webhook_env:
        value = (os.environ if environ is None else environ).get(config.webhook_env, "").strip()
        return value or None
    return None


def send_webhook(
    url: str,
    payload: dict[str, Any],
    *,
    backoff: Sequence[float] = BACKOFF,
    timeout: float = WEBHOOK_TIMEOUT,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """POST `payload` as JSON; retry on errors and 5xx/408/429; return the attempts it took."""
    # lazy: httpx is slow to import and only a network call needs it (bench/startup.py)
    import httpx

    last = ""
    tries = 0
    for delay in (0.0, *backoff):
        if delay:
            sleep(delay)
        tries += 1
        try:
            response = httpx.post(url, json=payload, timeout=timeout, follow_redirects=False)
        except httpx.HTTPError as exc:
            # The exception text can quote the URL; its class says enough.
            last = f"{type(exc).__name__} (no response)"
            continue
        status = response.status_code
        if 200 <= status < 300:
            return tries
        last = f"HTTP {status}"
        if 400 <= status < 500 and status not in (408, 429):
            break  # the receiver refuses this request; trying again will not help
    raise NotifyError(f"webhook failed after {tries} attempt(s): {last}")


def run_command(
    argv: Sequence[str],
    values: dict[str, str],
    payload: dict[str, Any],
    root: Path,
    allow: Iterable[str],
) -> None:
    """Run the notify command: placeholders filled as plain arguments, the JSON on stdin."""

    filled = []
    for arg in argv:
        for key in PLACEHOLDERS:
            arg = arg.replace("{" + key + "}", values.get(key, ""))
        filled.append(arg)
    try:
        done = process.run(
            filled,
            cwd=root,
            env=build_env(allow=allow),
            timeout=COMMAND_TIMEOUT,
            stdin=json.dumps(payload, ensure_ascii=False),
            redactor=Redactor(withheld_values(allow=())),
            tail_bytes=2000,
        )
    except LoopctlError as exc:
        raise NotifyError(f"notify command cannot run: {exc}") from None
    if not done.ok:
        why = "timed out" if done.timed_out else f"exited {done.exit_code}"
        # What it said on stderr is what tells a person why (a bad token, a wrong channel).
        said = " ".join(strip_controls(done.stderr_tail).split())[-500:]
        raise NotifyError(f"notify command `{filled[0]}` {why}" + (f": {said}" if said else ""))


def send(
    config: Notify,
    root: Path,
    allow: Iterable[str],
    text: str,
    payload: dict[str, Any],
    values: dict[str, str],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Sent]:
    """Send one notification on every configured channel; failures are results."""
    sent: list[Sent] = []
    url = webhook_url(config)
    if config.webhook_env and url is None:
        sent.append(Sent("webhook", False, 0, f"${config.webhook_env} is not set"))
    if url is not None:
        try:
            tries = send_webhook(url, {"text": text, **payload}, sleep=sleep)
            sent.append(Sent("webhook", True, tries))
        except NotifyError as exc:
            sent.append(Sent("webhook", False, len(BACKOFF) + 1, str(exc)))
    if config.command:
        try:
            run_command(config.command, {**values, "text": text}, payload, root, allow)
            sent.append(Sent("command", True))
        except NotifyError as exc:
            sent.append(Sent("command", False, 1, str(exc)))
    return sent


def configured(config: Notify) -> bool:
    return bool(config.webhook or config.webhook_env or config.command)


def item_text(item: InboxItem) -> str:
    """One line for a person: what needs them and how to act."""
    where = "/".join(p for p in (item.loop, item.task) if p)
    verbs = {
        "approval": "approve or reject",
        "escalation": "reply",
        "failed": "retry or dismiss",
        "unhandled": "look at it",
        "proposal": "approve or reject",
    }
    verb = verbs.get(item.kind, "look at it")
    ended = f" ({item.outcome})" if item.outcome is not None else ""
    return (
        f"loopctl inbox: {item.kind} {item.id} in {where or 'this repository'}{ended}:"
        f" {item.summary} — `loopctl inbox show {item.id}`, then {verb}"
    )


def item_opened(config: Notify, root: Path, allow: Iterable[str], event: Event) -> list[Sent]:
    """Notify about the inbox item `event` opened (when `config` asks for its kind).

    Sending only: the caller (`Recorder.open_item`) records how each channel took it.
    """
    kind = read(InboxOpened, event).kind or ""
    if not configured(config) or kind not in config.on:
        return []
    found = items([event])
    if not found:
        return []
    item = found[0]
    values = {
        "id": item.id,
        "kind": item.kind,
        "loop": item.loop or "",
        "task": item.task or "",
        "summary": item.summary,
        "outcome": item.outcome or "",
    }
    return send(
        config, root, allow, item_text(item), {"version": 1, "item": item.to_json()}, values
    )


# --- the digest ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoopDigest:
    loop: str
    runs: dict[str, int] = field(default_factory=dict)
    tasks: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    cost_usd: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "loop": self.loop,
            "runs": self.runs,
            "tasks": self.tasks,
            "spend": {"tokens": self.tokens, "usd": round(self.cost_usd, 6)},
        }


@dataclass(frozen=True, slots=True)
class Digest:
    """What all loops did in a window, and what waits for a human now."""

    since: datetime
    until: datetime
    loops: tuple[LoopDigest, ...]
    waiting: tuple[InboxItem, ...]
    opened: int
    closed: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "loops": [loop.to_json() for loop in self.loops],
            "waiting": [item.to_json() for item in self.waiting],
            "opened": self.opened,
            "closed": self.closed,
        }

    def text(self) -> str:
        """The digest as plain text (also the webhook's Slack-compatible `text`)."""
        day = self.until.strftime("%Y-%m-%d %H:%M")
        lines = [f"loopctl digest — {day}, the last {_hours(self.until - self.since)}"]
        if not self.loops:
            lines.append("No loop ran.")
        for loop in self.loops:
            runs = ", ".join(f"{n} {s}" for s, n in sorted(loop.runs.items())) or "no runs"
            tasks = ", ".join(f"{n} {s}" for s, n in sorted(loop.tasks.items())) or "no tasks"
            spend = f"{loop.tokens} tokens" + (f", ${loop.cost_usd:.2f}" if loop.cost_usd else "")
            lines.append(f"- {loop.loop}: runs {runs}; tasks {tasks}; {spend}")
        closed = ", ".join(f"{n} {r}" for r, n in sorted(self.closed.items()))
        lines.append(
            f"Inbox: {self.opened} opened" + (f", closed: {closed}" if closed else "") + "."
        )
        if self.waiting:
            lines.append(f"Waiting for you ({len(self.waiting)}):")
            for item in self.waiting[:50]:
                where = "/".join(p for p in (item.loop, item.task) if p)
                summary = " ".join(item.summary.split())[:100]
                lines.append(f"- {item.id} {item.kind} {where}: {summary}")
            if len(self.waiting) > 50:
                lines.append(f"- …and {len(self.waiting) - 50} more: `loopctl inbox`")
        else:
            lines.append("Nothing waits for you.")
        return "\n".join(lines) + "\n"


def _hours(span: timedelta) -> str:
    hours = round(span.total_seconds() / 3600)
    return f"{hours} hours" if hours != 1 else "hour"


def build_digest(
    events: Sequence[Event], now: datetime, window: timedelta = DIGEST_WINDOW
) -> Digest:
    """Summarise `events` of the `window` before `now`; `waiting` is the open inbox at `now`."""

    since = now - window
    runs = history.fold(events)
    per_loop: dict[str, dict[str, Any]] = {}
    for run in runs.values():
        if datetime.fromisoformat(run.started) < since:
            continue
        entry = per_loop.setdefault(
            run.loop, {"runs": Counter(), "tasks": Counter(), "tokens": 0, "usd": 0.0}
        )
        entry["runs"][run.status] += 1
        for task in run.tasks.values():
            entry["tasks"][task.status] += 1
        entry["tokens"] += run.tokens
        entry["usd"] += run.cost_usd
    opened = 0
    closed: Counter[str] = Counter()
    for event in events:
        if event.type not in (EventType.INBOX_OPENED, EventType.INBOX_CLOSED):
            continue
        if datetime.fromisoformat(event.ts) < since:
            continue
        if event.type == EventType.INBOX_OPENED:
            opened += 1
        else:
            closed[inbox_closed(event).resolution] += 1
    loops = tuple(
        LoopDigest(name, dict(e["runs"]), dict(e["tasks"]), e["tokens"], e["usd"])
        for name, e in sorted(per_loop.items())
    )
    waiting = tuple(item for item in items(events) if item.is_open)
    return Digest(since, now, loops, waiting, opened, dict(closed))


def digest_slot(now: datetime, at: str, tz: tzinfo | None = None) -> datetime:
    """The most recent daily `at` ("HH:MM" in `tz`, default local time) at or before `now`."""
    local = now.astimezone(tz)
    hour, minute = (int(part) for part in at.split(":"))
    slot = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if slot > local:
        slot -= timedelta(days=1)
    return slot


def send_digest_if_due(
    rec: Recorder,
    now: datetime,
    *,
    tz: tzinfo | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Send today's digest if `[notify] digest` is set and its time has come; True if sent.

    For the `up` daemon to call now and then: at most one digest per daily slot, decided from
    the `digest_sent` events in the log (so a restart never sends it twice), and only within
    DIGEST_GRACE of its time, never early.
    """

    paths = rec.paths
    problems = Problems()
    # Read afresh: `up` runs for days, and the digest settings may have changed meanwhile.
    config = load_config(paths.config, problems)
    notify = config.notify
    if problems.errors or not notify.digest or not configured(notify):
        return False
    slot_time = digest_slot(now, notify.digest, tz)
    if now - slot_time > DIGEST_GRACE:
        return False  # the time passed while nothing ran; the next one goes out at its time
    slot = slot_time.astimezone(UTC).isoformat()
    events = rec.log.read()
    if any(e.type == EventType.DIGEST_SENT and read(DigestSent, e).slot == slot for e in events):
        return False
    digest = build_digest(events, now)
    # The text is the morning report of the day (`loopctl report`), each line with its command.
    report = build_report(
        events,
        since=now - DIGEST_WINDOW,
        now=now,
        tz=tz or now.astimezone().tzinfo or UTC,
        config=config,
        window=f"the last {_hours(DIGEST_WINDOW)}",
    )
    text = report.text(title=digest.text().splitlines()[0])
    results = send(
        notify,
        paths.root,
        config.env_allow,
        text,
        {"version": 1, "digest": digest.to_json(), "report": report.to_json()},
        {"summary": text.splitlines()[0]},
        sleep=sleep,
    )
    for result in results:
        if not result.ok:
            failed = NotifyFailed(
                channel=result.channel, attempts=result.attempts, error=result.error, digest=slot
            )
            rec.record(failed, run=None, loop=None)
    # Recorded even when a channel failed: a broken webhook must not be retried every minute.
    sent = DigestSent(
        slot=slot, channels={r.channel: r.ok for r in results}, waiting=len(digest.waiting)
    )
    rec.record(sent, run=None, loop=None)
    return True


def send_report_on_stop(
    rec: Recorder, started: datetime, now: datetime, stop: MandateStop | None = None
) -> bool:
    """When `up` stops, send the report of its session (`[notify] report_on_stop`): what it did,
    delivered, left waiting and spent from `started` to `now`; True if sent on any channel.
    When its mandate stopped it (`stop`), the report is the one message that says why.

    It moves no `loopctl report --since last`: that is for what a person has read."""
    problems = Problems()
    config = load_config(rec.paths.config, problems)
    notify = config.notify
    if problems.errors or not configured(notify):
        return False
    if not notify.report_on_stop:
        return send_mandate_stop(rec, config, stop) if stop is not None else False
    tz = now.astimezone().tzinfo or UTC
    report = build_report(
        rec.log.read(),
        since=started,
        now=now,
        tz=tz,
        config=config,
        window=f"since {started.astimezone(tz):%Y-%m-%d %H:%M} until {now.astimezone(tz):%H:%M}",
    )
    title = f"loopctl up stopped — its session, {report.window}"
    payload: dict[str, Any] = {"version": 1, "report": report.to_json()}
    if stop is not None:
        title = f"{stop.headline()} — its session, {report.window}"
        payload["stopped"] = stop.to_json()
    text = report.text(title=title)
    results = send(
        notify, rec.paths.root, config.env_allow, text, payload, {"summary": text.splitlines()[0]}
    )
    _record_failures(rec, results)
    return any(result.ok for result in results)


def _record_failures(rec: Recorder, results: Iterable[Sent]) -> None:
    for result in results:
        if not result.ok:
            failed = NotifyFailed(
                channel=result.channel, attempts=result.attempts, error=result.error
            )
            rec.record(failed, run=None, loop=None)


# --- the mandate's stop ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MandateStop:
    """Why a mandate (`--until`, `--max-usd`) ended a scheduler, and the ticks it checkpointed:
    what its one notification says."""

    by: str  # "up", or "run NAME"
    reason: str  # "the mandate's deadline (07:30)"
    bound: str  # deadline | spend-cap (loopctl.scheduling.mandate)
    at: datetime
    checkpointed: tuple[tuple[str, str], ...] = ()  # (loop, run) of each tick it interrupted

    def headline(self) -> str:
        count = len(self.checkpointed)
        turns = f"{count} turn{'s' if count != 1 else ''} checkpointed"
        at = self.at.astimezone()
        return f"loopctl {self.by} stopped at {at:%H:%M:%S}: {self.reason}; {turns}"

    def text(self) -> str:
        lines = [self.headline()]
        again = "loopctl up" if self.by == "up" else f"loopctl {self.by}"
        lines += [f"- {loop} run {run}  → loopctl replay {run}" for loop, run in self.checkpointed]
        if self.checkpointed:
            lines.append(f"They resume where they stopped on the next `{again}`.")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "reason": self.reason,
            "bound": self.bound,
            "at": self.at.isoformat(),
            "checkpointed": [{"loop": loop, "run": run} for loop, run in self.checkpointed],
        }


def interrupted_after(
    events: Iterable[Event], after_seq: int, reason: str
) -> list[tuple[str, str]]:
    """(loop, run) of each run recorded as interrupted after `after_seq` for `reason`."""
    found = []
    for event in events:
        if event.seq > after_seq and event.type == EventType.RUN_INTERRUPTED:
            why = read(RunInterrupted, event).reason
            if why.endswith(reason) and event.run:
                found.append((event.loop or "-", event.run))
    return found


def send_mandate_stop(rec: Recorder, config: Config, stop: MandateStop) -> bool:
    """Tell `[notify]` once that the mandate ended the scheduler (every kind: it is no item)."""
    text = stop.text()
    results = send(
        config.notify,
        rec.paths.root,
        config.env_allow,
        text,
        {"version": 1, "stopped": stop.to_json()},
        {"summary": text.splitlines()[0], "kind": "stopped"},
    )
    _record_failures(rec, results)
    return any(result.ok for result in results)

"""The mandate of one `loopctl up`: a deadline (`--until`) and a spend cap (`--max-usd`).

At the deadline, or once the agent calls recorded since the session began cost `max_usd`, the
scheduler starts no further tick, interrupts the running ones as `loopctl down` does (each
records `run_interrupted`, naming the mandate, and resumes on the next start) and `up` returns
(exit 0). `[budget] up_until` / `up_max_usd` in .loop/config.toml give the same for every `up`.
The spend is the sum `loopctl spend` makes: the `agent_finished` events' `cost_usd`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from loopctl.definitions.config import Config
from loopctl.definitions.fields import parse_until
from loopctl.errors import UsageError
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.schema import SchedulerStarted, agent_finished

# Which bound of the mandate ended a session (what its notification says, as a word).
DEADLINE = "deadline"
SPEND_CAP = "spend-cap"


@dataclass(frozen=True, slots=True)
class Mandate:
    """When an `up` session ends, and what it may spend; either may be None (no bound)."""

    until: datetime | None = None  # aware
    max_usd: float | None = None

    @property
    def bounded(self) -> bool:
        return self.until is not None or self.max_usd is not None

    def until_text(self, now: datetime | None = None) -> str:
        """The deadline as a person reads it: "07:30" today or tomorrow, else a local date."""
        if self.until is None:
            return ""
        local = self.until.astimezone()
        ahead = local - (now or datetime.now(UTC))
        if not timedelta(hours=-24) < ahead < timedelta(hours=24):
            return local.strftime("%Y-%m-%d %H:%M")
        return local.strftime("%H:%M" if local.second == 0 else "%H:%M:%S")

    def describe(self, spent: float | None = None, now: datetime | None = None) -> str:
        """`up until 07:30, $3.20 of $20` (status) or `until 07:30, at most $20` (at start)."""
        parts: list[str] = []
        if self.until is not None:
            parts.append(f"until {self.until_text(now)}")
        if self.max_usd is not None:
            cap = _usd(self.max_usd)
            if spent is None:
                parts.append(f"at most {cap}")
            else:
                parts.append(f"{_usd(spent, self.max_usd)} of {cap}")
        return ", ".join(parts)


def _usd(value: float, cap: float | None = None) -> str:
    """$20, $3.20: cents, or as many places as the cap has ($0.025), so spend and cap compare."""
    reference = value if cap is None else cap
    places = 2
    while places < 6 and round(reference, places) != round(reference, 6):
        places += 1
    if cap is None and round(value, 6) == int(value):
        return f"${int(value)}"
    return f"${value:.{places}f}"


def resolve(
    config: Config,
    until: str | None,
    max_usd: float | None,
    now: datetime,
    *,
    resolved: str | None = None,
) -> Mandate:
    """The mandate of an `up` starting at `now`: the flags, else `[budget]` in config.toml.

    A bad `--until` is a UsageError (exit 2); a config value was checked when it was read.
    `resolved`: the ISO instant a `--detach` parent resolved (it may just have passed).
    """
    text = until if until is not None else config.up_until
    cap = max_usd if max_usd is not None else config.up_max_usd
    deadline: datetime | None = None
    if resolved is not None:
        deadline = _parse_iso(resolved)
        if deadline is None or deadline.tzinfo is None:
            raise UsageError(f"--resolved-until: not an ISO date-time with an offset: {resolved!r}")
    elif text is not None and text.strip().lower() not in ("none", "never"):
        try:
            deadline = parse_until(text, now)
        except ValueError as exc:
            where = "--until" if until is not None else "[budget] up_until"
            raise UsageError(f"{where}: {exc}") from None
    if cap is not None and not cap > 0:
        raise UsageError(f"--max-usd must be more than 0, not {cap!r}")
    return Mandate(deadline, cap)


def session_spend(events: Sequence[Event], after_seq: int) -> float:
    """USD the agent calls recorded after `after_seq` cost (`loopctl spend`'s sum)."""
    return sum(
        agent_finished(e).cost_usd or 0.0
        for e in events
        if e.seq > after_seq and e.type == EventType.AGENT_FINISHED
    )


class Watch:
    """A running `up`'s mandate against the clock and the log: why the session must end."""

    def __init__(self, mandate: Mandate, log: EventLog, after_seq: int) -> None:
        self.mandate = mandate
        self.log = log
        self.after_seq = after_seq
        self._counted = after_seq  # the spend is summed once per event, not per look
        self.spent = 0.0
        self.ended_at: datetime | None = None  # when it first said the session is over
        self.bound: str | None = None  # which bound ended it: DEADLINE or SPEND_CAP

    @property
    def until(self) -> datetime | None:
        return self.mandate.until

    def ended(self, now: datetime) -> str | None:
        """Why the session is over at `now`, or None while the mandate holds."""
        why = self._ended(now)
        if why is not None and self.ended_at is None:
            self.ended_at = now
        return why

    def _ended(self, now: datetime) -> str | None:
        until, cap = self.mandate.until, self.mandate.max_usd
        if until is not None and now >= until:
            self.bound = DEADLINE
            return f"the mandate's deadline ({self.mandate.until_text(now)})"
        if cap is not None:
            fresh = [e for e in self.log.read() if e.seq > self._counted]
            if fresh:
                self.spent += session_spend(fresh, self._counted)
                self._counted = fresh[-1].seq
            if self.spent >= cap:
                self.bound = SPEND_CAP
                return f"the mandate's spend cap ({_usd(self.spent, cap)} of {_usd(cap)})"
        return None


@dataclass(frozen=True, slots=True)
class Session:
    """A running `up`'s mandate as `status` shows it: its bounds and what it spent so far."""

    mandate: Mandate
    spent_usd: float  # the session's agent calls so far (`loopctl spend`'s sum)

    def describe(self) -> str:
        """The mandate as `status` says it: "up until 07:30, $3.20 of $20" (spend with a cap)."""
        spent = self.spent_usd if self.mandate.max_usd is not None else None
        return f"up {self.mandate.describe(spent)}"

    def to_json(self) -> dict[str, Any]:
        until = self.mandate.until
        cap = self.mandate.max_usd
        return {
            "until": until.astimezone(UTC).isoformat(timespec="seconds") if until else None,
            "max_usd": cap,
            "spent_usd": round(self.spent_usd, 6),
            "left_usd": round(max(0.0, cap - self.spent_usd), 6) if cap is not None else None,
            "text": self.describe(),
        }


def of_session(
    events: Sequence[Event], started: SchedulerStarted, since_seq: int
) -> Session | None:
    """A running `up`'s mandate from its `scheduler_started` (at `since_seq`); None: unbounded."""
    mandate = Mandate(_parse_iso(started.until), started.max_usd)
    if not mandate.bounded:
        return None
    return Session(mandate, session_spend(events, since_seq))


def _parse_iso(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None

"""Whether a turn ended on a rate limit, an exhausted quota or an overload, and until when.

Pure: `detect(result, backend, now, streak)` reads what a turn left (the model API's HTTP status
and `Retry-After`, as loopctl's own agent reports them in `extra`; a CLI's result JSON, its
error events and its printed text) and answers with a `RateLimit` or None. The reset is the one
the backend stated (a `Retry-After`, Claude Code's "resets 3pm (Europe/Berlin)", Codex's "try
again in 2 hours", OpenAI's "Please try again in 1.5s"); when none is stated, an exponential
backoff from BACKOFF_S, doubled for each pause of the same backend since its last good turn
(`streak`), capped at BACKOFF_CAP_S. The engine records it as a `backend_paused` note, and the
scheduler holds the loops on that backend until then (journal.pauses, scheduling.pauses).

The phrases below are the CLIs' own, as they print them (seen against a local model server and
in the CLIs' issue trackers); tests/backends/test_rate_limits.py holds one sample of each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from loopctl.backends.base import AgentResult, AgentStatus

BACKOFF_S = 60.0  # the first pause when the backend stated no reset
BACKOFF_CAP_S = 3600.0  # no unstated pause is longer than this
LONGEST_S = 8 * 24 * 3600.0  # a stated reset further away than this is not believed


class LimitKind(StrEnum):
    RATE_LIMIT = "rate-limit"  # too many requests or tokens for now (HTTP 429)
    QUOTA = "quota"  # a plan's usage or a billing quota is used up until it resets
    OVERLOAD = "overload"  # the provider is overloaded (HTTP 529, 503 "overloaded")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A backend that must not be asked again before `until`."""

    backend: str
    until: datetime  # aware, UTC
    kind: LimitKind
    said: str  # the backend's own words (one line, shortened)
    stated: bool  # `until` is the backend's stated reset, not loopctl's backoff


# --- what each backend says ----------------------------------------------------------------------

_QUOTA = re.compile(
    r"usage limit reached|hit your (?:\w+ )?limit|limit reached\s*[∙·|•-]\s*resets"
    r"|usage_limit_reached|daily_limit_reached"
    r"|(?:5|five)-hour limit|weekly limit|limit will reset|insufficient_quota"
    r"|exceeded your current quota|quota (?:exceeded|exhausted)|out of credits"
    r"|credit balance is too low",
    re.I,
)
# Specific phrases only: a failed turn's output may be a compiler's ("call of overloaded 'f'")
# or a test run's (test_rate_limit_handler), which says nothing about the backend.
_OVERLOAD = re.compile(
    r"overloaded_error|API Error:?\s*529|status(?:Code)?\W+529\b|\b529\b.*overload"
    r"|servers are down or overloaded|Exception - Overloaded|\"message\":\s*\"Overloaded\""
    r"|\b(?:server|service|API|model|provider)s? (?:is |are )?(?:currently |temporarily )?"
    r"overloaded",
    re.I,
)
_RATE = re.compile(
    r"(?<!\w)rate[ _-]limit(?:ed|_error| reached| exceeded)\b|RateLimitError|Too Many Requests"
    r"|API Error:?\s*(?:Request rejected\s*)?\(?429\b|status(?:Code)?\W+429\b|\bHTTP 429\b"
    r"|last status: 429|\b429\b.*(?:rejected|too many)|rate limited you",
    re.I,
)
# A model answer printed after the limit (aider's usage line): the CLI retried past the limit
# itself, so it did not end the turn.
_ANSWERED = re.compile(r"^Tokens: [\d.,]+[kM]? sent", re.M)


def detect(
    result: AgentResult,
    backend: str,
    now: datetime,
    streak: int = 0,
    base_s: float = BACKOFF_S,
) -> RateLimit | None:
    """The limit that ended this turn, or None when it ended for another reason.

    `streak` counts this backend's pauses since its last good turn: each unstated reset waits
    twice as long as the one before, from `base_s` (`[budget] rate_limit_backoff`).
    """
    # Claude Code's result names the failed call's status; loopctl's own agent reports its own.
    status = result.extra.get("api_error_status") or result.extra.get("http_status")
    texts = [str(result.extra.get("error") or ""), result.text, result.output_tail]
    failed = result.status is AgentStatus.ERROR
    kind: LimitKind | None = None
    if failed and status in (429, 529, 503):
        kind = _kind_of(status, " ".join(texts))
    said = ""
    for text in texts:
        if kind is not None and said:
            break
        found = _match(text, failed)
        if found is None:
            continue
        found_kind, line = found
        kind = kind or found_kind
        said = said or line
    if kind is None:
        return None
    said = said or _first_line(" ".join(texts)) or f"HTTP {status}"
    until = _stated_until(result, texts, now)
    stated = until is not None
    if until is None:
        until = now + timedelta(seconds=backoff_s(streak, base_s))
    return RateLimit(backend, until.astimezone(UTC), kind, said[:300], stated)


def backoff_s(streak: int, base_s: float = BACKOFF_S) -> float:
    """The pause when no reset was stated: `base_s`, doubled per earlier pause, capped."""
    return float(min(base_s * 2.0 ** max(0, min(streak, 20)), max(BACKOFF_CAP_S, base_s)))


def _kind_of(status: object, text: str) -> LimitKind:
    if _QUOTA.search(text):
        return LimitKind.QUOTA
    if status in (529, 503) or _OVERLOAD.search(text):
        return LimitKind.OVERLOAD
    return LimitKind.RATE_LIMIT


def _match(text: str, failed: bool) -> tuple[LimitKind, str] | None:
    """The first line of `text` that says a limit ended the turn, and which kind of limit."""
    if not failed:
        return None  # a turn that ended well may talk of rate limits: they were its work
    lines = text.splitlines()
    for pattern, kind in (
        (_QUOTA, LimitKind.QUOTA),
        (_OVERLOAD, LimitKind.OVERLOAD),
        (_RATE, LimitKind.RATE_LIMIT),
    ):
        for index, line in enumerate(lines):
            if not pattern.search(line):
                continue
            if _ANSWERED.search("\n".join(lines[index + 1 :])):
                return None
            return (_kind_of(None, line) if kind is LimitKind.RATE_LIMIT else kind), _clean(line)
    return None


def _clean(line: str) -> str:
    return " ".join(line.split())


def _first_line(text: str) -> str:
    return next((_clean(line) for line in text.splitlines() if line.strip()), "")


# --- when it resets ------------------------------------------------------------------------------

# "Claude AI usage limit reached|1749924000" (Claude Code before 1.0.x printed the epoch).
_EPOCH = re.compile(r"limit reached\|(\d{9,11})\b", re.I)
# "resets 3pm", "resets at 3:30 PM (Europe/Berlin)", "will reset at 14:05", "try again at 3:45 PM"
_CLOCK = re.compile(
    r"(?:resets?|reset at|try again at)\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?"
    r"(?:\s*\(([A-Za-z_]+(?:/[A-Za-z_+-]+)*)\))?",
    re.I,
)
# "try again in 4 days 23 hours 59 minutes", "Please try again in 1.5s", "in 6m0s", "in 120ms"
_IN = re.compile(r"(?:try again|retry|resets?) in\s+([0-9][0-9a-z .,\n]*)", re.I)
# Codex: "try again at Jul 5th, 2026 8:19 PM."
_DATE = re.compile(
    r"try again at ([A-Z][a-z]{2})[a-z]* (\d{1,2})(?:st|nd|rd|th)?,? (\d{4}),? (\d{1,2}):(\d{2})"
    r"\s*([AP]M)?",
    re.I,
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# The usage_limit_reached error body: {"resets_at": 1775317531, "resets_in_seconds": 602705}
_RESETS_IN = re.compile(r'"resets_in_seconds"\s*:\s*(\d+)')
_RESETS_AT = re.compile(r'"resets_at"\s*:\s*(\d{9,11})')
_UNIT = re.compile(
    r"(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?"
    r"|d|days?)\b",
    re.I,
)
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _stated_until(result: AgentResult, texts: list[str], now: datetime) -> datetime | None:
    asked = result.extra.get("retry_after_s")
    if isinstance(asked, int | float) and not isinstance(asked, bool) and 0 <= asked < LONGEST_S:
        return now + timedelta(seconds=float(asked))
    for text in texts:
        for finder in (_epoch, _in, _date, _clock):
            until = finder(text, now)
            if until is not None and now <= until <= now + timedelta(seconds=LONGEST_S):
                return until
    return None


def _epoch(text: str, now: datetime) -> datetime | None:
    found = _EPOCH.search(text) or _RESETS_AT.search(text)
    if found is not None:
        return datetime.fromtimestamp(int(found.group(1)), UTC)
    seconds = _RESETS_IN.search(text)
    return now + timedelta(seconds=int(seconds.group(1))) if seconds else None


def _date(text: str, now: datetime) -> datetime | None:
    found = _DATE.search(text)
    if found is None:
        return None
    month, day, year, hour, minute, half = found.groups()
    if month.lower() not in _MONTHS:
        return None
    hour_n = int(hour)
    if half:
        hour_n = hour_n % 12 + (12 if half.upper() == "PM" else 0)
    try:
        local = datetime(int(year), _MONTHS.index(month.lower()) + 1, int(day), hour_n, int(minute))
    except ValueError:
        return None
    return local.astimezone().astimezone(UTC)  # Codex prints the machine's local time


def _in(text: str, now: datetime) -> datetime | None:
    found = _IN.search(text)
    if found is None:
        return None
    total = 0.0
    for number, unit in _UNIT.findall(found.group(1)):
        key = "ms" if unit.lower() in ("ms", "millisecond", "milliseconds") else unit[0].lower()
        total += float(number) * _SECONDS[key]
    return now + timedelta(seconds=total) if total > 0 else None


def _clock(text: str, now: datetime) -> datetime | None:
    found = _CLOCK.search(text)
    if found is None:
        return None
    hour, minute, half, zone_name = found.groups()
    hour_n, minute_n = int(hour), int(minute or 0)
    if half:
        if not 1 <= hour_n <= 12:
            return None
        hour_n = hour_n % 12 + (12 if half.lower().startswith("p") else 0)
    if hour_n > 23 or minute_n > 59 or (minute is None and not half):
        return None  # a bare number is not a time of day
    zone = _zone(zone_name)
    local = now.astimezone(zone)
    at = local.replace(hour=hour_n, minute=minute_n, second=0, microsecond=0)
    if at <= local:
        at += timedelta(days=1)
    return at.astimezone(UTC)


def _zone(name: str | None) -> tzinfo | None:
    """The named IANA zone; None (the machine's local zone) when unnamed or unknown."""
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None

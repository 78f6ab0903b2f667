"""Typed, line-aware access to one table of a definition, with teaching error messages.

Every accessor records the key as known; `finish()` then reports the keys nobody asked for as
unknown, with a "did you mean" from the keys that were asked for.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from loopctl.definitions.source import KeyPath, Locate, ParsedDoc, Problems

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")


class _Missing:
    pass


MISSING: Any = _Missing()


def parse_duration(text: str) -> float:
    """Parse "90s", "5m", "1h30m", "2d", "250ms" into seconds; ValueError when malformed."""
    compact = text.strip().replace(" ", "")
    match = _DURATION.match(compact)
    if not compact or match is None or not any(match.groups()):
        raise ValueError(f'invalid duration {text!r}: use forms like "90s", "5m", "1h30m"')
    days, hours, minutes, seconds, millis = (int(g) if g else 0 for g in match.groups())
    return days * 86400 + hours * 3600 + minutes * 60 + seconds + millis / 1000


_CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
UNTIL_FORMS = 'a clock time "07:30", an ISO date-time "2026-12-06T07:30" or a duration "8h"'


def parse_until(text: str, now: datetime) -> datetime:
    """When `loopctl up --until TEXT` ends, as an aware datetime after `now`.

    "07:30": its next occurrence in the local time zone (tomorrow when it has passed today);
    "2026-12-06T07:30[+01:00]": that instant (local time when no offset is given; it must be
    ahead); "8h", "90s": that long from `now`. ValueError, naming the forms, otherwise.
    """
    compact = text.strip()
    clock = _CLOCK.match(compact)
    if clock:
        local = now.astimezone()
        hour, minute = int(clock.group(1)), int(clock.group(2))
        for days in (0, 1, 2):  # 2: a clock time a DST change skipped today and tomorrow
            day = local.date() + timedelta(days=days)
            # Naive, then astimezone(): the local zone's rules on that day, DST included.
            at = datetime(day.year, day.month, day.day, hour, minute).astimezone()
            if at > now:
                return at
    if re.match(r"^\d{4}-\d{2}-\d{2}", compact):
        try:
            at = datetime.fromisoformat(compact)
        except ValueError:
            raise ValueError(f"invalid date-time {text!r}: use {UNTIL_FORMS}") from None
        at = at if at.tzinfo is not None else at.astimezone()
        if at <= now:
            raise ValueError(f"{text!r} is already past")
        return at
    try:
        seconds = parse_duration(compact)
    except ValueError:
        raise ValueError(f"invalid time {text!r}: use {UNTIL_FORMS}") from None
    if seconds <= 0:
        raise ValueError(f"{text!r} is no time at all: use {UNTIL_FORMS}")
    return now + timedelta(seconds=seconds)


def format_duration(seconds: float) -> str:
    """The inverse of parse_duration, for display."""
    if seconds < 1:
        return f"{int(seconds * 1000)}ms"
    whole = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    return "".join(parts) or "0s"


def validate_cron(expr: str) -> str | None:
    """Return an error message for a bad 5-field cron expression, else None."""
    fields = expr.split()
    if len(fields) != 5:
        return (
            f"cron expression {expr!r} has {len(fields)} fields; expected 5"
            " (minute hour day-of-month month day-of-week)"
        )
    # lazy: apscheduler is slow to import and only cron loops need it (bench/startup.py)
    from apscheduler.triggers.cron import CronTrigger

    try:
        CronTrigger.from_crontab(expr, timezone="UTC")
    except (ValueError, TypeError) as exc:
        return f"invalid cron expression {expr!r}: {exc}"
    return None


def did_you_mean(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def describe_type(value: object) -> str:
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }
    return names.get(type(value), type(value).__name__)


class Table:
    """One table (or front-matter mapping) of a definition, read key by key."""

    def __init__(
        self,
        data: Mapping[str, Any],
        *,
        path: Path,
        locate: Locate,
        problems: Problems,
        keypath: KeyPath = (),
        label: str | None = None,
    ) -> None:
        self.data = data
        self.path = path
        self._locate = locate
        self.problems = problems
        self.keypath = keypath
        self.label = label if label is not None else ".".join(keypath)
        self._known: set[str] = set()
        self.failed = False

    @classmethod
    def of(cls, doc: ParsedDoc, problems: Problems) -> Table:
        return cls(doc.data, path=doc.path, locate=doc.locate, problems=problems)

    # --- reporting ---------------------------------------------------------------------------

    def line(self, key: str | None = None) -> int | None:
        path = (*self.keypath, key) if key is not None else self.keypath
        return self._locate(path) if path else 1

    def where(self, key: str) -> str:
        return f"'{key}'" if not self.label else f"'{key}' in [{self.label}]"

    def error(self, key: str | None, message: str) -> None:
        self.failed = True
        self.problems.error(self.path, self.line(key), message)

    def warn(self, key: str | None, message: str) -> None:
        self.problems.warn(self.path, self.line(key), message)

    def finish(self, *, allow_unknown: bool = False, unknown_hint: str = "") -> None:
        """Report keys that no accessor asked for."""
        for key in self.data:
            if key in self._known:
                continue
            hint = did_you_mean(key, self._known)
            message = f"unknown key {self.where(key)}{hint}{unknown_hint}"
            if allow_unknown:
                self.warn(key, message)
            else:
                self.error(key, message)

    def known(self, *keys: str) -> None:
        """Mark keys as accepted without reading them (kept for other tools)."""
        self._known.update(keys)

    # --- accessors ---------------------------------------------------------------------------

    def _get(self, key: str) -> Any:
        self._known.add(key)
        return self.data.get(key, MISSING)

    def _wrong_type(self, key: str, value: object, expected: str) -> None:
        self.error(key, f"{self.where(key)} must be {expected}, not {describe_type(value)}")

    def has(self, key: str) -> bool:
        return key in self.data

    def string(
        self,
        key: str,
        default: str | None = None,
        *,
        required: bool = False,
        choices: Iterable[str] | None = None,
        max_len: int | None = None,
    ) -> str | None:
        value = self._get(key)
        if value is MISSING:
            if required:
                self.error(
                    key if key in self.data else None, f"missing required key {self.where(key)}"
                )
            return default
        if not isinstance(value, str):
            self._wrong_type(key, value, "a string")
            return default
        if choices is not None:
            options = list(choices)
            if value not in options:
                self.error(
                    key,
                    f"{self.where(key)} must be one of {', '.join(options)}, not {value!r}"
                    f"{did_you_mean(value, options)}",
                )
                return default
        if max_len is not None and len(value) > max_len:
            self.error(key, f"{self.where(key)} is {len(value)} characters; at most {max_len}")
            return default
        return value

    def integer(self, key: str, default: int | None, *, minimum: int = 0) -> int | None:
        value = self._get(key)
        if value is MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self._wrong_type(key, value, "an integer")
            return default
        if value < minimum:
            self.error(key, f"{self.where(key)} must be at least {minimum}, not {value}")
            return default
        return value

    def number(self, key: str, default: float | None, *, minimum: float = 0.0) -> float | None:
        value = self._get(key)
        if value is MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            self._wrong_type(key, value, "a number")
            return default
        if value < minimum or value != value:  # NaN is never a sane limit
            self.error(key, f"{self.where(key)} must be at least {minimum}, not {value}")
            return default
        return float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is MISSING:
            return default
        if not isinstance(value, bool):
            self._wrong_type(key, value, "true or false")
            return default
        return value

    def string_list(self, key: str, *, allow_single: bool = True) -> tuple[str, ...]:
        value = self._get(key)
        if value is MISSING:
            return ()
        if isinstance(value, str) and allow_single:
            return (value,)
        if not isinstance(value, list):
            self._wrong_type(key, value, "a list of strings")
            return ()
        items: list[str] = []
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item:
                self.error(
                    key,
                    f"{self.where(f'{key}[{index}]')} must be a non-empty string,"
                    f" not {describe_type(item)}",
                )
                return ()
            items.append(item)
        return tuple(items)

    def glob_list(self, key: str) -> tuple[str, ...]:
        globs = self.string_list(key)
        for pattern in globs:
            if "\x00" in pattern:
                self.error(key, f"{self.where(key)} has a pattern with a NUL byte")
                return ()
        return globs

    def argv(self, key: str, *, required: bool = False) -> tuple[str, ...] | None:
        value = self._get(key)
        if value is MISSING:
            if required:
                self.error(None, f"missing required key {self.where(key)}")
            return None
        return self._coerce_argv(key, value, key)

    def _coerce_argv(self, key: str, value: object, shown: str) -> tuple[str, ...] | None:
        if isinstance(value, str):
            try:
                parts = shlex.split(value)
            except ValueError as exc:
                self.error(key, f"'{shown}' cannot be split into arguments: {exc}")
                return None
            if not parts:
                self.error(key, f"'{shown}' is an empty command")
                return None
            return tuple(parts)
        if isinstance(value, list):
            if not value:
                self.error(key, f"'{shown}' is an empty command")
                return None
            if not all(isinstance(item, str) for item in value):
                self.error(key, f"'{shown}' must be a list of strings (an argv)")
                return None
            if not value[0]:
                self.error(key, f"'{shown}' has an empty program name")
                return None
            return tuple(value)
        self.error(
            key,
            f'{self.where(key)} must be a command: a list of strings like ["pytest", "-q"]'
            f" or a string split like a shell would, not {describe_type(value)}",
        )
        return None

    def argv_list(self, key: str) -> tuple[tuple[str, ...], ...]:
        """A list of commands; a single command (list of strings or a string) is accepted too."""
        value = self._get(key)
        if value is MISSING:
            return ()
        if isinstance(value, str) or (
            isinstance(value, list) and value and all(isinstance(v, str) for v in value)
        ):
            return self._one_argv_list(key, value)
        if not isinstance(value, list):
            self._wrong_type(key, value, "a list of commands")
            return ()
        commands: list[tuple[str, ...]] = []
        for index, item in enumerate(value):
            command = self._coerce_argv(key, item, f"{key}[{index}]")
            if command is None:
                return ()
            commands.append(command)
        return tuple(commands)

    def _one_argv_list(self, key: str, value: str | list[str]) -> tuple[tuple[str, ...], ...]:
        """A string, or a list of strings: one argv, or commands when each has a space."""
        single = self._coerce_argv(key, value, key)
        if single is None:
            return ()
        # ["uv sync", "npm ci"] reads as two commands; ["uv", "sync"] as one argv.
        if isinstance(value, list) and all(" " in v for v in value) and len(value) > 1:
            split = [self._coerce_argv(key, v, f"{key}[{i}]") for i, v in enumerate(value)]
            return tuple(c for c in split if c is not None)
        return (single,)

    def duration(self, key: str, default: float | None = None) -> float | None:
        value = self._get(key)
        if value is MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, str):
            self.error(
                key,
                f'{self.where(key)} must be a duration string like "90s", "5m" or "1h30m",'
                f" not {describe_type(value)}",
            )
            return default
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            self.error(key, f"{self.where(key)}: {exc}")
            return default
        if seconds <= 0:
            self.error(key, f"{self.where(key)} must be longer than zero")
            return default
        return seconds

    def size(self, key: str, default: int | None = None) -> int | None:
        """A size in bytes: an integer, or a string like "500MB", "2GB", "1.5GiB"."""
        value = self._get(key)
        if value is MISSING:
            return default
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        if isinstance(value, str):
            try:
                return parse_size(value)
            except ValueError as exc:
                self.error(key, f"{self.where(key)}: {exc}")
                return default
        self.error(
            key,
            f'{self.where(key)} must be a size like "500MB" or "2GB", not {describe_type(value)}',
        )
        return default

    def relative_paths(self, key: str) -> tuple[str, ...] | None:
        """Paths inside the repository (no glob characters); None when the key is absent."""
        if not self.has(key):
            return None
        paths = self.string_list(key)
        for item in paths:
            parts = Path(item).parts
            if (
                item.startswith("/")
                or ".." in parts
                or any(char in item for char in "*?[\\\0")
                or not parts
                or parts[0] in (".git", ".loop")
            ):
                self.error(
                    key,
                    f"{self.where(key)}: {item!r} must be a plain folder path inside the"
                    " repository (no glob, no '..', not .git or .loop)",
                )
                return ()
        return tuple(item.strip("/") for item in paths)

    def table(self, key: str) -> Table | None:
        """A sub-table; None when absent (and an error when it is not a table)."""
        value = self._get(key)
        if value is MISSING:
            return None
        if not isinstance(value, dict):
            self._wrong_type(key, value, "a table")
            return None
        return Table(
            value,
            path=self.path,
            locate=self._locate,
            problems=self.problems,
            keypath=(*self.keypath, key),
        )

    def raw(self, key: str) -> Any:
        value = self._get(key)
        return None if value is MISSING else value


_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


def parse_size(text: str) -> int:
    """Bytes from "500MB", "2GB", "1.5GiB" or "1024"; ValueError with the accepted forms."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _SIZE_UNITS:
        raise ValueError(f'{text!r} is not a size; write e.g. "500MB", "2GB" or "1.5GiB"')
    size = int(float(match.group(1)) * _SIZE_UNITS[unit])
    if size <= 0:
        raise ValueError(f"{text!r} is not a size above zero bytes")
    return size

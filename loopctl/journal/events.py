"""The append-only event log: one checksummed JSON line per event (invariant 1,
docs/INVARIANTS.md)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime
from enum import StrEnum
from pathlib import Path, PurePath
from typing import Any, NoReturn, TypeVar

import msgspec

from loopctl.atomicfile import fsync_dir
from loopctl.errors import LoopctlError

FORMAT_VERSION = 1

T = TypeVar("T")

# Backwards tail reads start at this size and double, so a huge last record costs O(size).
_TAIL_CHUNK = 8192
_TAIL_CHUNK_MAX = 1 << 20


class EventType(StrEnum):
    TICK_STARTED = "tick_started"
    TICK_FINISHED = "tick_finished"
    TICK_SKIPPED = "tick_skipped"
    TASK_FOUND = "task_found"
    TASK_FINISHED = "task_finished"
    WORKTREE_CREATED = "worktree_created"
    ATTEMPT_STARTED = "attempt_started"
    AGENT_STARTED = "agent_started"
    AGENT_FINISHED = "agent_finished"
    CHECK_FINISHED = "check_finished"
    ATTEMPT_FINISHED = "attempt_finished"
    COMMIT_CREATED = "commit_created"
    INBOX_OPENED = "inbox_opened"
    INBOX_CLOSED = "inbox_closed"
    BUDGET_STOPPED = "budget_stopped"
    RUN_INTERRUPTED = "run_interrupted"
    RUN_RESUMED = "run_resumed"
    TASKS_LISTED = "tasks_listed"
    WORKTREE_PREPARED = "worktree_prepared"
    BASELINE_CHECKED = "baseline_checked"
    ACTION_DEFERRED = "action_deferred"
    NOTE = "note"
    # The inbox and approval gates (issue 5).
    DELIVERY_PLANNED = "delivery_planned"
    ACTION_STARTED = "action_started"
    ACTION_FINISHED = "action_finished"
    APPROVED = "approved"
    APPROVAL_REFUSED = "approval_refused"
    TASK_REQUEUED = "task_requeued"
    NOTIFIED = "notified"
    NOTIFY_FAILED = "notify_failed"
    DIGEST_SENT = "digest_sent"
    # Triggers and `loopctl up` (issue 4).
    SCHEDULER_STARTED = "scheduler_started"
    SCHEDULER_STOPPED = "scheduler_stopped"
    # Self-evolution as proposals (issue 31, item 3).
    PROPOSAL_MADE = "proposal_made"
    PROPOSAL_APPLIED = "proposal_applied"
    PROPOSAL_REFUSED = "proposal_refused"
    # Declared scope and drift (issue 31): what an attempt touched, held against its scope.
    ATTEMPT_FOOTPRINT = "attempt_footprint"


class LogCorrupt(LoopctlError):
    """A record of the event log that is not its torn last line is damaged."""

    def __init__(self, path: Path, line: int, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        super().__init__(
            f"{path}:{line}: corrupt event log record ({reason}); "
            "move the file aside or truncate it at that line"
        )

    def __reduce__(self) -> tuple[type[LogCorrupt], tuple[Path, int, str]]:
        return (type(self), (self.path, self.line, self.reason))


# A frozen msgspec struct rather than a dataclass: replay builds one per line, and a frozen
# dataclass's __init__ (one object.__setattr__ per field) cost more than decoding the line.
class Event(msgspec.Struct, frozen=True, gc=False):
    """One record of the log; `type` stays a plain string so unknown types still load."""

    seq: int
    ts: str
    type: str
    run: str | None
    loop: str | None
    task: str | None
    data: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The record as written to the log, without its checksum."""
        return {
            "v": FORMAT_VERSION,
            "seq": self.seq,
            "ts": self.ts,
            "type": self.type,
            "run": self.run,
            "loop": self.loop,
            "task": self.task,
            "data": dict(self.data),
        }

    @property
    def time(self) -> datetime:
        """`ts` as an aware datetime."""
        return datetime.fromisoformat(self.ts)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class EventLog:
    """Appends and reads one repository's event log, safely across threads and processes."""

    def __init__(self, path: Path, clock: Callable[[], datetime] = _utc_now) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self._clock = clock
        # flock excludes other open files, not other threads sharing one; this covers those.
        self._thread_lock = threading.Lock()
        # What `read` has already parsed: (device, inode, bytes consumed, the last line read,
        # lines, events). The log only grows, so a later read parses just the new bytes; the
        # last line, checked again, catches a file rewritten in place by hand.
        self._seen: tuple[int, int, int, bytes, int, list[Event]] | None = None
        self._seen_lock = threading.Lock()
        # Bumped whenever the parsed events start over (the file replaced, cut or rewritten):
        # every fold of `folding` then starts over too.
        self._generation = 0
        self._folds: dict[str, tuple[int, int, Any]] = {}  # key -> (generation, events, state)
        self._fold_lock = threading.RLock()

    def append(
        self,
        type: str,
        *,
        run: str | None = None,
        loop: str | None = None,
        task: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> Event:
        """Durably append one event and return it as `read` will see it."""
        if not isinstance(type, str) or not type:
            raise ValueError(f"event type must be a non-empty string, not {type!r}")
        # Normalise to plain JSON values first, so the checksum we compute is the one a reader
        # recomputes (tuples, Paths and int keys would otherwise serialise differently).
        payload = _plain_json(dict(data or {}))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._thread_lock, self._file_lock():
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                size = os.fstat(fd).st_size
                last_seq, keep = self._tail(fd, size)
                if keep < size:
                    # A writer died mid-line; cut the fragment so this record starts a line.
                    os.ftruncate(fd, keep)
                record: dict[str, Any] = {
                    "v": FORMAT_VERSION,
                    "seq": last_seq + 1,
                    "ts": self._clock().astimezone(UTC).isoformat(timespec="microseconds"),
                    "type": str(type),
                    "run": run,
                    "loop": loop,
                    "task": task,
                    "data": payload,
                }
                line = _encode(record)
                try:
                    written = os.write(fd, line)
                    if written != len(line):
                        os.ftruncate(fd, keep)
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
                    os.fsync(fd)
                except OSError as exc:
                    exc.filename = exc.filename or str(self.path)
                    raise
            finally:
                os.close(fd)
            if keep == 0:
                fsync_dir(self.path.parent)
        return _event_from(record)

    def read(self) -> list[Event]:
        """Every event in order; a torn last line is ignored, damage before it raises."""
        with self._seen_lock:
            return list(self._refresh())

    @contextlib.contextmanager
    def folding(
        self, key: str, step: Callable[[T, Sequence[Event]], T], start: Callable[[], T]
    ) -> Iterator[T]:
        """`step` folded over every event from `start()`, as a context: the state is the log's
        up to now, and nobody folds more into it until the block ends.

        The first call folds the whole log; later ones fold only what was appended since (the
        log only grows; a replaced or truncated one is folded afresh). A long-running process
        (`loopctl up`) so answers "which items are open" or "which runs are unfinished" in time
        proportional to what is new, however long the log. `step` may mutate and return its
        state; what the block reads must not outlive it.
        """
        with self._fold_lock:
            with self._seen_lock:
                events = self._refresh()
                generation = self._generation
            held = self._folds.get(key)
            if held is None or held[0] != generation or held[1] > len(events):
                held = (generation, 0, start())
            state = held[2]
            if held[1] < len(events):
                state = step(state, events[held[1] :])
            self._folds[key] = (generation, len(events), state)
            yield state

    def _refresh(self) -> list[Event]:
        """The events parsed so far, after parsing what was appended (the caller holds
        `_seen_lock`; the list is the log's own: copy it before handing it out)."""
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            if self._seen is not None:
                self._generation += 1
            self._seen = None
            return []
        with handle:
            info = os.fstat(handle.fileno())
            seen = self._seen
            if seen is not None:
                same_file = (seen[0], seen[1]) == (info.st_dev, info.st_ino)
                if not same_file or info.st_size < seen[2]:
                    seen = None  # replaced or truncated
                    self._generation += 1
                else:
                    handle.seek(max(seen[2] - len(seen[3]), 0))
                    if handle.read(len(seen[3])) != seen[3]:
                        seen = None  # rewritten in place
                        self._generation += 1
            _dev, _ino, offset, _sig, lines, known = seen or (0, 0, 0, b"", 0, [])
            handle.seek(offset)
            buf = handle.read()
        prev_seq = known[-1].seq if known else 0
        fresh, consumed = self._parse(buf, first_line=lines + 1, prev_seq=prev_seq)
        events = known + fresh if fresh else known
        end = offset + consumed
        last_line = _last_line((seen[3] if seen else b"") + buf[:consumed])
        self._seen = (
            info.st_dev,
            info.st_ino,
            end,
            last_line,
            lines + buf.count(b"\n", 0, consumed),
            events,
        )
        return events

    def iter_from(self, after_seq: int) -> list[Event]:
        """The events with seq greater than `after_seq`."""
        return [event for event in self.read() if event.seq > after_seq]

    def last_seq(self) -> int:
        """The seq of the last event `read` would return (0 for an empty log)."""
        if not self.path.exists():
            return 0
        with self._thread_lock, self._file_lock():
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return 0
            try:
                last_seq, _keep = self._tail(fd, os.fstat(fd).st_size)
            finally:
                os.close(fd)
        return last_seq

    def follow(
        self, after_seq: int, stop: Callable[[], bool], poll: float = 0.2
    ) -> Iterator[Event]:
        """Yield events after `after_seq` as they are appended, until `stop()` is true."""
        offset = 0  # bytes of complete, already parsed lines
        line = 1
        prev_seq = 0
        last = b""  # the last parsed line, as `read` keeps it: a rewrite below offset shows here
        seen: tuple[int, ...] | None = None  # (dev, inode, size, mtime) when last parsed
        while True:
            try:
                st = os.stat(self.path)
                current: tuple[int, ...] | None = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            except FileNotFoundError:
                current = None
            if current != seen:
                if current is None or seen is None or current[:2] != seen[:2]:
                    # A new file (first look, or moved aside and recreated): start over.
                    if seen is not None:
                        after_seq = 0
                    restart = True
                else:
                    # Cut, rewritten in place, or grown past a rewrite (the last line parsed is
                    # no longer where it was): parse it again, show only newer events.
                    restart = current[2] <= offset or not _holds_at(self.path, offset, last)
                if restart:
                    offset, line, prev_seq, last = 0, 1, 0, b""
                seen = current
                if current is not None and current[2] > offset:
                    buf = _read_from(self.path, offset)
                    events, consumed = self._parse(buf, first_line=line, prev_seq=prev_seq)
                    last = _last_line(last + buf[:consumed])
                    offset += consumed
                    line += buf.count(b"\n", 0, consumed)
                    for event in events:
                        prev_seq = event.seq
                        if event.seq > after_seq:
                            after_seq = event.seq
                            yield event
            if stop():
                return
            time.sleep(poll)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold off every appender, in this process and others, e.g. while the log is rewritten."""
        with self._thread_lock, self._file_lock():
            yield

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        # A sidecar file, so truncating or replacing the log never drops a held lock.
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _parse(self, buf: bytes, *, first_line: int, prev_seq: int) -> tuple[list[Event], int]:
        """Events of the complete lines in `buf`, and how many bytes they span.

        A trailing fragment without a newline, and an unparsable last line, are left
        unconsumed: they are a write that died (or, while following, one in progress).
        """
        events: list[Event] = []
        pos = 0
        line = first_line
        while (end := buf.find(b"\n", pos)) >= 0:
            try:
                event = _decode(buf[pos:end])
            except _BadRecord as bad:
                if bad.torn and end + 1 == len(buf):
                    break
                raise LogCorrupt(self.path, line, bad.reason) from None
            if event.seq != prev_seq + 1:
                raise LogCorrupt(
                    self.path,
                    line,
                    f"seq {event.seq} follows seq {prev_seq}, expected {prev_seq + 1}",
                )
            events.append(event)
            prev_seq = event.seq
            pos = end + 1
            line += 1
        return events, pos

    def _tail(self, fd: int, size: int) -> tuple[int, int]:
        """The last good seq and the length to keep, judged from the end of the file alone."""
        if size == 0:
            return 0, 0
        buf, start = _read_tail(fd, size, newlines=3)
        pieces = buf.split(b"\n")
        fragment = pieces.pop()
        keep = size - len(fragment)
        lines: list[tuple[int, bytes]] = []  # (offset, bytes) of each complete line in buf
        offset = start
        for index, piece in enumerate(pieces):
            # Unless buf starts the file, its first piece may start mid-line.
            if index > 0 or start == 0:
                lines.append((offset, piece))
            offset += len(piece) + 1
        # Mirror `read`: only the file's very last line may be bad, and then only if it is torn.
        for back, (line_start, raw) in enumerate(reversed(lines[-2:])):
            try:
                return _decode(raw).seq, keep
            except _BadRecord as bad:
                if back == 0 and not fragment and bad.torn:
                    keep = line_start
                    continue
                self._corrupt_at(fd, line_start, bad.reason)
        return 0, keep

    def _corrupt_at(self, fd: int, offset: int, reason: str) -> NoReturn:
        newlines = 0
        pos = 0
        while pos < offset:
            chunk = os.pread(fd, min(_TAIL_CHUNK_MAX, offset - pos), pos)
            if not chunk:
                break  # cut under us by a writer ignoring the lock: count what is there
            newlines += chunk.count(b"\n")
            pos += len(chunk)
        raise LogCorrupt(self.path, newlines + 1, reason)


class _BadRecord(Exception):
    def __init__(self, reason: str, *, torn: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        # torn: damage a write killed midway could leave; tolerated on the last line only.
        self.torn = torn


_OPTIONAL_TEXT = ("run", "loop", "task")


_SUM_MARKER = b', "sum": "'
_MARKER_LEN = len(_SUM_MARKER)
_SUM_TAIL = _MARKER_LEN + 8 + 2  # marker, 8 hex digits, closing quote and brace


def encode_line(event: Event) -> bytes:
    """The exact log line `event` is stored as (re-encoding a read event gives its bytes back)."""
    return _encode(event.to_json())


def _encode(record: Mapping[str, Any]) -> bytes:
    """One log line: the record as ASCII JSON with a crc32 of its own bytes appended last.

    Checking the bytes as written (rather than a re-encoded canonical form) lets a reader
    verify a record without serialising it again: replay costs one `json.loads` per line.
    """
    body = json.dumps(record, allow_nan=False).encode("ascii")
    return body[:-1] + b'%s%08x"}\n' % (_SUM_MARKER, zlib.crc32(body))


def _decode(raw: bytes) -> Event:
    """The event of one log line (without its newline), or _BadRecord saying what is wrong."""
    # The common case, a well-formed record of this version, is checked and decoded straight
    # into a typed envelope: replay runs this on every line, and msgspec builds the record
    # about five times faster than `json` builds a dict. Anything else takes `_decode_slowly`,
    # which says exactly what is wrong. msgspec refuses all that `json` refuses here (bad
    # UTF-8, NaN, 1e999, lone surrogates, deep nesting) and keeps the last of duplicate keys as
    # `json` does; the leading "{" rules out the whitespace it would skip.
    tail = len(raw) - _SUM_TAIL
    if (
        tail > 0
        and raw.startswith(_SUM_MARKER, tail)
        and raw.endswith(b'"}')
        and raw.startswith(b"{")
        and b"%08x" % zlib.crc32(raw[:tail] + b"}") == raw[tail + _MARKER_LEN : -2]
    ):
        try:
            record = _ENVELOPE.decode(raw)
        except msgspec.MsgspecError:
            pass
        else:
            if record.v == FORMAT_VERSION and record.seq >= 1:
                return Event(
                    record.seq,
                    record.ts,
                    record.type,
                    record.run,
                    record.loop,
                    record.task,
                    record.data,
                )
    return _decode_slowly(raw)


def _decode_slowly(raw: bytes) -> Event:
    marker = raw.rfind(_SUM_MARKER)
    if marker < 0 or len(raw) - marker != _SUM_TAIL or not raw.endswith(b'"}'):
        raise _unreadable(raw)
    # The sum covers the record as written without its tail: the bytes before the marker and
    # the closing brace, chained here so that no copy of the line is made.
    actual = b"%08x" % zlib.crc32(b"}", zlib.crc32(memoryview(raw)[:marker]))
    claimed = raw[marker + len(_SUM_MARKER) : -2]
    if claimed != actual:
        shown = claimed.decode("ascii", "replace")
        raise _BadRecord(
            f"checksum {shown!r} does not match the content ({actual.decode()})", torn=True
        )
    # With a matching sum the whole line is the record plus a "sum" member: one parse of it,
    # straight through the decoder's scanner.
    try:  # a matching sum does not make the bytes UTF-8: UnicodeDecodeError is a ValueError
        text = raw.decode("utf-8")
        record, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError):
        raise _BadRecord("not valid JSON", torn=True) from None
    if end != len(text):
        raise _BadRecord("not valid JSON", torn=True)
    if not isinstance(record, dict):
        raise _BadRecord("not a JSON object", torn=True)
    record.pop("sum", None)
    version = record.get("v")
    if isinstance(version, int) and version != FORMAT_VERSION:
        raise _BadRecord(
            f"format version {version}, this loopctl reads {FORMAT_VERSION}; upgrade loopctl",
            torn=False,
        )
    if _well_formed(record):  # the common case, checked cheaply: replay reads every line
        return Event(
            record["seq"],
            record["ts"],
            record["type"],
            record["run"],
            record["loop"],
            record["task"],
            record["data"],
        )
    problem = _shape_problem(record) or "malformed record"
    raise _BadRecord(problem, torn=False)


def _well_formed(record: dict[str, Any]) -> bool:
    seq = record.get("seq")
    return (
        type(seq) is int
        and seq >= 1
        and type(record.get("v")) is int
        and type(record.get("ts")) is str
        and type(record.get("type")) is str
        and type(record.get("data")) is dict
        and type(record.get("run", 0)) in _TEXT_OR_NONE
        and type(record.get("loop", 0)) in _TEXT_OR_NONE
        and type(record.get("task", 0)) in _TEXT_OR_NONE
    )


_TEXT_OR_NONE = (str, type(None))


def _unreadable(raw: bytes) -> _BadRecord:
    """Why a line without a valid checksum tail is unreadable; a newer format is never torn."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return _BadRecord("not valid JSON", torn=True)
    version = record.get("v") if isinstance(record, dict) else None
    if isinstance(version, int) and version != FORMAT_VERSION:
        return _BadRecord(
            f"format version {version}, this loopctl reads {FORMAT_VERSION}; upgrade loopctl",
            torn=False,
        )
    return _BadRecord("no checksum at the end of the record", torn=True)


def _shape_problem(record: Mapping[str, Any]) -> str | None:
    if type(record.get("v")) is not int:
        return "missing format version"
    seq = record.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        return "missing or invalid 'seq'"
    for key in ("ts", "type"):
        if not isinstance(record.get(key), str):
            return f"missing or invalid {key!r}"
    for key in _OPTIONAL_TEXT:
        if not isinstance(record.get(key), str | None):
            return f"invalid {key!r}"
    if not isinstance(record.get("data"), dict):
        return "missing or invalid 'data'"
    return None


def _event_from(record: Mapping[str, Any]) -> Event:
    return Event(
        seq=record["seq"],
        ts=record["ts"],
        type=record["type"],
        run=record.get("run"),
        loop=record.get("loop"),
        task=record.get("task"),
        data=record["data"],
    )


def _plain_json(value: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(value, default=_json_default, allow_nan=False)
    plain: dict[str, Any] = json.loads(text)
    return plain


def _json_default(value: object) -> object:
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"event data value of type {type(value).__name__} is not JSON-serialisable")


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _read_tail(fd: int, size: int, *, newlines: int) -> tuple[bytes, int]:
    """The shortest suffix of the file holding `newlines` newlines (or all of it), and its start."""
    chunks: list[bytes] = []
    pos = size
    found = 0
    step = _TAIL_CHUNK
    while pos > 0 and found < newlines:
        want = min(step, pos)
        pos -= want
        chunk = os.pread(fd, want, pos)
        chunks.append(chunk)
        found += chunk.count(b"\n")
        step = min(step * 2, _TAIL_CHUNK_MAX)
    chunks.reverse()
    return b"".join(chunks), pos


def _read_from(path: Path, offset: int, length: int = -1) -> bytes:
    """Up to `length` of the file's bytes from `offset` (all, to its end, by default)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read(length)
    except FileNotFoundError:  # removed since follow's stat: nothing to read this pass
        return b""


def _holds_at(path: Path, end: int, line: bytes) -> bool:
    """True when `line` is still the file's bytes just before `end` (where it was parsed)."""
    return _read_from(path, end - len(line), len(line)) == line


def _last_line(recent: bytes) -> bytes:
    """The last complete line of `recent`, which ends with a newline."""
    return recent[recent.rfind(b"\n", 0, len(recent) - 1) + 1 :]


class _Envelope(msgspec.Struct, gc=False):
    """A well-formed record as `_decode` accepts it; its "sum" and unknown members are ignored."""

    v: int
    seq: int
    ts: str
    type: str
    run: str | None
    loop: str | None
    task: str | None
    data: dict[str, Any]


_ENVELOPE = msgspec.json.Decoder(_Envelope)

# One decoder for every line: json.loads with a keyword argument builds a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
# The decoder's own scanner (C where available), without the whitespace handling around it.
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]

"""Appending to the event log and reading it again (issue 18): what `read` and `follow` remember
of the file must never serve a replaced or rewritten log from memory, the cost of a re-read is the
new bytes, and an append fails with the log's path and never cuts a healthy log."""

from __future__ import annotations

import errno
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.processes import wait_for

from loopctl.cli.reporting import report
from loopctl.journal.events import Event, EventLog, EventType, LogCorrupt
from loopctl.paths import ProjectPaths

_FIXED = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def new_log(folder: Path) -> EventLog:
    # One fixed clock: two logs written with the same data hold byte-identical lines.
    return EventLog(ProjectPaths(folder).events_file, clock=lambda: _FIXED)


def _bytes_read() -> int:
    """Bytes this process has read through read(2) and friends so far (Linux task accounting)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_a_new_log_and_its_lock_file_are_created_rw_r__r__(tmp_path: Path) -> None:
    """Asked for as 0o644 exactly: with no umask to hide it, never group/other write or exec."""
    log = new_log(tmp_path)
    old = os.umask(0)
    try:
        log.append(EventType.NOTE)
    finally:
        os.umask(old)
    assert oct(log.path.stat().st_mode & 0o7777) == oct(0o644)
    assert oct(log.lock_path.stat().st_mode & 0o7777) == oct(0o644)


def test_an_append_on_a_full_disk_fails_naming_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The write's own error carries no file name: the append adds the log's, so the user's one
    line says which file could not be written. (/dev/full fails every write with ENOSPC; it is
    also a file that cannot be truncated, so nothing but the write may be tried on a log with no
    torn line to cut, as on a file the filesystem keeps append-only.)"""
    log = new_log(tmp_path)
    log.path.parent.mkdir(parents=True)
    log.path.symlink_to("/dev/full")
    with pytest.raises(OSError, match="No space left on device") as caught:
        log.append(EventType.NOTE)
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(log.path)
    report(caught.value)
    assert capsys.readouterr().err.splitlines() == [
        f"loopctl: cannot write {log.path}: No space left on device; free space or fix permissions"
    ]


def test_a_log_replaced_by_one_ending_in_the_remembered_line_is_read_from_the_new_file(
    tmp_path: Path,
) -> None:
    """A log replaced by another file (as `loopctl state pull` replaces it, or a forger does):
    even when the new file holds, at the same offset, the very line the reader remembers as the
    last it read, it is another file, and every record is read from it."""
    log = new_log(tmp_path)
    log.append(EventType.NOTE, data={"word": "real"})
    log.append(EventType.NOTE, data={"n": 2})
    log.append(EventType.NOTE, data={"n": 3})
    assert [e.data for e in log.read()] == [{"word": "real"}, {"n": 2}, {"n": 3}]
    tail = log.path.read_bytes().splitlines(keepends=True)[1:]
    # The first record changed, the rest byte for byte the same; the same size, then grown.
    for word, extra in (("fake", ()), ("sham", (4,))):
        forger = new_log(tmp_path / word)
        forger.append(EventType.NOTE, data={"word": word})
        for n in (2, 3, *extra):
            forger.append(EventType.NOTE, data={"n": n})
        assert forger.path.read_bytes().splitlines(keepends=True)[1:3] == tail
        os.replace(forger.path, log.path)
        assert log.read() == EventLog(log.path).read()
        assert log.read()[0].data == {"word": word}


def test_any_byte_of_the_last_line_changed_in_place_is_seen_by_a_reader_that_read_it(
    tmp_path: Path,
) -> None:
    """The line a reader remembers is the whole last line, first byte to newline: a change to
    any byte of it, in place (same inode, same size), makes the next read agree with a fresh
    reader's (which drops the damaged last line as a torn write) instead of serving memory."""
    log = new_log(tmp_path)
    for n in range(3):
        log.append(EventType.NOTE, data={"n": n})
    raw = log.path.read_bytes()
    start = raw.rstrip(b"\n").rfind(b"\n") + 1
    for offset in range(start, len(raw)):
        log.path.write_bytes(raw)  # O_TRUNC: the same inode, and the same size again
        assert [e.seq for e in log.read()] == [1, 2, 3]
        changed = bytearray(raw)
        changed[offset] ^= 0x20
        with log.path.open("r+b") as handle:
            handle.write(changed)
        assert log.read() == EventLog(log.path).read(), offset
        assert [e.seq for e in log.read()] == [1, 2], offset


def test_reading_a_log_again_reads_only_its_new_bytes(tmp_path: Path) -> None:
    """`read` remembers what it parsed: an unchanged log read again, or one grown by a record,
    costs a few kilobytes of I/O (the remembered last line and what was added), not the log."""
    log = new_log(tmp_path)
    for n in range(30):
        log.append(EventType.NOTE, data={"n": n, "text": "x" * 10_000})
    size = log.path.stat().st_size
    first = log.read()
    assert len(first) == 30
    for grow in (False, True, False):
        if grow:
            log.append(EventType.NOTE, data={"n": len(first)})
        before = _bytes_read()
        again = log.read()
        cost = _bytes_read() - before
        assert again == EventLog(log.path).read()
        assert cost < size // 20, f"re-reading a {size}-byte log read {cost} bytes"
        first = again


def test_last_seq_of_a_log_moved_aside_while_it_waited_for_the_lock_is_0(
    tmp_path: Path,
) -> None:
    """last_seq waits for the lock an exclusive holder (a `state pull`, an operator's
    script) has; if the log is gone once it gets it, there is no event: 0, not a traceback."""
    log = new_log(tmp_path)
    log.append(EventType.NOTE)
    asker = EventLog(log.path)  # another instance: its own thread lock, its own lock-file handle
    answers: list[int | BaseException] = []

    def ask() -> None:
        try:
            answers.append(asker.last_seq())
        except Exception as exc:  # the test reports it
            answers.append(exc)

    with log.exclusive():
        thread = threading.Thread(target=ask)
        thread.start()
        inode = log.lock_path.stat().st_ino
        wait_for(lambda: _waiting_for_flock(inode), "last_seq to wait for the log's lock")
        log.path.rename(log.path.with_name("aside.jsonl"))
    thread.join(timeout=10)
    assert answers == [0]


def _waiting_for_flock(inode: int) -> bool:
    """Whether some process waits for a flock on the file with this inode (/proc/locks lists
    each blocked request as `N: -> FLOCK ADVISORY WRITE pid maj:min:inode start end`)."""
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and "FLOCK" in fields and fields[-3].endswith(f":{inode}"):
            return True
    return False


@pytest.mark.parametrize("grown", [0, 40], ids=["same-size", "grown"])
def test_follow_reparses_a_log_rewritten_by_hand(tmp_path: Path, grown: int) -> None:
    """Cut by hand back to its first record, then one record as long as the two it replaced
    (the log is as long as it was: a change of mtime, not of size) or longer (it grew, so its
    size alone looks like an append): follow sees that the last line it parsed is no longer
    where it was, parses the log again, and goes on with the records after it, instead of
    reading the next record as a seq out of order or parsing from the middle of the forged one."""
    log = new_log(tmp_path)
    for n in range(3):
        log.append(EventType.NOTE, data={"n": n})
    lines = log.path.read_bytes().splitlines(keepends=True)
    # The log was last written a minute ago: the hand edit's mtime is sure to differ.
    old = time.time() - 60
    os.utime(log.path, (old, old))
    scratch = new_log(tmp_path / "scratch")
    scratch.append(EventType.NOTE)
    scratch.append(EventType.NOTE, data={"pad": ""})  # a seq 2 with nothing in its pad
    base = len(scratch.path.read_bytes().splitlines(keepends=True)[-1])
    pad = "x" * (len(lines[1]) + len(lines[2]) - base + grown)
    later: list[int] = []
    passes: list[int] = []
    rewritten = False
    deadline = time.monotonic() + 10  # a bound for a broken follow, not a wait

    def stop() -> bool:
        # Called after each pass: the first call after the rewrite ends the pass that showed
        # seq 3; the second comes after a pass over the rewritten log: then two records come.
        if rewritten:
            passes.append(1)
            if len(passes) == 2:
                later.extend(log.append(EventType.NOTE, data={"n": n}).seq for n in (3, 4))
        return time.monotonic() > deadline

    feed = log.follow(0, stop=stop, poll=0.01)
    assert [next(feed).seq for _ in range(3)] == [1, 2, 3]
    size = log.path.stat().st_size
    log.path.write_bytes(lines[0])
    assert log.append(EventType.NOTE, data={"pad": pad}).seq == 2
    assert log.path.stat().st_size == size + grown
    rewritten = True
    shown = next(feed)
    assert later == [3, 4]
    assert (shown.seq, shown.data) == (4, {"n": 4})


def test_follow_goes_on_while_the_log_is_missing_then_shows_the_new_one(tmp_path: Path) -> None:
    """A pass that finds no log (moved aside, not yet started again) waits; the new log is then
    shown from its first record."""
    log = new_log(tmp_path)
    for n in range(2):
        log.append(EventType.NOTE, data={"n": n})
    passes: list[int] = []
    moved = False
    deadline = time.monotonic() + 10  # a bound for a broken follow, not a wait

    def stop() -> bool:
        # The first call after the move ends the pass that showed seq 2, the second follows a
        # pass that found no file: only then does the new log start.
        if moved:
            passes.append(1)
            if len(passes) == 2:
                log.append(EventType.NOTE, data={"n": "new"})
        return time.monotonic() > deadline

    feed = log.follow(0, stop=stop, poll=0.01)
    assert [next(feed).seq for _ in range(2)] == [1, 2]
    log.path.rename(log.path.with_name("aside.jsonl"))
    moved = True
    shown = next(feed)
    assert len(passes) == 2
    assert (shown.seq, shown.data) == (1, {"n": "new"})


def test_one_pass_of_follow_shows_every_record_of_a_log_of_megabytes(tmp_path: Path) -> None:
    """A pass reads up to the size the stat gave, all of it: a log of several megabytes, made
    larger than its own inode number (another large integer of that stat, which must not be
    taken for the size), is shown whole by a single pass."""
    log = new_log(tmp_path)
    log.append(EventType.NOTE)
    # Past the inode number where that costs at most ~17 MB; always at least a few megabytes.
    wanted = min(log.path.stat().st_ino, 16 << 20) + (1 << 20)
    while log.path.stat().st_size <= wanted:
        log.append(EventType.NOTE, data={"blob": "x" * (256 << 10)})
    written = EventLog(log.path).read()
    shown: list[Event] = list(log.follow(0, stop=lambda: True))
    assert [e.seq for e in shown] == [e.seq for e in written]


def test_follow_reports_a_record_damaged_in_place_below_the_last_line(tmp_path: Path) -> None:
    """A byte of an earlier record changed by hand (same size, the last line untouched): follow
    parses the log again on its next pass and names the damaged line, as `read` would."""
    log = new_log(tmp_path)
    for n in range(3):
        log.append(EventType.NOTE, data={"n": n})
    passes: list[int] = []
    rewritten = False

    def stop() -> bool:  # a few passes over the damaged log, then a broken follow gives up
        if rewritten:
            passes.append(1)
        return len(passes) > 3

    feed = log.follow(0, stop=stop, poll=0.01)
    assert [next(feed).seq for _ in range(3)] == [1, 2, 3]
    lines = log.path.read_bytes().splitlines(keepends=True)
    size = log.path.stat().st_size
    lines[1] = lines[1].replace(b'"n": 1', b'"n": 7')
    log.path.write_bytes(b"".join(lines))
    later = time.time() + 60  # a change of mtime that no clock granularity can hide
    os.utime(log.path, (later, later))
    assert log.path.stat().st_size == size
    rewritten = True
    with pytest.raises(LogCorrupt) as caught:
        next(feed)
    assert f"{log.path}:2:" in str(caught.value)


def test_following_a_growing_log_reads_only_its_new_bytes(tmp_path: Path) -> None:
    """Each pass of follow over a log that grew reads what was added (and the last line it
    parsed, to see it is still there), never the whole log again."""
    log = new_log(tmp_path)
    for n in range(30):
        log.append(EventType.NOTE, data={"n": n, "text": "x" * 10_000})
    size = log.path.stat().st_size
    costs: list[int] = []
    mark = [0]

    def stop() -> bool:  # after each pass: what it read, then one more record for the next
        if mark[0]:
            costs.append(_bytes_read() - mark[0])
        if len(costs) == 3:
            return True
        log.append(EventType.NOTE, data={"n": 30 + len(costs)})
        mark[0] = _bytes_read()
        return False

    shown = [event.seq for event in log.follow(0, stop=stop, poll=0.001)]
    assert shown == list(range(1, 34))
    assert all(cost < size // 20 for cost in costs), f"passes over a {size}-byte log: {costs}"

"""Reading the event log incrementally (EventLog.read keeps where it stopped): what it remembers
of the file must not let a rewritten log or a later damaged line be misread (issue 18)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from loopctl.journal.events import EventLog, EventType, LogCorrupt
from loopctl.paths import ProjectPaths


def new_log(tmp_path: Path) -> EventLog:
    return EventLog(ProjectPaths(tmp_path).events_file)


def test_a_one_record_log_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    """The remembered tail of a one-line log is the whole line, not its newline: a same-size
    rewrite of that line (same inode, same length) is seen, not served from memory."""
    log = new_log(tmp_path)
    log.append(EventType.NOTE, data={"word": "aaaa"})
    assert [e.data["word"] for e in log.read()] == ["aaaa"]
    raw = log.path.read_bytes()
    other = new_log(tmp_path / "other")  # a valid record of the same length, checksum and all
    other.append(EventType.NOTE, data={"word": "bbbb"})
    changed = other.path.read_bytes()
    assert len(changed) == len(raw)
    assert changed != raw
    with log.path.open("r+b") as handle:  # in place: the same inode, the same size
        handle.write(changed)
    assert [e.data["word"] for e in log.read()] == ["bbbb"]


def test_damage_after_an_incremental_read_names_its_own_line(tmp_path: Path) -> None:
    """The line count carried from one read to the next is the number of lines read, so a
    damaged record appended later is reported at its real line number."""
    log = new_log(tmp_path)
    for n in range(3):
        log.append(EventType.NOTE, data={"n": n})
    assert len(log.read()) == 3
    with log.path.open("ab") as handle:
        handle.write(b"{not json\n")
        handle.write(json.dumps({"seq": 4}).encode() + b"\n")
    with pytest.raises(LogCorrupt) as caught:
        log.read()
    assert caught.value.line == 4
    assert f"{log.path}:4:" in str(caught.value)


def test_a_line_that_is_only_a_checksum_tail_is_a_checksum_mismatch(tmp_path: Path) -> None:
    """A damaged line reduced to the checksum's tail (marker at its very start) is reported as
    the checksum it carries, not as unreadable JSON."""
    log = new_log(tmp_path)
    log.append(EventType.NOTE)
    with log.path.open("ab") as handle:
        handle.write(b', "sum": "00000000"}\n')
        handle.write(b"{}\n")
    with pytest.raises(LogCorrupt) as caught:
        log.read()
    assert caught.value.line == 2
    assert caught.value.reason.startswith("checksum '00000000' does not match the content")


def test_follow_goes_on_after_the_log_is_cut_by_hand(tmp_path: Path) -> None:
    """Cut below what `follow` parsed: it parses again from the start (seq 1 first) and shows
    only the events newer than those it showed."""
    log = new_log(tmp_path)
    for n in range(3):
        log.append(EventType.NOTE, data={"n": n})
    later: list[int] = []
    passes: list[int] = []

    def stop() -> bool:
        # Called after each pass. The first call after the cut ends the pass that showed
        # seq 3; the second comes after a pass over the cut log: then two records arrive.
        if cut:
            passes.append(1)
            if len(passes) == 2:
                later.extend(log.append(EventType.NOTE, data={"n": n}).seq for n in (3, 4))
        return time.monotonic() > deadline  # a bound for a broken follow, not a wait

    cut = False
    deadline = time.monotonic() + 10
    feed = log.follow(0, stop=stop, poll=0.01)
    assert [next(feed).seq for _ in range(3)] == [1, 2, 3]
    first = log.path.read_bytes().splitlines(keepends=True)[0]
    log.path.write_bytes(first)  # by hand: records 2 and 3 are gone...
    log.append(EventType.NOTE, data={"n": 1})  # ...and a new seq 2 is shorter than what was read
    cut = True
    shown = next(feed)
    assert later == [3, 4]
    assert (shown.seq, shown.data) == (4, {"n": 4})


def test_a_one_record_log_read_again_and_again_goes_on(tmp_path: Path) -> None:
    """Where a read stopped is the end of what it parsed: reading an unchanged one-record log
    again, then after an append, gives exactly the records there are."""
    log = new_log(tmp_path)
    log.append(EventType.NOTE, data={"n": 1})
    assert [e.seq for e in log.read()] == [1]
    assert [e.seq for e in log.read()] == [1]
    log.append(EventType.NOTE, data={"n": 2})
    assert [e.seq for e in log.read()] == [1, 2]
    assert [e.seq for e in log.read()] == [1, 2]


def test_damage_in_a_log_cut_under_follow_names_its_own_line(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    for n in range(3):
        log.append(EventType.NOTE, data={"n": n})
    deadline = time.monotonic() + 10  # a bound for a broken follow, not a wait
    feed = log.follow(0, stop=lambda: time.monotonic() > deadline, poll=0.01)
    assert [next(feed).seq for _ in range(3)] == [1, 2, 3]
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(lines[0] + b"{damaged\n" + lines[1])  # shorter than what was read
    with pytest.raises(LogCorrupt) as caught:
        next(feed)
    assert caught.value.line == 2


def test_follow_shows_a_recreated_log_from_its_first_record(tmp_path: Path) -> None:
    """A log moved aside and started again: follow shows the new file from seq 1."""
    log = new_log(tmp_path)
    for n in range(2):
        log.append(EventType.NOTE, data={"n": n})
    deadline = time.monotonic() + 10  # a bound for a broken follow, not a wait
    feed = log.follow(0, stop=lambda: time.monotonic() > deadline, poll=0.01)
    assert [next(feed).seq for _ in range(2)] == [1, 2]
    log.path.rename(log.path.with_name("aside.jsonl"))
    log.append(EventType.NOTE, data={"n": "new"})
    shown = next(feed)
    assert (shown.seq, shown.data) == (1, {"n": "new"})


def test_follow_with_its_default_poll_waits_between_passes(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append(EventType.NOTE)
    passes: list[int] = []

    def stop() -> bool:
        passes.append(1)
        return len(passes) >= 2

    assert [e.seq for e in log.follow(0, stop=stop)] == [1]
    assert len(passes) == 2


def _summed(prefix: bytes) -> bytes:
    """A line whose checksum tail matches its bytes, whatever they are (as the writer sums)."""
    import zlib

    crc = zlib.crc32(b"}", zlib.crc32(prefix))
    return prefix + b', "sum": "' + b"%08x" % crc + b'"}'


def test_a_summed_last_line_with_text_after_its_object_is_a_torn_write_not_damage(
    tmp_path: Path,
) -> None:
    """A checksum can match a line whose JSON object ends early (a write cut and resumed
    over itself): as the last line it is torn and skipped; anywhere else it is damage."""
    log = new_log(tmp_path)
    log.append(EventType.NOTE, data={"word": "kept"})
    odd = _summed(b'{"v": 1} and more')
    with log.path.open("ab") as handle:
        handle.write(odd + b"\n")  # the last line, complete with its newline
    assert [e.data["word"] for e in new_log(tmp_path).read()] == ["kept"]
    first = log.path.read_bytes().split(b"\n")[0]
    with log.path.open("ab") as handle:  # now a record follows it: the odd line is damage
        handle.write(first + b"\n")
    with pytest.raises(LogCorrupt, match="not valid JSON"):
        new_log(tmp_path).read()

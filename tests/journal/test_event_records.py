"""The shape of one event record (issue 18, found by mutation testing): a line whose checksum
holds but whose fields are wrong is corruption wherever it is, never a torn tail, and each
problem is named; values that are not plain JSON are converted once, on the way in."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from loopctl.journal import events as events_module
from loopctl.journal.events import EventLog, LogCorrupt

GOOD: dict[str, Any] = {
    "v": events_module.FORMAT_VERSION,
    "seq": 1,
    "ts": "2026-12-01T00:00:00+00:00",
    "type": "note",
    "run": None,
    "loop": "l",
    "task": None,
    "data": {},
}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"v": "1"}, "missing format version"),
        ({"seq": 0}, "missing or invalid 'seq'"),
        ({"seq": True}, "missing or invalid 'seq'"),
        ({"seq": "1"}, "missing or invalid 'seq'"),
        ({"ts": 5}, "missing or invalid 'ts'"),
        ({"type": None}, "missing or invalid 'type'"),
        ({"run": 1}, "invalid 'run'"),
        ({"loop": ["l"]}, "invalid 'loop'"),
        ({"task": {}}, "invalid 'task'"),
        ({"data": []}, "missing or invalid 'data'"),
    ],
)
@pytest.mark.parametrize("last", [True, False])
def test_a_well_summed_record_of_the_wrong_shape_is_corruption_even_last(
    tmp_path: Path, change: dict[str, Any], reason: str, last: bool
) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.append("note", data={"n": 1})
    bad = events_module._encode({**GOOD, "seq": 2, **change})
    after = b"" if last else events_module._encode({**GOOD, "seq": 3})
    with log.path.open("ab") as handle:
        handle.write(bad + after)

    with pytest.raises(LogCorrupt, match=rf":2: corrupt event log record \({re.escape(reason)}\)"):
        EventLog(log.path).read()
    if last:  # an append reads only the tail: it refuses a bad last line
        with pytest.raises(
            LogCorrupt, match=rf":2: corrupt event log record \({re.escape(reason)}\)"
        ):
            EventLog(log.path).append("note")
        assert log.path.read_bytes().count(b"\n") == 2


def test_a_record_missing_its_run_loop_or_task_key_is_malformed(tmp_path: Path) -> None:
    # loopctl always writes all three (None when absent); a line without one was not written by
    # it, checksum or not.
    log = EventLog(tmp_path / "events.jsonl")
    log.path.parent.mkdir(parents=True, exist_ok=True)
    for key in ("run", "loop", "task"):
        record = {k: v for k, v in GOOD.items() if k != key}
        log.path.write_bytes(events_module._encode(record))
        with pytest.raises(LogCorrupt, match=r":1: corrupt event log record \(malformed record\)"):
            EventLog(log.path).read()


def test_paths_and_times_in_event_data_are_stored_as_text(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    when = datetime(2026, 12, 1, 10, 30, tzinfo=UTC)
    appended = log.append(
        "note",
        data={"p": PurePosixPath("/a/b"), "d": date(2026, 12, 1), "t": when, "k": (1, 2)},
    )
    expected = {"p": "/a/b", "d": "2026-12-01", "t": "2026-12-01T10:30:00+00:00", "k": [1, 2]}
    assert appended.data == expected
    assert log.read()[0].data == expected
    with pytest.raises(TypeError, match="event data value of type set is not JSON-serialisable"):
        log.append("note", data={"s": {1}})
    with pytest.raises(ValueError, match="event type must be a non-empty string"):
        log.append("")


def test_last_seq_follows_a_torn_tail_and_a_missing_file(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    assert log.last_seq() == 0
    for n in range(3):
        log.append("note", data={"n": n})
    raw = log.path.read_bytes()
    log.path.write_bytes(raw[:-5])  # the last record torn
    assert log.last_seq() == 2
    log.path.write_bytes(raw + b'{"v": 1, "seq": 4')  # a write that died after its first bytes
    assert log.last_seq() == 3
    log.path.write_bytes(b"")
    assert log.last_seq() == 0


@pytest.mark.parametrize("pad", [3000, 5000])
def test_a_torn_last_line_of_a_long_log_is_replaced_after_the_line_before_it(
    tmp_path: Path, pad: int
) -> None:
    # The tail is read back in 8 KB and growing chunks until it holds three newlines: with
    # ~3 KB records the first chunk holds exactly three, with ~5 KB ones only two.
    log = EventLog(tmp_path / "events.jsonl")
    for n in range(6):
        log.append("note", data={"n": n, "pad": "x" * pad})
    with log.path.open("ab") as handle:
        handle.write(b'{"v": 1, "seq": 7, "pad": "' + b"y" * pad + b'", "garbage\n')

    assert log.last_seq() == 6
    assert EventLog(log.path).append("note").seq == 7
    assert [e.seq for e in EventLog(log.path).read()] == list(range(1, 8))


def test_a_torn_second_line_after_a_single_record_is_replaced(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.append("note", data={"n": 1})
    with log.path.open("ab") as handle:
        handle.write(b'{"v": 1, "seq": 2, "garbage\n')

    assert log.last_seq() == 1
    assert EventLog(log.path).append("note").seq == 2
    assert [e.seq for e in EventLog(log.path).read()] == [1, 2]


def test_following_a_log_names_the_right_line_of_damage_appended_later(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    for n in range(3):
        log.append("note", data={"n": n})
    follower = EventLog(log.path).follow(0, stop=lambda: False, poll=0.01)
    assert [next(follower).seq for _ in range(3)] == [1, 2, 3]
    good = events_module._encode({**GOOD, "seq": 5})
    bad = events_module._encode({**GOOD, "seq": 4, "data": []})
    with log.path.open("ab") as handle:
        handle.write(bad + good)

    with pytest.raises(LogCorrupt, match=r":4: corrupt event log record"):
        next(follower)

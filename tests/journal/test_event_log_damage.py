"""Damage to the event log, line by line (issue 18, found by mutation testing).

What a write killed midway can leave on the last line is skipped by readers and cut by the next
append; the same bytes anywhere else are corruption named by path:line, and a record a newer
loopctl wrote is refused wherever it is, never cut. The tail that appends and `last_seq` read
backwards in chunks gives the same answers as a full read at every chunk boundary, and damage
found past the first megabyte is named at its own line.
"""

from __future__ import annotations

import json
import re
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.repos import make_repo

from loopctl.journal import events as events_module
from loopctl.journal.events import Event, EventLog, LogCorrupt
from loopctl.paths import ProjectPaths

WHEN = datetime(2026, 12, 1, 10, 30, tzinfo=UTC)


def _record(seq: int, **change: Any) -> dict[str, Any]:
    """A record as `EventLog.append` writes it (at WHEN), with `change` applied."""
    return {
        "v": events_module.FORMAT_VERSION,
        "seq": seq,
        "ts": WHEN.isoformat(timespec="microseconds"),
        "type": "note",
        "run": None,
        "loop": "l",
        "task": None,
        "data": {},
        **change,
    }


def _summed(prefix: bytes) -> bytes:
    """`prefix` with the checksum tail a writer gives it, whatever the bytes (no newline)."""
    return prefix + b', "sum": "%08x"}' % zlib.crc32(b"}", zlib.crc32(prefix))


def _good_log(tmp_path: Path, count: int = 2) -> tuple[EventLog, list[Event], bytes]:
    log = EventLog(tmp_path / "events.jsonl", clock=lambda: WHEN)
    written = [log.append("note", data={"n": n}) for n in range(count)]
    return log, written, log.path.read_bytes()


# Lines a killed write (or a crash that zero-fills or reorders blocks) can leave complete with
# their newline: each is skipped as the last line and is corruption anywhere else.
_WRONG_SUM = events_module._encode(_record(3)).replace(b'"note"', b'"nope"')[:-1]
TORN: dict[str, tuple[bytes, str]] = {
    "checksum-mismatch": (
        _WRONG_SUM,
        r"checksum '[0-9a-f]{8}' does not match the content \([0-9a-f]{8}\)",
    ),
    "summed-but-cut-json": (_summed(b'{"v": 1, "seq": 3, "type": '), r"not valid JSON"),
    "summed-zero-bytes": (_summed(b"\x00" * 24), r"not valid JSON"),
    "summed-deep-nesting": (_summed(b"[" * 100_000), r"not valid JSON"),
    "summed-not-utf8": (_summed(b'{"v": 1, "seq": 3, "type": "\xff\xfe"'), r"not valid JSON"),
    "json-without-checksum": (json.dumps(_record(3)).encode(), r"no checksum at the end"),
    "text-without-checksum": (b"note seq 3", r"not valid JSON"),
}


@pytest.mark.parametrize("kind", list(TORN))
def test_a_damaged_last_line_is_skipped_then_cut_and_the_log_goes_on(
    tmp_path: Path, kind: str
) -> None:
    log, written, good = _good_log(tmp_path)
    with log.path.open("ab") as handle:
        handle.write(TORN[kind][0] + b"\n")

    assert EventLog(log.path).read() == written
    assert EventLog(log.path).last_seq() == 2
    appended = EventLog(log.path).append("note", data={"after": kind})
    assert appended.seq == 3
    assert log.path.read_bytes() == good + events_module.encode_line(appended)
    assert EventLog(log.path).read() == [*written, appended]


@pytest.mark.parametrize("kind", list(TORN))
def test_the_same_damage_before_the_last_line_is_corruption_named_by_line(
    tmp_path: Path, kind: str
) -> None:
    line, reason = TORN[kind]
    log, _written, good = _good_log(tmp_path)
    after_it = events_module._encode(_record(3))
    log.path.write_bytes(good + line + b"\n" + after_it)
    with pytest.raises(LogCorrupt, match=rf"^{re.escape(str(log.path))}:3: .*\({reason}"):
        EventLog(log.path).read()

    # Followed by a torn line instead, the tail that appends read finds it too, and refuses.
    damaged = good + line + b"\n" + b'{"v": 1, "seq": 4, "ty\n'
    log.path.write_bytes(damaged)
    for attempt in (EventLog(log.path).last_seq, lambda: EventLog(log.path).append("note")):
        with pytest.raises(LogCorrupt, match=rf":3: .*\({reason}") as caught:
            attempt()
        assert caught.value.line == 3
    assert log.path.read_bytes() == damaged


def test_a_summed_line_that_is_not_utf8_is_one_line_from_the_cli_not_a_crash(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    path = ProjectPaths(repo).events_file
    path.parent.mkdir(parents=True, exist_ok=True)
    line, _reason = TORN["summed-not-utf8"]
    path.write_bytes(
        events_module._encode(_record(1)) + line + b"\n" + events_module._encode(_record(2))
    )

    done = run_loopctl(repo, "log")

    assert_clean_exit(done, 1)
    assert done.stderr.strip().splitlines() == [
        f"loopctl: {path}:2: corrupt event log record (not valid JSON); move the file aside or"
        " truncate it at that line"
    ]


def _version_2(tail: bytes) -> bytes:
    return json.dumps(_record(3, v=2)).encode()[:-1] + tail


# Lines a newer loopctl could write: whatever their checksum tail looks like, none is torn.
NEWER: dict[str, bytes] = {
    "summed-as-ours": events_module._encode(_record(3, v=2))[:-1],
    "no-checksum": json.dumps(_record(3, v=2)).encode(),
    "a-longer-checksum": _version_2(b', "sum": "0123456789abcdef"}'),
    "a-checksum-not-last": _version_2(b', "sum": "01234567", "sig": "ab"}'),
    "a-spaced-tail-of-our-length": _version_2(b', "sum": "0123456" }'),
    # As long as our checksum tail less one byte: no marker in it at all.
    "shorter-than-a-tail": b'{"v": 2, "t": "ab"}',
}


@pytest.mark.parametrize("kind", list(NEWER))
def test_a_last_record_from_a_newer_format_is_refused_and_never_cut(
    tmp_path: Path, kind: str
) -> None:
    log, _written, good = _good_log(tmp_path)
    damaged = good + NEWER[kind] + b"\n"
    log.path.write_bytes(damaged)
    refused = (
        rf"^{re.escape(str(log.path))}:3: corrupt event log record \(format version 2,"
        r" this loopctl reads 1; upgrade loopctl\)"
    )

    with pytest.raises(LogCorrupt, match=refused):
        EventLog(log.path).read()
    with pytest.raises(LogCorrupt, match=refused):
        EventLog(log.path).last_seq()
    with pytest.raises(LogCorrupt, match=refused):
        EventLog(log.path).append("note")
    assert log.path.read_bytes() == damaged


def test_the_newer_lines_are_the_shapes_they_claim() -> None:
    # The cases above sit exactly at the edges of the checksum tail check: keep them there.
    tail = events_module._SUM_TAIL
    spaced = NEWER["a-spaced-tail-of-our-length"]
    assert len(spaced) - spaced.rfind(b', "sum": "') == tail
    assert not spaced.endswith(b'"}')
    assert len(NEWER["shorter-than-a-tail"]) == tail - 1
    assert NEWER["a-checksum-not-last"].endswith(b'"}')


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (b"\n" + events_module._encode(_record(1)) + events_module._encode(_record(2)), 1),
        (events_module._encode(_record(1)) + b"\n" + events_module._encode(_record(2)), 2),
    ],
    ids=["first-line", "second-line"],
)
def test_a_blank_line_before_records_is_corruption(
    tmp_path: Path, content: bytes, line: int
) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.path.write_bytes(content)

    with pytest.raises(LogCorrupt, match=rf"^{re.escape(str(log.path))}:{line}: .*not valid JSON"):
        log.read()
    with pytest.raises(LogCorrupt, match=rf":{line}: .*not valid JSON"):
        next(EventLog(log.path).follow(0, stop=lambda: True))


def test_a_lone_blank_line_is_a_torn_write(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.path.write_bytes(b"\n")

    assert log.read() == []
    assert log.last_seq() == 0
    assert log.append("note").seq == 1
    assert [event.seq for event in EventLog(log.path).read()] == [1]


def _padded(size: int) -> dict[str, Any]:
    """Event data that makes a record appended at WHEN as seq 1 exactly `size` bytes long."""
    bare = len(events_module._encode(_record(1, loop=None, data={"pad": ""})))
    assert size >= bare
    return {"pad": "x" * (size - bare)}


_CHUNK = events_module._TAIL_CHUNK
# The tail is read back in chunks of 8 KB, then 16, 32 ...: files the first one, two or three
# reads cover with a byte to spare, exactly, or all but their first one or two bytes.
BOUNDARIES = [
    *(_CHUNK + extra for extra in (-1, 0, 1, 2)),
    *(3 * _CHUNK + extra for extra in (0, 1)),
    7 * _CHUNK + 1,
]
_TORN_LINE = b'{"v": 1, "seq": 2, "garbage\n'


@pytest.mark.parametrize("size", BOUNDARIES)
@pytest.mark.parametrize("torn", [False, True], ids=["alone", "before-a-torn-line"])
def test_the_tail_finds_the_first_record_at_every_chunk_boundary(
    tmp_path: Path, size: int, torn: bool
) -> None:
    # The file is `size` bytes: one record, or one record and a torn line after it.
    log = EventLog(tmp_path / "events.jsonl", clock=lambda: WHEN)
    first = log.append("note", data=_padded(size - len(_TORN_LINE) if torn else size))
    if torn:
        with log.path.open("ab") as handle:
            handle.write(_TORN_LINE)
    assert log.path.stat().st_size == size

    assert EventLog(log.path).last_seq() == 1
    second = EventLog(log.path).append("note")
    assert second.seq == 2
    assert EventLog(log.path).read() == [first, second]


@pytest.mark.parametrize("where", ["last-line", "before-a-torn-line"])
def test_damage_past_the_first_megabyte_is_named_at_its_own_line(
    tmp_path: Path, where: str
) -> None:
    # _corrupt_at counts the newlines before the damage 1 MB at a time: more than one read.
    log = EventLog(tmp_path / "events.jsonl", clock=lambda: WHEN)
    blob = "b" * (64 * 1024)
    count = events_module._TAIL_CHUNK_MAX // len(blob) + 8
    for n in range(count):
        log.append("note", data={"n": n, "blob": blob})
    if where == "last-line":  # well summed, but its loop is not text
        damage = events_module._encode(_record(count + 1, loop=5))
        reason = "invalid 'loop'"
    else:
        damage = _WRONG_SUM + b"\n" + _TORN_LINE
        reason = "checksum"
    with log.path.open("ab") as handle:
        handle.write(damage)
    damaged = log.path.read_bytes()
    assert len(damaged) > events_module._TAIL_CHUNK_MAX + 64 * 1024

    for attempt in (
        EventLog(log.path).last_seq,
        lambda: EventLog(log.path).append("note"),
        EventLog(log.path).read,
    ):
        with pytest.raises(LogCorrupt, match=rf":{count + 1}: corrupt event log record \({reason}"):
            attempt()
    assert log.path.read_bytes() == damaged

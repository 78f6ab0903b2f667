from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import zlib
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.processes import read_line

from loopctl.journal import events as events_module
from loopctl.journal.events import Event, EventLog, EventType, LogCorrupt
from loopctl.paths import ProjectPaths

REPO = Path(events_module.__file__).resolve().parents[1]


def _log(tmp_path: Path) -> EventLog:
    return EventLog(ProjectPaths(tmp_path).events_file)


def _fill(log: EventLog, count: int) -> list[Event]:
    return [log.append(EventType.NOTE, data={"n": n}) for n in range(1, count + 1)]


def _line_spans(raw: bytes) -> list[tuple[int, int]]:
    """(start, end) of each line, end including its newline."""
    spans = []
    start = 0
    while (end := raw.find(b"\n", start)) >= 0:
        spans.append((start, end + 1))
        start = end + 1
    return spans


def test_append_then_read_round_trips(tmp_path: Path) -> None:
    log = _log(tmp_path)
    first = log.append(
        EventType.TICK_STARTED,
        run="r1",
        loop="babysit",
        data={"worktree": tmp_path / "wt", "title": "héllo ✓", "nested": {"xs": (1, 2)}},
    )
    second = log.append("task_found", run="r1", loop="babysit", task="pr-7")

    assert log.read() == [first, second]
    assert first.seq == 1
    assert second.seq == 2
    assert first.type == "tick_started"
    assert first.data == {
        "worktree": str(tmp_path / "wt"),
        "title": "héllo ✓",
        "nested": {"xs": [1, 2]},
    }
    assert second.task == "pr-7"
    assert second.data == {}
    assert log.path.parent.is_dir()
    assert log.last_seq() == 2


def test_each_line_is_a_versioned_record_ending_in_a_crc32_of_its_own_bytes(
    tmp_path: Path,
) -> None:
    log = _log(tmp_path)
    log.append("note", loop="l", data={"b": 1, "a": "ü"})

    raw = log.path.read_bytes()
    assert raw.endswith(b"\n")
    assert raw.count(b"\n") == 1
    record = json.loads(raw)
    assert list(record) == ["v", "seq", "ts", "type", "run", "loop", "task", "data", "sum"]
    body, _, tail = raw.rstrip(b"\n").rpartition(b', "sum": ')
    assert tail == f'"{record["sum"]}"}}'.encode()
    assert record["sum"] == f"{zlib.crc32(body + b'}'):08x}"
    assert record["v"] == 1
    assert record["run"] is None


def test_to_json_is_the_record_without_its_checksum(tmp_path: Path) -> None:
    log = _log(tmp_path)
    event = log.append("note", run="r", data={"k": [1]})

    record = json.loads(log.path.read_bytes())
    del record["sum"]
    assert event.to_json() == record


def test_timestamps_come_from_the_injected_clock_in_utc(tmp_path: Path) -> None:
    moments = iter(
        [
            datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC),
            datetime(2026, 11, 30, 12, 30, 0, 250, tzinfo=UTC),
        ]
    )
    log = EventLog(tmp_path / "events.jsonl", clock=lambda: next(moments))

    log.append("note")
    log.append("note")

    stamps = [event.ts for event in log.read()]
    assert stamps == ["2026-11-30T10:00:00.000000+00:00", "2026-11-30T12:30:00.000250+00:00"]
    assert log.read()[1].time == datetime(2026, 11, 30, 12, 30, 0, 250, tzinfo=UTC)


def test_seq_continues_across_instances_on_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "log" / "events.jsonl"
    one, two = EventLog(path), EventLog(path)

    seqs = [one.append("note").seq, two.append("note").seq, one.append("note").seq]

    assert seqs == [1, 2, 3]
    assert [event.seq for event in EventLog(path).read()] == [1, 2, 3]


def test_unknown_event_types_round_trip(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.append("invented_by_a_later_version", data={"x": 1})

    (event,) = EventLog(log.path).read()
    assert event.type == "invented_by_a_later_version"
    assert event.data == {"x": 1}


def test_missing_file_reads_as_empty(tmp_path: Path) -> None:
    log = _log(tmp_path)

    assert log.read() == []
    assert log.iter_from(0) == []
    assert log.last_seq() == 0
    assert not log.path.exists()


def test_iter_from_returns_only_later_events(tmp_path: Path) -> None:
    log = _log(tmp_path)
    written = _fill(log, 5)

    assert log.iter_from(3) == written[3:]
    assert log.iter_from(0) == written
    assert log.iter_from(5) == []


def test_data_that_is_not_json_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.append("note")

    with pytest.raises(TypeError, match="object"):
        log.append("note", data={"bad": object()})
    with pytest.raises(ValueError, match="not JSON compliant"):
        log.append("note", data={"bad": float("nan")})

    assert log.last_seq() == 1
    assert log.append("note").seq == 2


def test_concurrent_appends_from_threads_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    shared = EventLog(path)
    threads_count, per_thread = 8, 50
    start = threading.Barrier(threads_count)

    def writer(index: int) -> None:
        # Half share one instance (the thread lock), half bring their own (the file lock).
        log = shared if index % 2 else EventLog(path)
        start.wait()
        for n in range(per_thread):
            log.append("note", data={"writer": index, "n": n})

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    _assert_complete(EventLog(path), writers=threads_count, per_writer=per_thread)


def test_concurrent_appends_from_processes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    per_process = 50
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from loopctl.journal.events import EventLog\n"
        "log = EventLog(Path(sys.argv[1]))\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        "for n in range(int(sys.argv[3])):\n"
        "    log.append('note', data={'writer': int(sys.argv[2]), 'n': n})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), str(index), str(per_process)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        for index in range(4)
    ]
    try:
        for child in children:
            assert read_line(child) == "ready"
        for child in children:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.flush()
        for child in children:
            child.communicate(timeout=60)
            assert child.returncode == 0
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()

    _assert_complete(EventLog(path), writers=4, per_writer=per_process)


def _assert_complete(log: EventLog, *, writers: int, per_writer: int) -> None:
    total = writers * per_writer
    raw = log.path.read_bytes()
    assert raw.count(b"\n") == total
    assert all(json.loads(line)["v"] == 1 for line in raw.splitlines())
    read = log.read()
    assert [event.seq for event in read] == list(range(1, total + 1))
    pairs = Counter((event.data["writer"], event.data["n"]) for event in read)
    assert set(pairs.values()) == {1}
    assert len(pairs) == total
    assert log.last_seq() == total


def test_torn_tail_at_every_offset_is_ignored_and_then_cut(tmp_path: Path) -> None:
    source = tmp_path / "source.jsonl"
    written = _fill(EventLog(source), 3)
    raw = source.read_bytes()
    start, end = _line_spans(raw)[-1]
    target = tmp_path / "torn.jsonl"

    for offset in range(start, end):
        target.write_bytes(raw[:offset])
        log = EventLog(target)

        assert log.read() == written[:2], offset
        assert log.last_seq() == 2, offset
        appended = log.append("note", data={"after": offset})
        assert appended.seq == 3, offset
        assert EventLog(target).read() == [*written[:2], appended], offset
        assert target.read_bytes().startswith(raw[:start]), offset


def test_torn_tail_in_records_larger_than_the_tail_chunk(tmp_path: Path) -> None:
    log = _log(tmp_path)
    big = "x" * (3 * events_module._TAIL_CHUNK)
    written = [log.append("note", data={"blob": big, "n": n}) for n in range(3)]
    raw = log.path.read_bytes()
    start, end = _line_spans(raw)[-1]

    for offset in (start + 1, start + events_module._TAIL_CHUNK + 7, end - 1):
        log.path.write_bytes(raw[:offset])
        assert log.read() == written[:2]
        assert log.append("note", data={"blob": big}).seq == 3
        assert [event.seq for event in log.read()] == [1, 2, 3]


def test_a_complete_but_unparsable_last_line_is_ignored_and_replaced(tmp_path: Path) -> None:
    log = _log(tmp_path)
    written = _fill(log, 2)
    with log.path.open("ab") as handle:
        handle.write(b'{"v": 1, "seq": 3, "garbage\n')

    assert log.read() == written
    assert log.last_seq() == 2
    assert log.append("note").seq == 3
    assert [event.seq for event in log.read()] == [1, 2, 3]


def test_a_lone_unparsable_line_leaves_an_empty_log(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.path.parent.mkdir(parents=True)
    log.path.write_bytes(b"\x00\x00\x00\n")

    assert log.read() == []
    assert log.append("note").seq == 1
    assert [event.seq for event in log.read()] == [1]


@pytest.mark.parametrize("last", [b"", b"\n"], ids=["bad-then-fragment", "bad-then-blank-line"])
def test_a_bad_line_followed_by_more_is_corruption_not_a_torn_tail(
    tmp_path: Path, last: bytes
) -> None:
    log = _log(tmp_path)
    _fill(log, 2)
    with log.path.open("ab") as handle:
        handle.write(b"not json\n" + (last or b'{"v": 1, "se'))

    with pytest.raises(LogCorrupt, match=":3: "):
        log.read()
    with pytest.raises(LogCorrupt, match=":3: "):
        log.append("note")


def test_every_bit_flip_in_a_middle_line_is_reported_with_path_and_line(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 10)
    raw = log.path.read_bytes()
    start, end = _line_spans(raw)[2]

    for index in range(start, end - 1):  # every byte but the line's newline
        damaged = bytearray(raw)
        damaged[index] ^= 0x01
        log.path.write_bytes(bytes(damaged))
        with pytest.raises(LogCorrupt) as caught:
            log.read()
        message = str(caught.value)
        assert message.startswith(f"{log.path}:3: corrupt event log record ("), index
        assert message.endswith("; move the file aside or truncate it at that line"), index
        assert caught.value.line == 3


def test_a_wrong_checksum_in_a_middle_line_is_corruption(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 10)
    lines = log.path.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[2])
    record["sum"] = "00000000" if record["sum"] != "00000000" else "11111111"
    lines[2] = (json.dumps(record) + "\n").encode()
    log.path.write_bytes(b"".join(lines))

    with pytest.raises(LogCorrupt, match=r":3: corrupt event log record \(checksum"):
        log.read()


def test_a_seq_out_of_order_is_corruption(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 5)
    lines = log.path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[1]  # a duplicated record: seq 2 again on line 3
    log.path.write_bytes(b"".join(lines))

    with pytest.raises(LogCorrupt, match=r":3: .*seq 2 follows seq 2, expected 3"):
        log.read()


def test_a_record_from_a_newer_format_is_refused_even_last(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 1)
    record: dict[str, Any] = {"v": 2, "seq": 2, "whatever": True}
    with log.path.open("ab") as handle:
        handle.write((json.dumps(record) + "\n").encode())

    with pytest.raises(LogCorrupt, match=r":2: .*format version 2"):
        log.read()


def test_append_reads_only_the_tail(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 5)
    raw = bytearray(log.path.read_bytes())
    raw[5] ^= 0x01  # damage line 1, far from the tail
    log.path.write_bytes(bytes(raw))

    assert log.append("note").seq == 6
    with pytest.raises(LogCorrupt, match=":1: "):
        log.read()


def test_follow_yields_existing_then_new_events_until_stopped(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 3)
    seen: list[int] = []

    for event in log.follow(1, stop=lambda: seen[-1:] == [4], poll=0.01):
        seen.append(event.seq)
        if event.seq == 3:
            log.append("note")

    assert seen == [2, 3, 4]


def test_follow_waits_for_a_line_still_being_written(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 1)
    source = tmp_path / "other.jsonl"
    _fill(EventLog(source), 2)
    second_line = source.read_bytes().splitlines(keepends=True)[1]
    with log.path.open("ab") as handle:
        handle.write(second_line[:10])
    polls = 0

    def stop() -> bool:
        nonlocal polls
        polls += 1
        if polls == 2:
            # The writer finishes its line while the follower waits.
            with log.path.open("ab") as handle:
                handle.write(second_line[10:])
        return polls > 3

    assert [event.seq for event in log.follow(0, stop=stop, poll=0.01)] == [1, 2]


def test_follow_waits_for_the_file_to_appear(tmp_path: Path) -> None:
    log = _log(tmp_path)
    polls = 0

    def stop() -> bool:
        nonlocal polls
        polls += 1
        if polls == 2:
            log.append("note")
        return polls > 3

    assert [event.seq for event in log.follow(0, stop=stop, poll=0.01)] == [1]


def test_repeated_reads_parse_only_new_records_and_agree_with_a_fresh_reader(
    tmp_path: Path,
) -> None:
    log = _log(tmp_path)
    _fill(log, 5)
    first = log.read()
    other = EventLog(log.path)  # another process appends meanwhile
    other.append("note", data={"n": 99})
    with log.path.open("ab") as handle:
        handle.write(b'{"v": 1, "seq": 7, "torn')  # and dies mid-write
    again = log.read()
    assert again[:5] == first
    assert [event.seq for event in again] == [1, 2, 3, 4, 5, 6]
    assert again == EventLog(log.path).read()
    assert log.append("note").seq == 7
    assert log.read() == EventLog(log.path).read()


def test_a_log_rewritten_in_place_is_read_again_from_the_start(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 3)
    assert len(log.read()) == 3
    lines = log.path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"seq"', b'"sqe"', 1)  # damage an already-read record
    log.path.write_bytes(b"".join([*lines, lines[2]]))
    with pytest.raises(LogCorrupt, match=":3:"):
        log.read()


@pytest.mark.parametrize("deleted", [2, 3, 4])
def test_a_record_deleted_from_the_middle_is_corruption(tmp_path: Path, deleted: int) -> None:
    """Every remaining line is intact (its checksum holds): only the seq gap shows the loss."""
    log = _log(tmp_path)
    _fill(log, 5)
    lines = log.path.read_bytes().splitlines(keepends=True)
    del lines[deleted - 1]
    log.path.write_bytes(b"".join(lines))

    expected = rf":{deleted}: .*seq {deleted + 1} follows seq {deleted - 1}, expected {deleted}"
    with pytest.raises(LogCorrupt, match=expected):
        _log(tmp_path).read()


def test_a_log_that_starts_after_seq_1_is_corruption(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 3)
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(b"".join(lines[1:]))

    with pytest.raises(LogCorrupt, match=r":1: .*seq 2 follows seq 0, expected 1"):
        _log(tmp_path).read()

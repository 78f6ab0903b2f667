"""Reading the event log incrementally (EventLog.read keeps where it stopped): what it remembers
of the file must not let a rewritten log or a later damaged line be misread (issue 18)."""

from __future__ import annotations

import json
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

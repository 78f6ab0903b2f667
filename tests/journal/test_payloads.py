"""The typed event payloads against the log: one class per event type, written through a real
recorder and read back equal, and lines in the format loopctl has always written still read.
"""

from __future__ import annotations

import pickle
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest
from support.repos import write_config

from loopctl.definitions import load_project
from loopctl.journal import events as events_module
from loopctl.journal import schema
from loopctl.journal.events import EventLog, EventType
from loopctl.journal.payload import NotePayload, Payload, data_of, read, read_note
from loopctl.journal.recorder import Recorder
from loopctl.usage import MAX_TOKENS

ALL_CLASSES = [
    value
    for value in vars(schema).values()
    if isinstance(value, type)
    and issubclass(value, Payload)
    and value not in (Payload, NotePayload)
]


def test_every_event_type_has_exactly_one_class() -> None:
    types = [cls.TYPE for cls in schema.PAYLOADS]
    assert sorted(types) == sorted(EventType), "an EventType without a class, or one with two"
    for cls in ALL_CLASSES:
        assert isinstance(cls.TYPE, EventType), cls
        assert cls in schema.PAYLOADS or cls in schema.NOTES, f"{cls.__name__} is not listed"


def test_every_note_kind_is_a_note_of_its_own_what() -> None:
    whats = [cls.WHAT for cls in schema.NOTES]
    assert len(whats) == len(set(whats))
    for cls in schema.NOTES:
        assert issubclass(cls, NotePayload)
        assert cls.TYPE is EventType.NOTE


def test_sparse_fields_name_fields() -> None:
    for cls in ALL_CLASSES:
        names = {f.name for f in msgspec.structs.fields(cls)}
        assert names >= cls.SPARSE, cls


def _sample(hint: Any, name: str) -> Any:
    """A value of type `hint` other than any field's default."""
    args = typing.get_args(hint)
    if type(None) in args:
        (hint,) = [a for a in args if a is not type(None)]
        args = typing.get_args(hint)
    origin = typing.get_origin(hint) or hint
    samples: dict[Any, Any] = {str: f"{name}-value", int: 7, float: 1.5, bool: True}
    if hint in samples:
        return samples[hint]
    if hint is Any:
        return {"nested": [1, "two", None]}
    if origin is tuple:
        return ("a", "b") if args[0] is str else ({"argv": ["make"], "exit_code": 0},)
    if origin is dict:
        return {"done": 2} if args[1] is int else {"key": {"nested": [1, 2]}}
    raise AssertionError(f"no sample for {hint!r}")


def _full(cls: type[Payload]) -> Payload:
    hints = typing.get_type_hints(cls)  # Annotated stripped: a reader's field is sampled by type
    values = {
        f.name: _sample(hints[f.name], f.name)
        for f in msgspec.structs.fields(cls)
        if f.name != "extra"
    }
    return cls(**values)


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda cls: cls.__name__)
def test_payloads_are_frozen_values(cls: type[Payload]) -> None:
    sent = _full(cls)
    for f in msgspec.structs.fields(cls):
        with pytest.raises(AttributeError):
            setattr(sent, f.name, None)
    assert sent == _full(cls)
    assert (sent != cls()) == bool(msgspec.structs.fields(cls))
    assert pickle.loads(pickle.dumps(sent)) == sent
    assert cls() == cls()  # defaults made afresh each time, equal
    for f in msgspec.structs.fields(cls):
        if f.default_factory is not msgspec.NODEFAULT:  # a mapping no two payloads share
            assert getattr(cls(), f.name) is not getattr(cls(), f.name)


@pytest.fixture
def recorder(repo: Path) -> Recorder:
    write_config(repo, "version = 1\n")
    return Recorder(load_project(repo))


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda cls: cls.__name__)
def test_written_typed_reads_back_equal(recorder: Recorder, cls: type[Payload]) -> None:
    sent = _full(cls)
    recorder.record(sent, run="r1", loop="ci", task="fix")
    (event,) = EventLog(recorder.paths.events_file).read()  # a fresh reader: from the file
    assert event.type == cls.TYPE
    assert (event.run, event.loop, event.task) == ("r1", "ci", "fix")
    if issubclass(cls, NotePayload):
        assert event.data["what"] == cls.WHAT
        assert read_note(cls, event) == sent
        other = schema.LoopStopped if cls is not schema.LoopStopped else schema.NetworkRefused
        assert read_note(other, event) is None
    else:
        assert read(cls, event) == sent


def test_extra_is_spread_into_data_last(recorder: Recorder) -> None:
    note = schema.Note(what="orphan_killed", extra={"pid": 12})
    recorder.record(note, run="r1", loop="ci")
    (event,) = recorder.log.read()
    assert event.data == {"what": "orphan_killed", "pid": 12}
    assert read(schema.Note, event) == schema.Note(what="orphan_killed")


# The `data` loopctl wrote before payloads were typed (copied from the old keyword producers),
# and the typed payload that now writes the very same thing.
SAME_FORMAT: list[tuple[dict[str, Any], Payload, tuple[str, ...]]] = [
    (
        {"attempt": 1, "verdict": "failed", "reason": "why", "fingerprint": None},
        schema.AttemptFinished(attempt=1, verdict="failed", reason="why", fingerprint=None),
        (),
    ),
    (
        {
            "attempt": 2,
            "verdict": "passed",
            "reason": "ok",
            "fingerprint": None,
            "output_tail": "",
            "fatal": False,
            "tree": None,
            "review": {"x": 1},
        },
        schema.AttemptFinished(
            attempt=2, verdict="passed", reason="ok", fingerprint=None, extra={"review": {"x": 1}}
        ),
        ("output_tail", "fatal", "tree"),
    ),
    (
        {"status": "done", "reason": "", "commit": "abc"},
        schema.TaskFinished(status="done", commit="abc"),
        ("commit",),
    ),
    (
        {"status": "stopped", "reason": "dismissed"},
        schema.TaskFinished(status="stopped", reason="dismissed"),
        (),
    ),
    (
        {"id": "a1", "resolution": "approved", "reason": None},
        schema.InboxClosed(id="a1", resolution="approved"),
        ("reason",),
    ),
    (
        {"what": "network", "mode": "open", "check": True},
        schema.NetworkOpen(mode="open", check=True),
        (),
    ),
    (
        {"what": "sandbox", "mode": "required", "mechanism": "bwrap", "program": None},
        schema.SandboxNote(mode="required", mechanism="bwrap"),
        ("mechanism", "program"),
    ),
    (
        {"item": "i1", "channel": "webhook", "attempts": 3, "error": None},
        schema.Notified(item="i1", channel="webhook", attempts=3),
        (),
    ),
    (
        {
            "attempt": 1,
            "role": "maker",
            "agent": "a",
            "backend": "command",
            "request_model": None,
            "output_tail": "",
            "status": "ok",
            "exit_code": 0,
            "duration_s": 1.0,
            "input_tokens": None,
            "output_tokens": None,
            "cached_tokens": None,
            "cost_usd": None,
            "session_id": None,
            "text": "",
            "model": "m",
        },
        schema.AgentFinished(
            attempt=1,
            role="maker",
            agent="a",
            backend="command",
            status="ok",
            exit_code=0,
            duration_s=1.0,
            extra={"model": "m"},
        ),
        (),
    ),
]


@pytest.mark.parametrize(("old", "typed", "keep"), SAME_FORMAT)
def test_typed_payloads_write_the_old_format(
    old: dict[str, Any], typed: Payload, keep: tuple[str, ...]
) -> None:
    assert data_of(typed, keep) == old
    assert list(data_of(typed, keep)) == list(old)  # in the same order, too


# Whole lines as older loopctl versions wrote them (checksummed), read by today's classes.
OLD_LINES: list[tuple[dict[str, Any], type[Payload], Payload]] = [
    (
        {"status": "passed", "reason": "x", "commit": "abc", "attempts": 2},
        schema.TaskFinished,
        schema.TaskFinished(status="passed", reason="x", commit="abc", attempts=2),
    ),
    (
        {"kind": "goal", "maker": "m", "trigger": {"fired": "every"}, "push_remote": {"n": 1}},
        schema.TickStarted,
        schema.TickStarted(kind="goal", maker="m", trigger={"fired": "every"}),
    ),
    (
        {"id": 12, "kind": "failed", "summary": "s", "evidence": "not a mapping"},
        schema.InboxOpened,
        schema.InboxOpened(id="12", kind="failed", summary="s"),
    ),
    (
        {"attempt": 1, "input_tokens": 1e999, "output_tokens": -5, "cost_usd": "1", "new": 1},
        schema.AgentFinished,
        schema.AgentFinished(attempt=1, input_tokens=MAX_TOKENS, output_tokens=None),
    ),
]


def test_old_lines_still_read(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    lines = []
    for seq, (data, cls, _want) in enumerate(OLD_LINES, start=1):
        record = {
            "v": 1,
            "seq": seq,
            "ts": "2026-01-01T00:00:00.000000+00:00",
            "type": cls.TYPE.value,
            "run": "r1",
            "loop": "ci",
            "task": "t",
            "data": data,
        }
        if "input_tokens" in data:  # 1e999, as a log written before usage was checked holds
            lines.append(_with_number(record, "1e999"))
        else:
            lines.append(events_module._encode(record))
    path.write_bytes(b"".join(lines))
    got = EventLog(path).read()
    for event, (_data, cls, want) in zip(got, OLD_LINES, strict=True):
        assert read(cls, event) == want


def _with_number(record: dict[str, Any], literal: str) -> bytes:
    """A checksummed line whose input_tokens is the bare JSON number `literal`."""
    import json
    import zlib

    data = {**record["data"], "input_tokens": "@@"}
    body = json.dumps({**record, "data": data}).replace('"@@"', literal).encode()
    return body[:-1] + b', "sum": "%08x"}\n' % zlib.crc32(body)

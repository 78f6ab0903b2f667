"""The base of the event payload classes (loopctl.journal.schema), and their one tolerant reader
and one writer.

The log outlives the code that wrote it, and an agent may have had a hand in what it holds: `read`
takes whatever an older or newer loopctl (or a hostile process) left in `data` and returns a frozen
value without ever raising. It is driven by each class's field types: a missing key gives the
field's default, a value of the wrong type gives None (or the default), unknown keys are ignored;
token counts and costs go through `loopctl.usage`'s clamps (a field's `read` metadata). `data_of`
writes a payload as the log has always held it: the same keys, values and nesting. A field named
in a class's SPARSE is written only when it differs from its default (the producers that never
set it never wrote it), and a field named `extra` (a mapping) is spread into `data` last.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar, TypeVar

from loopctl.journal.events import Event, EventType
from loopctl.usage import clamp_tokens, clamp_usd

# --- tolerant field readers ----------------------------------------------------------------------


def _data(event: Event) -> Mapping[str, Any]:
    data = event.data
    return data if isinstance(data, Mapping) else {}


def _name(value: object) -> str | None:
    """A non-empty string (an id, a status, a name), or None."""
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    """An integer (an attempt number, an exit code), or None; booleans are not numbers here."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _seconds(value: object) -> float | None:
    """A finite, non-negative number (a duration in seconds), or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # a 400-digit integer
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _mapping(value: object) -> dict[str, Any]:
    """A copy of a JSON object, or {} for anything else."""
    if not isinstance(value, Mapping):
        return {}
    return {str(key): item for key, item in value.items()}


def _counts(value: object) -> dict[str, int]:
    """A JSON object of integers (entries of other types dropped), or {}."""
    return {key: n for key, item in _mapping(value).items() if (n := _int(item)) is not None}


def _records(value: object) -> tuple[dict[str, Any], ...]:
    """The objects of a JSON list (other entries dropped), or () for anything but a list."""
    if not isinstance(value, list | tuple):
        return ()
    return tuple(_mapping(item) for item in value if isinstance(item, Mapping))


def _words(value: object) -> tuple[str, ...] | None:
    """A list of strings (an argv, test names): entries as text; None when not a list."""
    if not isinstance(value, list | tuple):
        return None
    return tuple(item if isinstance(item, str) else str(item) for item in value)


def item_id(value: object) -> str:
    # Ids are short strings; a number written by hand still names an item the way `str` would.
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return ""


def tokens(value: object) -> int | None:
    # Clamped again on reading: a log written before usage was checked may hold 1e999.
    return clamp_tokens(value)


def usd(value: object) -> float | None:
    return clamp_usd(value)


def as_read(reader: Callable[[object], object]) -> dict[str, Any]:
    """Field metadata: read this field with `reader` instead of by its type."""
    return {"read": reader}


# --- the generic reader and writer ---------------------------------------------------------------


class Payload:
    """The base of every event payload class: its event type, and the fields written sparsely."""

    __slots__ = ()
    TYPE: ClassVar[EventType]
    SPARSE: ClassVar[frozenset[str]] = frozenset()


class NotePayload(Payload):
    """A `note` of one kind: written with `what` first, read only from notes of that kind."""

    __slots__ = ()
    TYPE: ClassVar[EventType] = EventType.NOTE
    WHAT: ClassVar[str]


P = TypeVar("P", bound=Payload)
N = TypeVar("N", bound=NotePayload)

_Field = tuple[str, Callable[[object], Any], Any]  # key, reader, default


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _reader_for(hint: Any, default: Any) -> Callable[[object], Any]:
    """How a field of type `hint` is read tolerantly (see the module's docstring)."""
    args = typing.get_args(hint)
    optional = type(None) in args and (
        typing.get_origin(hint) is typing.Union or isinstance(hint, types.UnionType)
    )
    if optional:
        (hint,) = [a for a in args if a is not type(None)]
        args = typing.get_args(hint)
    origin = typing.get_origin(hint) or hint
    if hint is Any:
        return lambda value: value
    if hint is str:
        # Text: the value when it is a non-empty string (an empty one too, for plain text).
        if optional:
            return _name
        return lambda value: value if isinstance(value, str) and value else default
    if hint is bool:
        return lambda value: value is True  # "yes", 1 or a list is not a yes
    if hint is int:
        return (
            _int if optional else (lambda value: v if (v := _int(value)) is not None else default)
        )
    if hint is float:
        return (
            _seconds
            if optional
            else (lambda value: v if (v := _seconds(value)) is not None else default)
        )
    if origin is tuple:
        if args and args[0] is str:
            return _words if optional else (lambda value: _words(value) or ())
        return _records
    if origin is dict or origin is Mapping:
        if len(args) == 2 and args[1] is int:
            return _counts
        return _mapping
    raise TypeError(f"no tolerant reader for a field of type {hint!r}")


def _fields(cls: type[Payload]) -> tuple[_Field, ...]:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _plan(cls)
    return plan


def _plan(cls: type[Payload]) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    plan: list[_Field] = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        default = _default(f)
        reader = f.metadata.get("read") or _reader_for(hints[f.name], default)
        plan.append((f.name, reader, default))
    return tuple(plan)


def read(cls: type[P], event: Event) -> P:
    """The payload of `event` as a `cls`, whatever wrote it; never raises."""
    data = _data(event)
    values = {}
    for key, reader, default in _fields(cls):
        value = data.get(key, _ABSENT)
        values[key] = default if value is _ABSENT else reader(value)
    return cls(**values)


def read_note(cls: type[N], event: Event) -> N | None:
    """The payload of a note of `cls`'s kind, or None for any other event."""
    if event.type != EventType.NOTE or _data(event).get("what") != cls.WHAT:
        return None
    return read(cls, event)


def data_of(payload: Payload, keep: Collection[str] = ()) -> dict[str, Any]:
    """The `data` that `payload` is written as; `keep` names SPARSE fields to write even at
    their default (a producer that always wrote them)."""
    data: dict[str, Any] = {}
    if isinstance(payload, NotePayload):
        data["what"] = payload.WHAT
    extra: Mapping[str, Any] = {}
    sparse = payload.SPARSE
    for key, _reader, default in _fields(type(payload)):
        value = getattr(payload, key)
        if key == "extra":
            extra = value
        elif key not in sparse or key in keep or value != default:
            data[key] = list(value) if isinstance(value, tuple) else value
    data.update(extra)
    return data


_ABSENT = object()
# Each class's fields as (key, reader, default), worked out on first use.
_PLANS: dict[type[Payload], tuple[_Field, ...]] = {}

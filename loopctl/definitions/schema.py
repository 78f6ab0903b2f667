"""Definition keys as data: each key is described once (a `Field`) and read by `read`.

A loader lists the fields of a table in the order they are read (the order its problems are
reported in), reads them with `read`, and keeps only what no single field can say: rules across
keys ("give 'command' or 'commands', not both") and building its frozen dataclass. The `Table`
accessors stay the one place that knows a kind's error text and `path:line`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from loopctl.definitions.fields import Table

Values = dict[str, Any]
# How a kind of value is read: a Table accessor given the field and its default.
Kind = Callable[[Table, "Field", Any], Any]
# A validator: may report problems for a value that was read (never called with None).
Check = Callable[[Table, str, Any], None]


@dataclass(frozen=True, slots=True)
class Field:
    """One key of a definition table: its kind, default, allowed values and validator."""

    key: str
    kind: Kind
    default: Any = None
    attr: str | None = None  # the name in the values read (default: the key, '-' as '_')
    choices: tuple[str, ...] | None = None
    minimum: float = 0
    max_len: int | None = None
    required: bool = False
    single: bool = True  # a lone string counts as a one-item list
    blank_default: bool = False  # an empty value ("" or []) falls back to the default
    if_present: bool = False  # read (and known) only when the file has the key
    check: Check | None = None

    @property
    def name(self) -> str:
        return self.attr or self.key.replace("-", "_")


def read(table: Table, fields: Iterable[Field], **defaults: Any) -> Values:
    """Read `fields` in order; `defaults` replace a field's own default, by name."""
    values: Values = {}
    for field in fields:
        values[field.name] = read_field(table, field, defaults.get(field.name, field.default))
    return values


def read_field(table: Table, field: Field, default: Any) -> Any:
    """One field's value: read as its kind says, then checked by its validator."""
    if field.if_present and not table.has(field.key):
        return default
    value = field.kind(table, field, default)
    if field.blank_default and value in ("", ()):
        value = default
    if field.check is not None and value is not None:
        field.check(table, field.key, value)
    return value


def read_table(parent: Table, key: str, fields: Iterable[Field], **defaults: Any) -> Values | None:
    """A sub-table read whole and finished; None when the file has no such table."""
    table = parent.table(key)
    if table is None:
        return None
    values = read(table, fields, **defaults)
    table.finish()
    return values


# --- kinds --------------------------------------------------------------------------------------


def string(table: Table, field: Field, default: Any) -> str | None:
    return table.string(
        field.key, default, required=field.required, choices=field.choices, max_len=field.max_len
    )


def integer(table: Table, field: Field, default: Any) -> int | None:
    return table.integer(field.key, default, minimum=int(field.minimum))


def number(table: Table, field: Field, default: Any) -> float | None:
    return table.number(field.key, default, minimum=float(field.minimum))


def boolean(table: Table, field: Field, default: Any) -> bool:
    return table.boolean(field.key, default)


def strings(table: Table, field: Field, default: Any) -> tuple[str, ...]:
    return table.string_list(field.key, allow_single=field.single)


def globs(table: Table, field: Field, default: Any) -> tuple[str, ...]:
    return table.glob_list(field.key)


def command(table: Table, field: Field, default: Any) -> tuple[str, ...] | None:
    return table.argv(field.key, required=field.required)


def commands(table: Table, field: Field, default: Any) -> tuple[tuple[str, ...], ...]:
    return table.argv_list(field.key)


def duration(table: Table, field: Field, default: Any) -> float | None:
    return table.duration(field.key, default)


def size(table: Table, field: Field, default: Any) -> int | None:
    return table.size(field.key, default)


def folders(table: Table, field: Field, default: Any) -> tuple[str, ...] | None:
    return table.relative_paths(field.key)


def subtable(table: Table, field: Field, default: Any) -> Table | None:
    """A table whose keys are the user's own names (read by the loader, key by key)."""
    return table.table(field.key)


def accepted(table: Table, field: Field, default: Any) -> Any:
    """A key kept for another tool: known (never "unknown"), never read."""
    table.known(field.key)
    return default


def refused(why: str) -> Kind:
    """A key this definition must not have: an error saying `why`, when present."""

    def kind(table: Table, field: Field, default: Any) -> Any:
        if table.has(field.key):
            table.known(field.key)
            table.error(field.key, f"{table.where(field.key)}: {why}")
        return default

    return kind


def declared(fields: Iterable[Field]) -> tuple[str, ...]:
    """The keys `fields` describe, in order."""
    return tuple(field.key for field in fields)

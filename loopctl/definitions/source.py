"""Reading definition files safely and knowing which line each key is on.

tomllib and yaml give values but no positions; error messages must say `path:line`, so this
module keeps a cheap index from key paths to line numbers next to every parsed document.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopctl.errors import Problem

MAX_DEFINITION_BYTES = 1024 * 1024  # a definition larger than this is a mistake, not a loop

KeyPath = tuple[str, ...]
Locate = Callable[[KeyPath], int | None]


@dataclass(slots=True)
class Problems:
    """Collects every problem found so `validate` can report all of them at once."""

    items: list[Problem] = field(default_factory=list)

    def error(self, path: Path | None, line: int | None, message: str) -> None:
        self.items.append(Problem(path, line, message, "error"))

    def warn(self, path: Path | None, line: int | None, message: str) -> None:
        self.items.append(Problem(path, line, message, "warning"))

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.items if p.is_error]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.items if not p.is_error]


def read_definition_text(path: Path, problems: Problems) -> str | None:
    """Return the file's text, or None after recording why it cannot be used."""
    try:
        if path.is_dir():
            problems.error(path, None, "is a directory, expected a file")
            return None
        with path.open("rb") as handle:
            raw = handle.read(MAX_DEFINITION_BYTES + 1)
    except OSError as exc:
        problems.error(path, None, f"cannot read file: {exc.strerror or exc}")
        return None
    if len(raw) > MAX_DEFINITION_BYTES:
        problems.error(
            path, None, f"file is larger than {MAX_DEFINITION_BYTES // 1024} KiB; not a definition"
        )
        return None
    if b"\x00" in raw:
        line = raw[: raw.index(b"\x00")].count(b"\n") + 1
        problems.error(path, line, "binary file (contains NUL bytes); expected UTF-8 text")
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        problems.error(
            path, line, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x}); save it as UTF-8"
        )
        return None
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        problems.error(path, None, "file is empty")
        return None
    return text


# --- TOML -------------------------------------------------------------------------------------

_TOML_ERROR_POS = re.compile(r"\(at line (\d+), column (\d+)\)")
_BARE_KEY = r"[A-Za-z0-9_-]+"
_QUOTED_KEY = r"\"(?:[^\"\\]|\\.)*\"|'[^']*'"
_KEY = rf"(?:{_BARE_KEY}|{_QUOTED_KEY})"
_DOTTED_KEY = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_TABLE_HEADER = re.compile(rf"^\s*\[\[?\s*({_DOTTED_KEY})\s*\]\]?\s*(?:#.*)?$")
_KEY_VALUE = re.compile(rf"^\s*({_DOTTED_KEY})\s*=")
_KEY_PART = re.compile(_KEY)


def _split_dotted(dotted: str) -> KeyPath:
    parts: list[str] = []
    for match in _KEY_PART.finditer(dotted):
        token = match.group(0)
        if token[:1] in "\"'":
            token = token[1:-1]
        parts.append(token)
    return tuple(parts)


def toml_key_lines(text: str) -> dict[KeyPath, int]:
    """Map each key path (table headers and keys) to the first line it appears on."""
    lines: dict[KeyPath, int] = {}
    table: KeyPath = ()
    open_multiline: str | None = None
    depth = 0  # open brackets/braces of a value that spans lines
    for number, raw in enumerate(text.splitlines(), start=1):
        if open_multiline is not None:
            if raw.count(open_multiline) % 2 == 1:
                open_multiline = None
            continue
        if depth > 0:
            depth = max(depth + _bracket_balance(raw), 0)
            continue
        header = _TABLE_HEADER.match(raw)
        if header and not _KEY_VALUE.match(raw):
            table = _split_dotted(header.group(1))
            lines.setdefault(table, number)
            continue
        pair = _KEY_VALUE.match(raw)
        if not pair:
            continue
        key = (*table, *_split_dotted(pair.group(1)))
        lines.setdefault(key, number)
        rest = raw[pair.end() :]
        for quote in ('"""', "'''"):
            if rest.count(quote) % 2 == 1:
                open_multiline = quote
                break
        else:
            depth = max(_bracket_balance(rest), 0)
    return lines


_STRING = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")


def _bracket_balance(text: str) -> int:
    """Opened minus closed brackets and braces outside strings and comments."""
    bare = _STRING.sub("", text).split("#", 1)[0]
    return bare.count("[") + bare.count("{") - bare.count("]") - bare.count("}")


def locator(lines: dict[KeyPath, int]) -> Locate:
    """Find the line of a key, falling back to the nearest enclosing table."""

    def locate(path: KeyPath) -> int | None:
        for cut in range(len(path), 0, -1):
            found = lines.get(path[:cut])
            if found is not None:
                return found
        return None

    return locate


@dataclass(frozen=True, slots=True)
class ParsedDoc:
    """A parsed definition: its data and how to find a key's line."""

    path: Path
    data: dict[str, Any]
    locate: Locate
    body: str = ""  # Markdown body after front matter; empty for TOML


def parse_toml(path: Path, problems: Problems) -> ParsedDoc | None:

    text = read_definition_text(path, problems)
    if text is None:
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        where = _TOML_ERROR_POS.search(message)
        line = int(where.group(1)) if where else None
        reason = _TOML_ERROR_POS.sub("", message).strip().rstrip(".")
        problems.error(path, line, f"invalid TOML: {reason}")
        return None
    except RecursionError:
        problems.error(path, None, "invalid TOML: nested too deeply")
        return None
    return ParsedDoc(path, data, locator(toml_key_lines(text)))


# --- Markdown with YAML front matter -------------------------------------------------------------

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_YAML_TOP_KEY = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_-]*)\s*:")


def parse_front_matter(path: Path, problems: Problems) -> ParsedDoc | None:
    text = read_definition_text(path, problems)
    if text is None:
        return None
    match = _FRONT_MATTER.match(text)
    if match is None:
        if text.startswith("---"):
            problems.error(path, 1, "front matter is not closed: add a line `---` after it")
        else:
            problems.error(path, 1, "missing YAML front matter: the file must start with `---`")
        return None
    # lazy: pyyaml is read only when a YAML definition exists (bench/startup.py, validate)
    import yaml

    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        problems.error(path, line, f"invalid YAML front matter: {problem}")
        return None
    except RecursionError:
        problems.error(path, 1, "invalid YAML front matter: nested too deeply")
        return None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        problems.error(path, 2, "front matter must be a mapping of `key: value` lines")
        return None
    key_lines: dict[KeyPath, int] = {}
    for offset, raw in enumerate(match.group(1).splitlines(), start=2):
        top = _YAML_TOP_KEY.match(raw)
        if top:
            key_lines.setdefault((top.group(1),), offset)
    for key in list(data):
        if not isinstance(key, str):
            problems.error(
                path,
                _line_of_scalar_key(match.group(1), key),
                f"front matter key {key!r} is not a string (YAML reads yes/no/on/off as booleans;"
                " quote it)",
            )
            return None
    body = text[match.end() :]
    return ParsedDoc(path, data, locator(key_lines), body)


_YAML_BOOL_WORDS = {
    True: ("y", "yes", "true", "on"),
    False: ("n", "no", "false", "off"),
}


def _line_of_scalar_key(front: str, key: object) -> int | None:
    """Where a key YAML turned into a non-string (`on:` → True) sits in the front matter."""
    words = _YAML_BOOL_WORDS.get(key, ()) if isinstance(key, bool) else (str(key),)
    for offset, raw in enumerate(front.splitlines(), start=2):
        head = raw.split(":", 1)[0].strip().strip("\"'").lower()
        if ":" in raw and not raw.startswith((" ", "\t")) and head in words:
            return offset
    return None

"""The guide as the tests read it: README.md and the pages of docs/, and the commands they show.

Facts moved from README.md into docs/ (issue 29), so a test that pins a documented fact reads
`guide_text()` (README and every page) or `page(NAME)`, never README.md alone.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def pages() -> list[Path]:
    """README.md, then every page of the guide, in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def guide_text() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in pages())


@dataclass(frozen=True, slots=True)
class Shown:
    """One shell command line the guide shows, where it shows it."""

    where: str
    line: str


_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_SHELLS = frozenset({"console", "bash", "sh", "shell"})


def _indented_blocks(text: str) -> list[str]:
    # README keeps indented blocks (its first one is what CI runs; tests/test_readme.py).
    outside = _FENCE.sub("", text)
    return [m.group(1) for m in re.finditer(r"(?:^|\n)\n((?:    \S.*\n?)+)", outside)]


def _lines_of(block: str, *, console: bool) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in block.splitlines():
        if console:
            if pending:
                line = raw
            elif raw.startswith("$ "):
                line = raw[2:]
            else:
                continue  # output, not a command
        else:
            line = raw.removeprefix("$ ")
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def shown_commands() -> list[Shown]:
    """Every command line of a console/bash block in docs/*.md and of README's indented blocks."""
    found: list[Shown] = []
    for path in pages():
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT).as_posix()
        for match in _FENCE.finditer(text):
            if match.group(1) in _SHELLS:
                console = match.group(1) == "console"
                found += [Shown(where, x) for x in _lines_of(match.group(2), console=console)]
        if path == README:
            for block in _indented_blocks(text):
                dedented = "\n".join(line[4:] for line in block.splitlines())
                found += [Shown(where, x) for x in _lines_of(dedented, console=False)]
    return found


_FENCED_OR_INDENTED = re.compile(r"^```.*?^```|^    .*?$", re.DOTALL | re.MULTILINE)
_SPAN = re.compile(r"(`+)((?:\.venv/bin/)?loopctl [^`]+?)\1")


def inline_commands() -> list[Shown]:
    """Every `loopctl …` code span in running text and tables (synopses like `[--json]` too)."""
    found: list[Shown] = []
    for path in pages():
        text = _FENCED_OR_INDENTED.sub("", path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT).as_posix()
        for match in _SPAN.finditer(text):
            found.append(Shown(where, match.group(2).replace("\\|", "|")))
    return found


_OPERATORS = frozenset({"&&", "||", "|", ";", "&"})
_REDIRECTS = frozenset({">", ">>", "<", "2>", "&>"})


def loopctl_invocations(line: str) -> list[list[str]]:
    """The argument lists after `loopctl` of each simple command in a shell line.

    `a && loopctl x | y` holds one; a leading `VAR=value` and `.venv/bin/loopctl` count too.
    """
    if re.search(r"\s[\[(]-", line):
        # A synopsis (`loopctl inbox show ID [--stat] [--json]`, `(--a X | --b)`): every optional
        # part given, the first of `a|b` alternatives (the pipe then splits off the rest, which
        # is no loopctl).
        for bracket in "[]()":
            line = line.replace(bracket, "")
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = list(lexer)
    commands: list[list[str]] = [[]]
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _OPERATORS:
            commands.append([])
        elif word in _REDIRECTS:
            skip = True
        else:
            commands[-1].append(word)
    found = []
    for words in commands:
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            words = words[1:]
        if words and (words[0] == "loopctl" or words[0].endswith("/loopctl")):
            found.append(words[1:])
    return found

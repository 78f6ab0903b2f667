"""Text an agent wrote, made safe to store and to show a human.

An agent's question, result, summary or check output ends up on the approver's terminal and in
INBOX.md/STATE.md. Terminal control sequences in it could clear the screen and draw a fake
"all checks passed"; Markdown or Rich markup in it could pose as loopctl's own words. So agent
text loses its control characters before it is stored, and is escaped for the medium it is
rendered in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Whole escape sequences go, not only their ESC byte: "\x1b[2J" must not leave "[2J" behind.
# CSI (ESC [ or the C1 byte 0x9b), then OSC/DCS/SOS/PM/APC strings up to their terminator,
# then any other two-byte ESC sequence.
_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -~]?"
)
# C0 except tab and newline, DEL, C1; and the bidirectional overrides that make text read
# differently from what it is ("Trojan Source").
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~])")
# Only punctuation can be backslash-escaped: "1." is kept from being a list as "1\.".
_LINE_START = re.compile(r"^(\s*\d*)([#+\-=.)])", re.M)


def strip_controls(text: str) -> str:
    """`text` without terminal control sequences or control characters (newline and tab stay)."""
    if text.isprintable():
        return text  # the common case, and much faster than two regex passes
    text = text.replace("\r\n", "\n")
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))


def shorten(text: str, width: int) -> str:
    """`text` on one line in at most `width` characters, cut at a word boundary with "…" (a
    single word longer than `width` is cut inside it: there is no boundary to cut at)."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    cut = flat[: max(0, width - 1)]
    space = cut.rfind(" ")
    if flat[len(cut)] != " " and space > width // 3:
        cut = cut[:space]  # the cut fell inside a word: drop that word's start
    return cut.rstrip(" ,;:.-") + "…"


def clean_data(value: Any) -> Any:
    """A JSON-shaped value with `strip_controls` applied to every string in it, keys included."""
    if isinstance(value, str):
        return strip_controls(value)
    if isinstance(value, Mapping):
        return {clean_data(k) if isinstance(k, str) else k: clean_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_data(v) for v in value]
    return value


def escape_markdown(text: str) -> str:
    """Plain text for a Markdown paragraph: no emphasis, links, HTML, code, tables or headings."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", strip_controls(text))
    return _LINE_START.sub(_escape_line_start, escaped)


def _escape_line_start(match: re.Match[str]) -> str:
    lead, mark = match.group(1), match.group(2)
    # "#", "+", "-", "=" open a heading, list or rule by themselves; "." and ")" only after digits.
    if mark in ".)" and not lead.strip():
        return match.group(0)
    return f"{lead}\\{mark}"


def code_span(text: str) -> str:
    """`text` as one Markdown code span that nothing inside it can close."""
    flat = " ".join(strip_controls(text).split())
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    # A span that starts or ends with a backtick needs a space to keep it apart from the fence.
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def code_block(text: str) -> list[str]:
    """`text` as the lines of a fenced Markdown code block that nothing inside it can close."""
    body = strip_controls(text)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(4, longest + 1)
    return [fence, body, fence]

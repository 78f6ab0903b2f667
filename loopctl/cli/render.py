"""Output helpers shared by commands: versioned JSON, plain or rich tables."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

JSON_VERSION = 1


def format_json(kind: str, payload: Any, also: dict[str, Any] | None = None) -> str:
    """`{"version": 1, kind: payload}` as text, the shape every --json output has (with the
    keys of `also` beside `kind`: what a listing says of its whole, as `status` of `up`)."""
    document = {"version": JSON_VERSION, kind: payload, **(also or {})}
    return json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n"


def print_json(kind: str, payload: Any, also: dict[str, Any] | None = None) -> None:
    """Print `{"version": 1, kind: payload}`, the shape every --json output has."""
    sys.stdout.write(format_json(kind, payload, also))


# Columns that hold an outcome, and the words that colour it (on a terminal, unless NO_COLOR).
_OUTCOME_HEADERS = ("STATE", "STATUS", "LAST RUN", "OUTCOME", "VERDICT", "RESULT")
_STYLES = {
    "green": ("done", "passed", "ok", "met", "approved", "succeeded", "success"),
    "red": (
        *("failed", "error", "timeout", "rejected", "refused", "invalid", "crashed"),
        # the outcomes a human must act on (journal.outcomes)
        *("repeated-failure", "budget-stop", "stalled", "tampered", "crashed-recovered"),
    ),
    "yellow": (
        "running",
        "interrupted",
        "stopped",
        "paused",
        "awaiting_approval",
        "awaiting_reply",
        "open",
        "skipped",
        "unknown",
        "needs-approval",
        "needs-reply",
        "waiting-for-review",
        "rate-limited",
    ),
}
_STYLE_OF = {word: style for style, words in _STYLES.items() for word in words}


def outcome_style(header: str, cell: str) -> str | None:
    """The colour of a table cell: pass green, fail red, in between yellow; None for others."""
    if not any(word in header.upper() for word in _OUTCOME_HEADERS):
        return None
    first = cell.strip().split(" ", 1)[0].strip(",:;()").lower()
    return _STYLE_OF.get(first)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, empty: str) -> None:
    """A table for people: rich on a terminal, aligned plain text when piped."""
    if not rows:
        print(empty)
        return
    from loopctl.text import strip_controls

    # Cells hold agent text (summaries, task titles): no escape sequences reach the terminal.
    rows = [[strip_controls(str(cell)) for cell in row] for row in rows]
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(show_edge=False, header_style="bold", pad_edge=False)
        for header in headers:
            table.add_column(header, overflow="fold")
        for row in rows:
            # Text, not str: "[bold red]…[/]" in a summary is shown, never interpreted as markup.
            table.add_row(
                *(
                    Text(cell, style=outcome_style(header, cell) or "")
                    for header, cell in zip(headers, row, strict=False)
                )
            )
        Console().print(table)  # rich leaves colour out when NO_COLOR is set
        return
    widths = [len(h) for h in headers]
    for row in rows:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(str(cell)))
    lines = [headers, *rows]
    for row in lines:
        cells = [str(cell).ljust(widths[i]) for i, cell in enumerate(row)]
        print("  ".join(cells).rstrip())


def human_bytes(count: int) -> str:
    """A size for people: "512 B", "3.4 MB", "1.2 GB" (powers of 1000, as `du --si`)."""
    size = float(count)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"

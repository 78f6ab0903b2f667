"""The dashboard's word on backends a rate limit, a quota or an overload pauses (issue 30).

The loops page lists each pause in force (journal.pauses, as `status` folds it): the backend,
until when, what the backend said, and the loops it holds, which resume by themselves.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from loopctl.journal.pauses import Pause
from loopctl.text import strip_controls


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def paused_section(paused: Sequence[tuple[Pause, Sequence[str]]]) -> str:
    """The backends a rate limit pauses: which, until when, in the backend's own words, and the
    loops that wait for it (they resume by themselves)."""
    if not paused:
        return ""
    items = "".join(
        f'<li data-backend="{esc(pause.backend)}" data-until="{esc(pause.until_text())}">'
        f"<b>{esc(pause.describe())}</b>"
        f" — <q>{esc(strip_controls(pause.said))}</q>"
        f"<br><small>holds {esc(', '.join(loops) or 'no loop here')}; they resume by"
        " themselves</small></li>"
        for pause, loops in paused
    )
    return f"<section id=paused><h2>Paused backends</h2><ul class=plain>{items}</ul></section>"

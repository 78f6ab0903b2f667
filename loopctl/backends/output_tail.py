"""The last readable lines an agent printed, for the event recorded when its turn ends.

"maker failed" says nothing; "error: Not logged in · Please run /login" says what to fix. The
engine records this tail on `agent_finished`, and the progress line, `inbox show`, `replay` and
STATE.md show it with the attempt's folder, where the whole output is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from loopctl.backends.streams import render

if TYPE_CHECKING:
    from loopctl.backends.base import AgentRequest

TAIL_LINES = 8
_READ_BYTES = 32 * 1024


def _last_bytes(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - _READ_BYTES))
            data = handle.read()
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    # Read from the middle of a line: that fragment could be half a JSON event, so it goes.
    return text.split("\n", 1)[1] if size > _READ_BYTES and "\n" in text else text


def agent_output_tail(request: AgentRequest, lines: int = TAIL_LINES) -> str:
    """The last `lines` readable lines of an agent's stdout then stderr, redacted, one per line.

    JSON event streams are rendered (`backends.streams`); stderr keeps at least half the lines,
    since that is where a CLI says why it stopped.
    """
    backend, redactor = str(request.agent.backend), request.redactor

    def shown(path: Path | None) -> list[str]:
        text = _last_bytes(path)
        if redactor is not None:  # the capture files are redacted already; this is a second lock
            text = redactor.redact(text)
        return [line for raw in text.splitlines() if (line := render(backend, raw))]

    out, err = shown(request.stdout_path), shown(request.stderr_path)
    err_share = min(len(err), max(lines // 2, lines - len(out)))
    out_share = lines - err_share
    kept = (out[-out_share:] if out_share > 0 else []) + (err[-err_share:] if err_share else [])
    return "\n".join(kept)


def last_line(stdout_path: Path | None, stderr_path: Path | None, backend: str = "command") -> str:
    """The last readable line a program printed, from whichever of its two capture files was
    written last (each is written as output arrives); "" when it printed nothing readable.

    What a stalled turn or check last did, for the inbox: a JSON event stream's line rendered
    as `backends.streams` renders it ("edit calc.py", "$ pytest -q").
    """

    def written(path: Path | None) -> int:
        try:
            return path.stat().st_mtime_ns if path is not None else -1
        except OSError:
            return -1

    ordered = sorted((stdout_path, stderr_path), key=written, reverse=True)
    for path in dict.fromkeys(ordered):
        lines = [line for raw in _last_bytes(path).splitlines() if (line := render(backend, raw))]
        if lines:
            return lines[-1]
    return ""

"""`loopctl traces export`: rebuild one run's spans from the event log and write or send them.

The spans have the same ids as the live ones (`journal/traces.py` builds both), so an export
after the fact joins a trace a collector already holds.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from loopctl.definitions.traces import TraceExporter
from loopctl.errors import LoopctlError, UsageError
from loopctl.journal.events import EventLog
from loopctl.journal.history import find_run
from loopctl.journal.otel import (
    OtelSender,
    TraceSettings,
    env_redactor,
    prompt_reader,
    quiet_otel_logging,
)
from loopctl.journal.traces import build_trace
from loopctl.paths import ProjectPaths


@dataclass(frozen=True, slots=True)
class ExportResult:
    run: str
    loop: str | None
    spans: int
    metric_points: int
    unfinished: int  # spans closed at the run's last event because it never finished
    destination: str

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "loop": self.loop,
            "spans": self.spans,
            "metric_points": self.metric_points,
            "unfinished": self.unfinished,
            "destination": self.destination,
        }


def export_run(
    paths: ProjectPaths,
    run_prefix: str,
    *,
    otlp_json: Path | None = None,
    otlp: bool = False,
    capture_content: bool = False,
) -> ExportResult:
    """Rebuild one run's spans from the log and write them (`-` is stdout) or send them."""
    if (otlp_json is None) == (not otlp):
        raise UsageError("give one destination: --otlp-json FILE (or -), or --otlp")
    events = EventLog(paths.events_file).read()
    view = find_run(events, run_prefix)
    batch = build_trace(
        [e for e in events if e.run == view.run],
        capture_content=capture_content,
        redact=env_redactor(),
        prompts=prompt_reader(paths),
    )
    unfinished = sum(1 for s in batch.spans if s.attributes.get("loopctl.unfinished") is True)
    if otlp:
        settings = TraceSettings(TraceExporter.OTLP, capture_content=capture_content, why="--otlp")
        destination = settings.describe()
        quiet_otel_logging()
        sender = OtelSender(settings)
        try:
            ok = sender.send(batch)
        finally:
            sender.shutdown()
        if not ok:
            raise LoopctlError(
                f"the OTLP endpoint did not accept the spans ({destination}); check"
                " OTEL_EXPORTER_OTLP_ENDPOINT and that the collector is running"
            )
    else:
        assert otlp_json is not None
        settings = TraceSettings(TraceExporter.FILE, otlp_json, capture_content, why="--otlp-json")
        to_stdout = str(otlp_json) == "-"
        destination = "stdout" if to_stdout else str(otlp_json)
        if not to_stdout:
            otlp_json.parent.mkdir(parents=True, exist_ok=True)
        # Written whole, not appended: exporting a run twice gives the same file.
        opened: contextlib.AbstractContextManager[IO[str]] = (
            contextlib.nullcontext(sys.stdout)
            if to_stdout
            else otlp_json.open("w", encoding="utf-8")
        )
        with opened as stream:
            ok = OtelSender(settings, stream=stream).send(batch)
        if not ok:
            raise LoopctlError(f"could not write the spans to {destination}")
    return ExportResult(
        view.run,
        view.loop,
        len(batch.spans),
        len(batch.token_usage),
        unfinished,
        destination,
    )

"""Sending loopctl's traces out through OpenTelemetry: settings, the sender, the live exporter.

Spans and metrics come from `journal.traces` (pure, built from events); this module turns them
into OpenTelemetry SDK objects and hands them to an OTLP/JSON exporter: a file of JSON lines, or
OTLP/HTTP with JSON bodies (no protobuf) to the endpoint the standard OTEL_EXPORTER_OTLP_*
variables name. Nothing from OpenTelemetry is imported unless tracing is on: with it off, the
engine pays one `is None` test per event.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from loopctl._version import __version__
from loopctl.definitions.traces import DEFAULT_TRACES_FILE, TraceExporter, TracesConfig
from loopctl.errors import ExitCode, LoopctlError, UsageError, swallowed
from loopctl.journal.events import Event, EventLog
from loopctl.journal.spans import TOKEN_BUCKETS, TOKEN_METRIC, SpanKind, SpanStatus, TraceBatch
from loopctl.journal.traces import TraceBuilder
from loopctl.secrets import Redactor

if TYPE_CHECKING:
    from loopctl.definitions import Project
    from loopctl.paths import ProjectPaths

logger = logging.getLogger(__name__)

# The extra's packages by their own names: `loopctl[otel]` on the index is someone else's
# project, and this one's distribution (loopctl-runtime) is installed from a clone or git URL.
EXTRA_HINT = (
    "pip install 'opentelemetry-sdk>=1.45,<2' 'opentelemetry-exporter-otlp-json-file>=0.66b1,<0.67'"
    " 'opentelemetry-exporter-otlp-json-http>=0.66b1,<0.67' (the otel extra of loopctl-runtime)"
)
# How long a finishing process waits for spans still being sent (then it gives up on them).
DRAIN_S = 10.0


class TracesUnavailable(LoopctlError):
    """Tracing is asked for but the OpenTelemetry packages (the `otel` extra) are missing."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True, slots=True)
class TraceSettings:
    """Where spans go, resolved from [traces] and the OTEL_* environment."""

    exporter: TraceExporter  # OTLP or FILE (never NONE: then there are no settings)
    file: Path | None = None
    capture_content: bool = False
    metrics: bool = True
    why: str = ""  # what turned tracing on, for error messages

    def describe(self) -> str:
        if self.exporter is TraceExporter.FILE:
            return f"OTLP/JSON lines to {self.file}"
        return f"OTLP/HTTP (JSON) to {_endpoint(os.environ)}"


def _endpoint(environ: Mapping[str, str]) -> str:
    specific = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if specific:
        return specific
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
    return base.rstrip("/") + "/v1/traces"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def trace_settings(
    config: TracesConfig, root: Path, environ: Mapping[str, str] | None = None
) -> TraceSettings | None:
    """The settings in force, or None when tracing is off.

    `OTEL_SDK_DISABLED=true` turns it off; `OTEL_TRACES_EXPORTER` (otlp | none), when set,
    overrides `[traces] exporter`; otherwise `[traces] exporter` decides (default "none").
    """
    env = os.environ if environ is None else environ
    if _truthy(env.get("OTEL_SDK_DISABLED")):
        return None
    exporter = config.exporter
    why = "[traces] exporter in .loop/config.toml"
    chosen = (env.get("OTEL_TRACES_EXPORTER") or "").split(",")[0].strip().lower()
    if chosen == "none":
        return None
    if chosen == "otlp":
        exporter, why = TraceExporter.OTLP, "OTEL_TRACES_EXPORTER=otlp"
    elif chosen:
        raise UsageError(
            f"OTEL_TRACES_EXPORTER={chosen} is not an exporter loopctl has: use otlp or none"
            ' (or [traces] exporter = "file" in .loop/config.toml for OTLP/JSON lines)'
        )
    if exporter is None or exporter is TraceExporter.NONE:
        return None
    file = None
    if exporter is TraceExporter.FILE:
        file = config.file or root / DEFAULT_TRACES_FILE
    capture = config.capture_content or _truthy(
        env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    )
    metrics = config.metrics and (env.get("OTEL_METRICS_EXPORTER") or "").lower() != "none"
    return TraceSettings(exporter, file, capture, metrics, why)


# --- the OpenTelemetry side --------------------------------------------------------------------


class OtelSender:
    """Converts trace batches to SDK objects and exports them; one per destination."""

    def __init__(self, settings: TraceSettings, stream: IO[str] | None = None) -> None:
        try:
            # lazy: the `otel` extra, imported only when traces are exported
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        except ImportError:
            raise TracesUnavailable(
                f"tracing is on ({settings.why or 'asked for'}) but OpenTelemetry is not"
                f' installed: {EXTRA_HINT}, or set [traces] exporter = "none"'
            ) from None

        self.settings = settings
        # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES apply; the name defaults to loopctl.
        made = Resource.create({"service.version": __version__})
        attributes = dict(made.attributes)
        if str(attributes.get("service.name", "")).startswith("unknown_service"):
            attributes["service.name"] = "loopctl"
        if "service.instance.id" not in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
            # A random id per process: spans rebuilt from the log belong to no one process,
            # and exporting a run twice must give the same file.
            attributes.pop("service.instance.id", None)
        self.resource = Resource(attributes, made.schema_url)
        self.scope = InstrumentationScope("loopctl", __version__)
        self._owned: IO[str] | None = None
        self.spans: Any
        self.metrics: Any
        if stream is not None or settings.exporter is TraceExporter.FILE:
            # lazy: the `otel` extra, imported only when traces are exported
            from opentelemetry.exporter.otlp.json.file import FileMetricExporter, FileSpanExporter

            if stream is None:
                assert settings.file is not None
                settings.file.parent.mkdir(parents=True, exist_ok=True)
                stream = self._owned = settings.file.open("a", encoding="utf-8")
            # One stream for both: each export is one whole line, written under one thread.
            self.spans = FileSpanExporter(stream=stream)
            self.metrics = FileMetricExporter(stream=stream)
        else:
            # lazy: the `otel` extra, imported only when traces are exported
            from opentelemetry.exporter.otlp.json.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter

            self.spans = OTLPSpanExporter()
            self.metrics = OTLPMetricExporter()

    def send(self, batch: TraceBatch) -> bool:
        """Export one batch; True when every part of it was accepted."""
        # lazy: the `otel` extra, imported only when traces are exported
        from opentelemetry.sdk.metrics.export import MetricExportResult
        from opentelemetry.sdk.trace.export import SpanExportResult

        ok = True
        if batch.spans:
            spans = [self._span(record) for record in batch.spans]
            ok = self.spans.export(spans) is SpanExportResult.SUCCESS
        if batch.token_usage and self.settings.metrics:
            data = self._metrics(batch)
            ok = self.metrics.export(data) is MetricExportResult.SUCCESS and ok
        return ok

    def shutdown(self) -> None:
        with swallowed(logger, "shutting the span exporter down"):
            self.spans.shutdown()
        with swallowed(logger, "shutting the metric exporter down"):
            self.metrics.shutdown()
        if self._owned is not None:
            self._owned.close()

    def _span(self, record: Any) -> Any:
        # lazy: the `otel` extra, imported only when traces are exported
        from opentelemetry import trace
        from opentelemetry.sdk.trace import Event as SpanEvent
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import Status, StatusCode

        flags = trace.TraceFlags(trace.TraceFlags.SAMPLED)
        tid = int(record.trace_id, 16)
        context = trace.SpanContext(
            tid, int(record.span_id, 16), is_remote=False, trace_flags=flags
        )
        parent = (
            trace.SpanContext(tid, int(record.parent_id, 16), is_remote=False, trace_flags=flags)
            if record.parent_id
            else None
        )
        code = {
            SpanStatus.UNSET: StatusCode.UNSET,
            SpanStatus.OK: StatusCode.OK,
            SpanStatus.ERROR: StatusCode.ERROR,
        }[record.status]
        status = Status(code, record.status_message if code is StatusCode.ERROR else None)
        kind = trace.SpanKind.CLIENT if record.kind is SpanKind.CLIENT else trace.SpanKind.INTERNAL
        # The SDK's own Tracer picks random ids; spans rebuilt from the log need ours.
        return ReadableSpan(
            record.name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=dict(record.attributes),
            events=[SpanEvent(e.name, dict(e.attributes), e.time_ns) for e in record.events],
            kind=kind,
            status=status,
            start_time=record.start_ns,
            end_time=record.end_ns,
            instrumentation_scope=self.scope,
        )

    def _metrics(self, batch: TraceBatch) -> Any:
        # lazy: the `otel` extra, imported only when traces are exported
        from opentelemetry.sdk.metrics.export import (
            AggregationTemporality,
            Histogram,
            HistogramDataPoint,
            Metric,
            MetricsData,
            ResourceMetrics,
            ScopeMetrics,
        )

        points = [
            HistogramDataPoint(
                attributes=dict(p.attributes),
                start_time_unix_nano=p.start_ns,
                time_unix_nano=p.end_ns,
                count=p.count,
                sum=p.sum,
                bucket_counts=list(p.bucket_counts),
                explicit_bounds=[float(b) for b in TOKEN_BUCKETS],
                min=p.min,
                max=p.max,
            )
            for p in batch.token_usage
        ]
        metric = Metric(
            name=TOKEN_METRIC,
            description="Number of input and output tokens used, per agent turn.",
            unit="{token}",
            # One run's turns: a delta, so runs add up however they were sent.
            data=Histogram(points, AggregationTemporality.DELTA),
        )
        scope = ScopeMetrics(self.scope, [metric], schema_url="")
        return MetricsData([ResourceMetrics(self.resource, [scope], schema_url="")])


# --- live: fed by Engine.emit ------------------------------------------------------------------


def env_redactor() -> Callable[[str], str]:
    """Masks every secret of this process's environment in span text."""

    return Redactor.from_environment().redact


def prompt_reader(paths: ProjectPaths) -> Callable[[str, str, int, str], str | None]:
    """Reads the prompt an agent was given from the run's folder (for capture_content)."""

    def read(run: str, task: str, attempt: int, role: str) -> str | None:
        path = paths.runs_dir / run / task / f"attempt-{attempt}" / f"{role}-prompt.md"
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    return read


class LiveTraces:
    """Feeds events to a TraceBuilder as they are appended; a thread sends what it finishes.

    A run this process did not start (resumed, or an approval delivered later) is first
    replayed from the log without sending, so its spans keep their real start times.
    """

    def __init__(self, settings: TraceSettings, log: EventLog, paths: ProjectPaths) -> None:
        self.settings = settings
        self.sender = OtelSender(settings)  # fails here, loudly, if the extra is missing
        self._log = log
        self._builder: TraceBuilder = TraceBuilder(
            capture_content=settings.capture_content,
            redact=env_redactor(),
            prompts=prompt_reader(paths),
        )
        self._known: set[str] = set()
        self._lock = threading.Lock()  # tasks run in parallel threads, each emitting
        self._queue: queue.SimpleQueue[TraceBatch | None] = queue.SimpleQueue()
        self.failures = 0
        self._thread = threading.Thread(target=self._work, name="loopctl-traces", daemon=True)
        self._thread.start()
        self._closed = False
        atexit.register(self.close)

    def __call__(self, event: Event) -> None:
        if event.run is None:
            return
        with self._lock:
            if event.run not in self._known:
                self._known.add(event.run)
                if event.type != "tick_started":
                    for earlier in self._log.read():
                        if earlier.run == event.run and earlier.seq < event.seq:
                            self._builder.feed(earlier)
            batch = self._builder.feed(event)
        if batch:
            self._queue.put(batch)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            batch = item or TraceBatch()
            # Whatever queued up meanwhile goes in the same request.
            while item is not None:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    batch += item
            if batch:
                try:
                    if not self.sender.send(batch):
                        self.failures += 1
                except Exception:  # a collector that misbehaves must not kill the thread
                    self.failures += 1
                    logger.debug("sending traces failed; carrying on", exc_info=True)
            if item is None:
                return

    def close(self, timeout: float = DRAIN_S) -> None:
        """Send what is queued (waiting at most `timeout`), then stop."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout)
        self.sender.shutdown()  # also cuts short an export still retrying
        self._thread.join(1.0)


_LIVE: dict[tuple[object, ...], LiveTraces] = {}
_LIVE_LOCK = threading.Lock()


def live_traces(project: Project, log: EventLog) -> Callable[[Event], None] | None:
    """The sink Engine.emit feeds, or None when tracing is off (the default).

    Engines of one project in one process share a sink, so a run is built in one place.
    """
    settings = trace_settings(project.config.traces, project.paths.root)
    if settings is None:
        return None
    quiet_otel_logging()
    key = (settings, str(log.path))
    with _LIVE_LOCK:
        sink = _LIVE.get(key)
        if sink is None or sink._closed:
            sink = _LIVE[key] = LiveTraces(settings, log, project.paths)
    return sink


def quiet_otel_logging() -> None:
    """The exporters log failures; loopctl's core never prints, so nobody hears them."""

    logger = logging.getLogger("opentelemetry")
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
        logger.propagate = False

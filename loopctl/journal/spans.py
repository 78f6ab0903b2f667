"""Span and metric records after the OpenTelemetry GenAI conventions, their ids, and the helpers
that build one span (attributes redacted, content bounded) for `journal/traces.py`.

Pure: nothing here imports OpenTelemetry (`journal/otel.py` turns these records into SDK objects).
Trace and span ids are hashes of the run id and each span's place in the run, so a live trace and
one rebuilt later are the same trace.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from loopctl import backend_registry
from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import ActionFinished, ActionStarted, read

AttrValue = str | bool | int | float | tuple[str, ...]
Attributes = Mapping[str, AttrValue]

TOKEN_METRIC = "gen_ai.client.token.usage"
# The bucket boundaries the GenAI conventions recommend for token counts.
TOKEN_BUCKETS: tuple[int, ...] = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
MAX_CONTENT = 32_000  # characters of one captured text attribute

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MODEL_PREFIXES = {
    "anthropic": "anthropic",
    "openai": "openai",
    "google": "gcp.gemini",
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "mistral": "mistral_ai",
    "deepseek": "deepseek",
    "groq": "groq",
    "xai": "x_ai",
    "cohere": "cohere",
    "perplexity": "perplexity",
    "azure": "azure.ai.openai",
}


class SpanKind(StrEnum):
    INTERNAL = "internal"
    CLIENT = "client"


class SpanStatus(StrEnum):
    UNSET = "unset"
    OK = "ok"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class SpanEventRecord:
    """Something that happened at a point in a span (a commit, an inbox item, a restart)."""

    name: str
    time_ns: int
    attributes: Attributes


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One finished span; ids are lowercase hex (32 digits for a trace, 16 for a span)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Attributes
    kind: SpanKind = SpanKind.INTERNAL
    status: SpanStatus = SpanStatus.UNSET
    status_message: str = ""
    events: tuple[SpanEventRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class HistogramPoint:
    """One data point of `gen_ai.client.token.usage` (delta over one run)."""

    attributes: Attributes
    start_ns: int
    end_ns: int
    count: int
    sum: int
    bucket_counts: tuple[int, ...]  # len(TOKEN_BUCKETS) + 1
    min: int
    max: int


@dataclass(frozen=True, slots=True)
class TraceBatch:
    """What one step of the builder produced."""

    spans: tuple[SpanRecord, ...] = ()
    token_usage: tuple[HistogramPoint, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.spans or self.token_usage)

    def __add__(self, other: TraceBatch) -> TraceBatch:
        return TraceBatch(self.spans + other.spans, self.token_usage + other.token_usage)


# --- ids and small conversions -----------------------------------------------------------------


def trace_id(run: str) -> str:
    """The trace id of a run: 128 bits of a hash of its id, never all zero."""
    return _nonzero(hashlib.sha256(f"loopctl-trace/{run}".encode()).hexdigest()[:32])


def span_id(run: str, *key: object) -> str:
    """The id of the span `key` names within `run` (e.g. ("attempt", task, 2))."""
    text = "/".join(("loopctl-span", run, *(str(part) for part in key)))
    return _nonzero(hashlib.sha256(text.encode()).hexdigest()[:16])


def _nonzero(digits: str) -> str:
    # An all-zero id is invalid in OTLP; a hash gives one with odds of 2**-64, but never mind.
    return digits if digits.strip("0") else digits[:-1] + "1"


def time_ns(ts: str) -> int:
    """An event's ISO timestamp as integer nanoseconds since the epoch (exact, no floats)."""
    moment = datetime.fromisoformat(ts)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return ((moment - _EPOCH) // timedelta(microseconds=1)) * 1000


def seconds_ns(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    try:
        nanos = float(value) * 1e9
    except OverflowError:  # a 400-digit integer
        return 0
    # NaN or infinity would make `round` raise: a hostile log must not break an export.
    return round(nanos) if math.isfinite(nanos) and nanos >= 0 else 0


def started_ns(value: object, default: int) -> int:
    """A check command's `started` timestamp in nanoseconds; `default` when unreadable."""
    if not isinstance(value, str):
        return default
    try:
        return time_ns(value)
    except (ValueError, OverflowError):
        return default


def provider_name(backend: str, model: str | None) -> str:
    """`gen_ai.provider.name` for an agent: well-known values where loopctl can tell."""
    spec = backend_registry.find(backend) if backend else None
    if spec is not None and spec.provider:  # a backend whose provider is fixed declares it
        return spec.provider
    if model and "/" in model:
        prefix = model.split("/", 1)[0].lower()
        return _MODEL_PREFIXES.get(prefix, prefix)
    return backend or "unknown"


def as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def tool_name(argv: Sequence[str]) -> str:
    """A short, stable name for a check command: `python -m pytest -q` -> "pytest"."""
    if not argv:
        return "check"
    words = list(argv)
    program = words[0].rsplit("/", 1)[-1]
    if program.startswith("python") and len(words) > 2 and words[1] == "-m":
        return words[2]
    if program.startswith("python") and len(words) > 1 and not words[1].startswith("-"):
        return words[1].rsplit("/", 1)[-1]
    return program


# --- building one span ---------------------------------------------------------------------------


@dataclass(slots=True)
class OpenSpan:
    """A span whose start has been seen and whose end has not."""

    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    attributes: dict[str, object]  # raw: redacted when the span closes
    events: list[SpanEventRecord] = field(default_factory=list)


@dataclass(slots=True)
class RunSpans:
    run: str
    loop: str | None
    first_ns: int
    last_ns: int
    tick: OpenSpan | None = None
    tasks: dict[str, OpenSpan] = field(default_factory=dict)
    attempts: dict[tuple[str, int], OpenSpan] = field(default_factory=dict)
    actions: dict[tuple[str | None, int], OpenSpan] = field(default_factory=dict)
    usage: dict[tuple[tuple[str, AttrValue], ...], list[int]] = field(default_factory=dict)
    finished: bool = False


class SpanBuilder:
    """Builds one span at a time from what `TraceBuilder` has gathered of a run."""

    def __init__(self, *, capture_content: bool, redact: Callable[[str], str]) -> None:
        self.capture_content = capture_content
        self._redact = redact

    def _attrs(self, values: Mapping[str, object]) -> dict[str, AttrValue]:
        """Attribute values as OTLP takes them: None dropped, strings redacted, lists as tuples."""
        out: dict[str, AttrValue] = {}
        for key, value in values.items():
            if value is None:
                continue
            if isinstance(value, str):
                out[key] = self._redact(value)
            elif isinstance(value, bool | int | float):
                out[key] = value
            elif isinstance(value, list | tuple):
                out[key] = tuple(self._redact(str(item)) for item in value)
            else:
                out[key] = self._redact(json.dumps(value, sort_keys=True, default=str))
        return out

    def _content(self, text: object, *, keep_end: bool = False) -> str | None:
        """Text for a span only when content capture is on; bounded."""
        if not self.capture_content or not isinstance(text, str) or not text:
            return None
        if len(text) > MAX_CONTENT:
            text = text[-MAX_CONTENT:] if keep_end else text[:MAX_CONTENT]
        return text

    def _base(self, run: RunSpans) -> dict[str, object]:
        return {"loopctl.run.id": run.run, "loopctl.loop": run.loop}

    def _span(
        self,
        run: RunSpans,
        span: str,
        parent: str | None,
        name: str,
        start: int,
        end: int,
        attributes: Mapping[str, object],
        *,
        error: str | None = None,
        events: Sequence[SpanEventRecord] = (),
    ) -> SpanRecord:
        attrs = self._attrs({**self._base(run), **attributes})
        if error is not None:
            attrs["error.type"] = self._redact(error)
        return SpanRecord(
            trace_id=trace_id(run.run),
            span_id=span,
            parent_id=parent,
            name=name,
            start_ns=start,
            end_ns=max(end, start),
            attributes=attrs,
            status=SpanStatus.ERROR if error is not None else SpanStatus.UNSET,
            status_message=error or "",
            events=tuple(events),
        )

    def _close(
        self,
        run: RunSpans,
        item: OpenSpan,
        end: int,
        extra: Mapping[str, object],
        error: str | None = None,
    ) -> SpanRecord:
        return self._span(
            run,
            item.span_id,
            item.parent_id,
            item.name,
            item.start_ns,
            end,
            {**item.attributes, **extra},
            error=error,
            events=item.events,
        )

    def _tick_id(self, run: RunSpans) -> str:
        return span_id(run.run, "tick")

    def _open_workflow(self, run: RunSpans, loop: str | None, at: int) -> OpenSpan:
        name = loop or "loop"
        return OpenSpan(
            self._tick_id(run),
            None,
            f"invoke_workflow {name}",
            at,
            {
                "gen_ai.operation.name": "invoke_workflow",
                "gen_ai.workflow.name": name,
                "gen_ai.conversation.id": run.run,
            },
        )

    def _open_task(self, run: RunSpans, task: str, at: int) -> OpenSpan:
        return OpenSpan(
            self._task_id(run, task), self._tick_id(run), "task", at, {"loopctl.task.id": task}
        )

    def _open_attempt(self, run: RunSpans, task: str, number: int, at: int) -> OpenSpan:
        return OpenSpan(
            span_id(run.run, "attempt", task, number),
            self._task_id(run, task),
            "attempt",
            at,
            {"loopctl.task.id": task, "loopctl.attempt.number": number},
        )

    def _open_action(self, run: RunSpans, event: Event, step: int, at: int) -> OpenSpan:
        # Opened by its action_started, or by its action_finished when the start was not seen.
        if event.type == EventType.ACTION_STARTED:
            action = read(ActionStarted, event).action or "action"
        else:
            action = read(ActionFinished, event).action or "action"
        return OpenSpan(
            span_id(run.run, "action", event.task, event.seq),
            self._task_id(run, event.task),
            f"execute_tool {action}",
            at,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": action,
                "gen_ai.tool.type": "function",
                "gen_ai.conversation.id": run.run,
                "loopctl.task.id": event.task,
                "loopctl.action.step": step,
            },
        )

    def _task_id(self, run: RunSpans, task: str | None) -> str:
        return span_id(run.run, "task", task) if task is not None else self._tick_id(run)

    def _holder(self, run: RunSpans, task: str | None) -> OpenSpan | None:
        """The open span a point-in-time event belongs on: its task's, else the tick's."""
        if task is not None and task in run.tasks:
            return run.tasks[task]
        return run.tick

    def _mark(self, run: RunSpans, event: Event, at: int, attrs: Mapping[str, object]) -> None:
        holder = self._holder(run, event.task)
        if holder is not None:
            holder.events.append(SpanEventRecord(event.type, at, self._attrs(attrs)))

    def _token_points(self, run: RunSpans, end: int) -> tuple[HistogramPoint, ...]:
        points = []
        for key, values in sorted(run.usage.items()):
            counts = [0] * (len(TOKEN_BUCKETS) + 1)
            for value in values:
                counts[_bucket(value)] += 1
            points.append(
                HistogramPoint(
                    attributes=dict(key),
                    start_ns=run.first_ns,
                    end_ns=max(end, run.first_ns),
                    count=len(values),
                    sum=sum(values),
                    bucket_counts=tuple(counts),
                    min=min(values),
                    max=max(values),
                )
            )
        run.usage.clear()
        return tuple(points)


def _bucket(value: int) -> int:
    """Index of the histogram bucket `value` falls in (bounds are inclusive upper limits)."""
    for index, bound in enumerate(TOKEN_BUCKETS):
        if value <= bound:
            return index
    return len(TOKEN_BUCKETS)

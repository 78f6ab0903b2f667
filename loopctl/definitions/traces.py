"""The `[traces]` table of .loop/config.toml: whether and where runs are exported as traces."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from loopctl.definitions.fields import Table
from loopctl.definitions.schema import Field, boolean, read, string

DEFAULT_TRACES_FILE = ".loop/log/traces.jsonl"


class TraceExporter(StrEnum):
    NONE = "none"  # the default: no spans, and nothing of OpenTelemetry is imported
    OTLP = "otlp"  # OTLP/HTTP (JSON) to the standard OTEL_EXPORTER_OTLP_* endpoint
    FILE = "file"  # OTLP/JSON lines appended to `file`


@dataclass(frozen=True, slots=True)
class TracesConfig:
    """What `[traces]` says; `exporter` None means the table leaves it to OTEL_TRACES_EXPORTER."""

    exporter: TraceExporter | None = None
    file: Path | None = None  # for exporter "file"; relative paths are from the repository root
    capture_content: bool = False  # prompts and agent output in spans: opt-in only
    metrics: bool = True  # the gen_ai.client.token.usage histogram, beside the spans


# The keys of `[traces]`, in the order they are read; `file` is checked before the switches.
TRACES_FIELDS = (
    Field("exporter", string, choices=tuple(e.value for e in TraceExporter)),
    Field("file", string),
)
SWITCH_FIELDS = (
    Field("capture_content", boolean, False),
    Field("metrics", boolean, True),
)


def read_traces(table: Table | None, root: Path) -> TracesConfig:
    """Read `[traces]`; `root` is the repository root that relative paths start from."""
    if table is None:
        return TracesConfig()
    values = read(table, TRACES_FIELDS)
    name, file_text = values["exporter"], values["file"]
    file: Path | None = None
    if file_text is not None:
        if not file_text.strip():
            table.error("file", "'file' in [traces] must name a file, e.g. \"traces.jsonl\"")
        else:
            path = Path(file_text).expanduser()
            file = path if path.is_absolute() else root / path
    if file is not None and name is not None and name != TraceExporter.FILE:
        table.warn(
            "file", f"'file' in [traces] is only used with exporter = \"file\", not {name!r}"
        )
    config = TracesConfig(
        exporter=TraceExporter(name) if name is not None else None,
        file=file,
        **read(table, SWITCH_FIELDS),
    )
    table.finish()
    return config

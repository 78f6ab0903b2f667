"""`loopctl traces export`: a past run's OpenTelemetry spans, rebuilt from the event log."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from loopctl.cli import completion
from loopctl.cli.boundary import boundary
from loopctl.cli.options import JsonFlag, load_here

traces_app = typer.Typer(
    help="OpenTelemetry traces of runs (needs loopctl-runtime's otel extra).",
    no_args_is_help=True,
)


def export(
    run_id: Annotated[
        str,
        typer.Argument(
            metavar="RUN", help="Run id (a unique prefix works).", autocompletion=completion.run_ids
        ),
    ],
    otlp_json: Annotated[
        Path | None,
        typer.Option(
            "--otlp-json",
            metavar="FILE",
            help="Write OTLP/JSON lines (spans, then token metrics) to FILE; - for stdout.",
        ),
    ] = None,
    otlp: Annotated[
        bool,
        typer.Option("--otlp", help="Send over OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT instead."),
    ] = False,
    capture_content: Annotated[
        bool,
        typer.Option(
            "--capture-content",
            help="Include prompts, agent output and task text (off by default; never secrets).",
        ),
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """Rebuild a run's spans from the event log and export them (same ids as the live ones)."""
    from loopctl.commands.traces import export_run

    if json_out and otlp_json is not None and str(otlp_json) == "-":
        from loopctl.errors import UsageError

        raise UsageError("--json and --otlp-json - both want stdout: write the spans to a file")
    project = load_here(strict=False)
    result = export_run(
        project.paths,
        run_id,
        otlp_json=otlp_json,
        otlp=otlp,
        capture_content=capture_content or project.config.traces.capture_content,
    )
    if json_out:
        from loopctl.cli.render import print_json

        print_json("export", result.to_json())
        return
    unfinished = f", {result.unfinished} unfinished" if result.unfinished else ""
    message = (
        f"run {result.run}: {result.spans} spans{unfinished} and {result.metric_points}"
        f" token-usage points → {result.destination}"
    )
    # With the spans on stdout, the summary must not mix with them.
    typer.echo(message, err=result.destination == "stdout")


def register(app: typer.Typer) -> None:
    traces_app.command("export")(boundary(export))
    app.add_typer(traces_app, name="traces")

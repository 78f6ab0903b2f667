"""`loopctl spend`: tokens and USD over time, as a table, a per-day chart, or JSON."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from loopctl.cli.boundary import boundary
from loopctl.cli.options import JsonFlag

if TYPE_CHECKING:
    from loopctl.journal.spending import SpendReport, SpendRow

BY_CHOICES = ("loop", "backend", "day", "task")
SPARKS = "▁▂▃▄▅▆▇█"
CHART_DAYS = 60  # a sparkline wider than this no longer fits a terminal line


def sparkline(values: Sequence[float]) -> str:
    """One block character per value, scaled to the largest; zero is the lowest block."""
    top = max(values, default=0)
    if top <= 0:
        return SPARKS[0] * len(values)
    last = len(SPARKS) - 1
    return "".join(SPARKS[min(last, round(v / top * last))] for v in values)


def _usd(row: SpendRow) -> str:
    text = f"${row.usd:.2f}"
    if row.unpriced:
        text += f" (+{row.unpriced} unpriced)"
    return text


def _chart(report: SpendReport) -> list[str]:
    days = report.days[-CHART_DAYS:]
    if len(days) < 2:
        return []
    span = f"{days[0].key} → {days[-1].key}"
    lines = [f"tokens/day {sparkline([d.tokens for d in days])}  max {max(d.tokens for d in days)}"]
    if any(d.usd for d in days):
        top = max(d.usd for d in days)
        lines.append(f"USD/day    {sparkline([d.usd for d in days])}  max ${top:.2f}")
    lines.append(f"           {span}")
    return lines


def spend(
    since: Annotated[
        str,
        typer.Option(
            "--since",
            metavar="DURATION",
            help='How far back: 7d, 24h, 30m, 1h30m, or "all".',
        ),
    ] = "7d",
    by: Annotated[
        str,
        typer.Option("--by", metavar="loop|backend|day|task", help="Group rows by this."),
    ] = "day",
    json_out: JsonFlag = False,
) -> None:
    """Tokens and USD the agents reported, from the event log (days in local time)."""
    from datetime import UTC, datetime

    from loopctl.errors import UsageError

    if by not in BY_CHOICES:
        raise UsageError(f"--by must be one of {', '.join(BY_CHOICES)}, not {by!r}")
    from loopctl.journal.events import EventLog
    from loopctl.journal.spending import GroupBy, parse_since, spend_report
    from loopctl.paths import ProjectPaths, find_repo_root
    from loopctl.scheduling.timing import zone

    now = datetime.now(UTC)
    start = parse_since(since, now)
    events = EventLog(ProjectPaths(find_repo_root()).events_file).read()
    report = spend_report(events, by=GroupBy(by), since=start, now=now, tz=zone(None))
    if json_out:
        from loopctl.cli.render import print_json

        print_json("spend", report.to_json())
        return
    from loopctl.cli.render import print_table

    window = "since the log began" if start is None else f"in the last {since.strip()}"
    if not report.rows:
        print(f"no agent spend {window}")
        return
    rows = [(r.key, str(r.tokens), _usd(r), str(r.calls)) for r in report.rows]
    total = report.total
    rows.append(("total", str(total.tokens), _usd(total), str(total.calls)))
    print_table((by.upper(), "TOKENS", "USD", "CALLS"), rows, empty="")
    if sys.stdout.isatty():
        for line in _chart(report):
            print(line)


def register(app: typer.Typer) -> None:
    app.command()(boundary(spend))

"""`loopctl spend`: tokens and USD over time from real event logs, grouped four ways."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.repos import make_project

from loopctl.cli.spend_cmds import sparkline
from loopctl.journal.events import EventLog, EventType
from loopctl.journal.spending import GroupBy, parse_since, spend_report
from loopctl.paths import ProjectPaths

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def agent_call(
    log_path: Path,
    at: datetime,
    loop: str,
    task: str,
    backend: str,
    tokens: Any,
    usd: Any,
) -> None:
    """One `agent_finished` event, written by loopctl's own EventLog at the given time."""
    log = EventLog(log_path, clock=lambda: at)
    data = {"attempt": 1, "backend": backend, "input_tokens": tokens, "output_tokens": 0}
    if usd is not None:
        data["cost_usd"] = usd
    log.append(EventType.AGENT_FINISHED, run="r", loop=loop, task=task, data=data)


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    hours = timedelta(hours=1)
    days = timedelta(days=1)
    agent_call(path, NOW - 40 * days, "old", "t", "claude", 999, 9.0)  # outside 30d
    agent_call(path, NOW - 2 * days, "ci", "fix", "claude", 1000, 0.10)
    agent_call(path, NOW - 2 * days + hours, "ci", "fix", "codex", 500, None)  # unpriced
    agent_call(path, NOW - 1 * hours, "ci", "lint", "claude", 200, 0.02)
    agent_call(path, NOW - 1 * hours, "docs", "t", "command", 10**400, -1.0)  # clamped
    EventLog(path, clock=lambda: NOW).append(EventType.TICK_STARTED, run="r", loop="ci")
    return path


def report(log_path: Path, by: GroupBy, since: str = "30d", tz: Any = UTC) -> Any:
    events = EventLog(log_path).read()
    return spend_report(events, by=by, since=parse_since(since, NOW), now=NOW, tz=tz)


def keyed(rows: Any) -> dict[str, tuple[int, float, int, int]]:
    return {r.key: (r.tokens, round(r.usd, 6), r.calls, r.unpriced) for r in rows}


BIG = 10**12  # 10**400 tokens are clamped to the ceiling; a negative cost counts as unpriced


@pytest.mark.parametrize(
    ("by", "expected"),
    [
        (
            GroupBy.LOOP,
            {"ci": (1700, 0.12, 3, 1), "docs": (BIG, 0.0, 1, 1)},
        ),
        (
            GroupBy.BACKEND,
            {"claude": (1200, 0.12, 2, 0), "codex": (500, 0.0, 1, 1), "command": (BIG, 0.0, 1, 1)},
        ),
        (
            GroupBy.TASK,
            {"ci/fix": (1500, 0.1, 2, 1), "ci/lint": (200, 0.02, 1, 0), "docs/t": (BIG, 0.0, 1, 1)},
        ),
        (
            GroupBy.DAY,
            {"2026-11-28": (1500, 0.1, 2, 1), "2026-11-30": (BIG + 200, 0.02, 2, 1)},
        ),
    ],
)
def test_spend_groups_the_window_four_ways(
    log_path: Path, by: GroupBy, expected: dict[str, tuple[int, float, int, int]]
) -> None:
    found = report(log_path, by)
    assert keyed(found.rows) == expected
    assert keyed([found.total]) == {"total": (BIG + 1700, 0.12, 4, 2)}


def test_rows_are_dearest_first_and_days_oldest_first(log_path: Path) -> None:
    assert [r.key for r in report(log_path, GroupBy.TASK).rows] == ["ci/fix", "ci/lint", "docs/t"]
    assert [r.key for r in report(log_path, GroupBy.DAY).rows] == ["2026-11-28", "2026-11-30"]


def test_since_bounds_the_window(log_path: Path) -> None:
    assert keyed(report(log_path, GroupBy.LOOP, "24h").rows) == {
        "ci": (200, 0.02, 1, 0),
        "docs": (BIG, 0.0, 1, 1),
    }
    assert "old" in keyed(report(log_path, GroupBy.LOOP, "all").rows)
    assert "old" in keyed(report(log_path, GroupBy.LOOP, "41d").rows)


def test_the_chart_series_has_every_day_of_the_window_in_the_given_zone(log_path: Path) -> None:
    found = report(log_path, GroupBy.LOOP, "7d")
    assert [d.key for d in found.days] == [f"2026-11-{n}" for n in range(23, 31)]
    assert [d.tokens for d in found.days][-3:] == [1500, 0, BIG + 200]
    # At UTC+14 the calls of the 28th fall on the 29th, and 11:00 UTC on the 30th on the 1st.
    east = report(log_path, GroupBy.DAY, "7d", tz=timezone(timedelta(hours=14)))
    assert [r.key for r in east.rows] == ["2026-11-29", "2026-12-01"]


@pytest.mark.parametrize("text", ["7x", "", "d7", "-1d", "0s", "1.5d"])
def test_a_bad_since_is_a_usage_error(text: str) -> None:
    from loopctl.errors import UsageError

    with pytest.raises(UsageError, match="--since"):
        parse_since(text, NOW)


def test_sparkline_scales_to_the_largest_value() -> None:
    assert sparkline([0, 1, 2, 4, 8]) == "▁▂▃▅█"
    assert sparkline([0, 4, 8]) == "▁▅█"
    assert sparkline([0, 0]) == "▁▁"
    assert sparkline([]) == ""


def test_spend_after_a_real_goal_run(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(repo, "fixer.py")
    assert_clean_exit(run_loopctl(repo, "goal", "tests green"), 0)
    # An agent call from long ago, in the same log, is outside the default week.
    agent_call(
        ProjectPaths(repo).events_file, datetime.now(UTC) - timedelta(days=9), "old", "t", "x", 5, 1
    )

    result = invoke(monkeypatch, repo, "spend", "--by", "loop", "--json")

    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["version"] == 1
    body = payload["spend"]
    assert body["by"] == "loop"
    assert [(r["key"], r["tokens"], r["calls"]) for r in body["rows"]] == [("goal", 1200, 1)]
    assert body["rows"][0]["usd"] == pytest.approx(0.01)
    assert body["total"]["tokens"] == 1200

    wider = invoke(monkeypatch, repo, "spend", "--since", "30d", "--by", "backend")
    assert wider.exit_code == 0, wider.output
    lines = wider.stdout.splitlines()
    assert lines[0].split() == ["BACKEND", "TOKENS", "USD", "CALLS"]
    assert any(line.split()[:2] == ["x", "5"] for line in lines)
    assert lines[-1].split() == ["total", "1205", "$1.01", "2"]


def test_spend_with_nothing_spent(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(monkeypatch, repo, "spend")
    assert result.exit_code == 0, result.output
    assert result.stdout == "no agent spend in the last 7d\n"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--since", "7x"], "loopctl: --since: invalid duration '7x'"),
        (["--since", "0m"], "loopctl: --since: '0m' is no time at all"),
        (["--by", "week"], "loopctl: --by must be one of loop, backend, day, task"),
    ],
)
def test_bad_input_exits_2_with_one_line(repo: Path, args: list[str], says: str) -> None:
    done = run_loopctl(repo, "spend", *args)
    assert_clean_exit(done, 2)
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith(says)
    assert done.stdout == ""


def test_help_lists_the_new_commands_without_importing_them() -> None:
    probe = (
        "import sys; from loopctl.cli.app import app;"
        " print(sorted(m for m in"
        " ('loopctl.journal.spending', 'loopctl.commands.new', 'tomli_w', 'rich')"
        " if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert loaded.stdout.strip() == "[]", loaded.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "loopctl", "--help"], capture_output=True, text=True, check=True
    )
    assert " spend " in shown.stdout
    assert " new " in shown.stdout


def test_on_a_terminal_a_chart_follows_the_table(repo: Path) -> None:
    import os
    import pty

    events_file = ProjectPaths(repo).events_file
    now = datetime.now(UTC)
    agent_call(events_file, now - timedelta(days=3), "ci", "fix", "claude", 800, 0.08)
    agent_call(events_file, now - timedelta(minutes=5), "ci", "fix", "claude", 100, 0.01)
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm", "NO_COLOR": "1"}
    with subprocess.Popen(
        [sys.executable, "-m", "loopctl", "spend", "--by", "loop"],
        cwd=repo,
        stdout=follower,
        stderr=subprocess.PIPE,
        env=env,
    ) as proc:
        os.close(follower)
        chunks = []
        with contextlib.suppress(OSError):  # EIO once the child has closed the terminal
            while chunk := os.read(leader, 4096):
                chunks.append(chunk)
        os.close(leader)
        assert proc.wait(timeout=30) == 0
    shown = b"".join(chunks).decode()
    assert "total" in shown
    tokens_line = next(line for line in shown.splitlines() if line.startswith("tokens/day"))
    # The 7-day window spans 8 calendar days: 800 tokens three days ago, 100 today.
    assert tokens_line.split()[1] == "▁▁▁▁█▁▁▂"
    assert "USD/day" in shown

"""`loopctl report`: the morning report over logs real ticks wrote (scripted agents, real git,
a real remote), with the outcomes no path records yet (stalled, rate-limited) appended as their
writers will record them; the digest reaching a real webhook; the dashboard's page in Chromium."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.delivery import ship_loop, the_approval
from support.journal import events
from support.repos import add_remote, make_project, toml_value, write_agent, write_config
from support.ui import browser, dashboard, screenshot

from loopctl.commands.report import parse_since
from loopctl.definitions import load_project
from loopctl.errors import UsageError
from loopctl.journal.events import EventLog
from loopctl.journal.notify import send_digest_if_due
from loopctl.journal.recorder import Recorder
from loopctl.paths import ProjectPaths

STALLED_RUN = "20261205T031500-5a11"
LIMITED_RUN = "20261205T041500-4290"


def report_json(monkeypatch: pytest.MonkeyPatch, repo: Path, *flags: str) -> dict[str, Any]:
    done = invoke(monkeypatch, repo, "report", "--json", *flags)
    assert done.exit_code == 0, done.output
    payload = json.loads(done.stdout)
    assert payload["version"] == 1
    found: dict[str, Any] = payload["report"]
    return found


def report_text(monkeypatch: pytest.MonkeyPatch, repo: Path, *flags: str) -> str:
    done = invoke(monkeypatch, repo, "report", *flags)
    assert done.exit_code == 0, done.output
    return done.stdout


def append(
    repo: Path, type_: str, run: str | None, loop: str | None, task: str | None, **data: Any
) -> None:
    EventLog(ProjectPaths(repo).events_file).append(type_, run=run, loop=loop, task=task, data=data)


def stalled_and_rate_limited(repo: Path) -> None:
    """What the liveness and rate-limit writers record (issue 30, items 1 and 3): a task ended
    `stalled` with an inbox item saying what it last did, and a run ended `rate-limited`."""
    append(repo, "tick_started", STALLED_RUN, "nightly", None, kind="tick")
    append(repo, "task_found", STALLED_RUN, "nightly", "parser", title="Refactor the parser")
    append(
        repo,
        "inbox_opened",
        STALLED_RUN,
        "nightly",
        "parser",
        id="st4ll3",
        kind="failed",
        summary="no progress for 15m; it last ran `pytest -x`",
    )
    append(
        repo,
        "task_finished",
        STALLED_RUN,
        "nightly",
        "parser",
        status="stopped",
        reason="no output, file change or stream event for 15m",
        outcome="stalled",
    )
    append(repo, "tick_finished", STALLED_RUN, "nightly", None, status="stopped", outcome="stalled")
    append(repo, "tick_started", LIMITED_RUN, "triage", None, kind="tick")
    append(
        repo,
        "tick_finished",
        LIMITED_RUN,
        "triage",
        None,
        status="stopped",
        reason="claude: usage limit reached; resumes at 09:00",
        outcome="rate-limited",
    )


def a_night(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A night of real ticks: a fix pushed once approved, a second waiting for approval, a goal
    that failed; and a stalled task and a rate-limited run as their writers record them."""
    make_project(repo, "fixer.py")
    add_remote(repo, tmp_path)
    write_agent(repo, "breaker", "never_fixes.py")
    ship_loop(repo, 'actions = ["commit", "push"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    pushed = the_approval(monkeypatch, repo)["id"]
    approved = invoke(monkeypatch, repo, "inbox", "approve", pushed)
    assert approved.exit_code == 0, approved.output
    ship_loop(repo, 'actions = ["commit", "push"]', name="later")
    assert invoke(monkeypatch, repo, "run", "later", "--once").exit_code == 0
    waiting = the_approval(monkeypatch, repo)["id"]
    failed = invoke(
        monkeypatch, repo, "goal", "tests green", "--agent", "breaker", "--max-iterations", "1"
    )
    assert failed.exit_code == 1, failed.output
    (failed_item,) = [
        e.data["id"] for e in events(repo, "inbox_opened") if e.data["kind"] == "failed"
    ]
    stalled_and_rate_limited(repo)
    (commit,) = {e.data["sha"] for e in events(repo, "commit_created") if e.loop == "ship"}
    return {"waiting": waiting, "failed": failed_item, "commit": commit}


def test_a_night_reads_as_one_screen_each_line_with_its_command(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    night = a_night(repo, tmp_path, monkeypatch)
    short = night["commit"][:12]

    text = report_text(monkeypatch, repo)

    lines = text.splitlines()
    assert lines[0].startswith("loopctl report — the last 24 hours (no report shown before)")
    headings = [line for line in lines if not line.startswith("- ")][1:]
    assert headings[:6] == [
        "Done (1):",
        "Delivered (1):",
        "Waiting for you (3):",  # the stalled task's item waits too
        "Stalled (1):",
        "Rate-limited (1):",
        "Failed or stopped (1):",
    ]
    assert headings[6].startswith("Spent: $0.02, 2,400 tokens")
    section = _sections(text)
    (done,) = section["Done"]
    assert done.startswith(f"- ship: main — commit {short} on loop/ship/main")
    assert f"→ git show --stat {short} · loopctl replay " in done
    (delivered,) = section["Delivered"]
    assert delivered.startswith(f"- ship/main: push — pushed {short}")
    assert delivered.endswith(f"→ git log --oneline -1 {short}")
    waiting = {line.split()[1]: line for line in section["Waiting for you"]}
    assert set(waiting) == {night["waiting"], night["failed"], "st4ll3"}
    assert waiting[night["waiting"]].endswith(
        f"→ loopctl inbox show {night['waiting']} · loopctl inbox approve {night['waiting']}"
        f" · loopctl inbox reject {night['waiting']}"
    )
    assert waiting[night["failed"]].endswith(
        f"loopctl inbox retry {night['failed']} · loopctl inbox dismiss {night['failed']}"
    )
    (stalled,) = section["Stalled"]
    assert stalled.startswith("- stalled: nightly/Refactor the parser — no output, file change")
    assert "→ loopctl inbox show st4ll3 · loopctl inbox retry st4ll3" in stalled
    (limited,) = section["Rate-limited"]
    assert limited == (
        f"- rate-limited: triage run {LIMITED_RUN} — claude: usage limit reached; resumes at"
        f" 09:00  → loopctl replay {LIMITED_RUN}"
    )
    (failed,) = section["Failed or stopped"]
    # An outcome the goal's log does not carry yet reads from its status.
    assert failed.startswith("- failed: goal/")
    assert f"→ loopctl inbox show {night['failed']} · loopctl inbox retry" in failed
    assert len(lines) <= 24  # one screen

    shown = report_json(monkeypatch, repo, "--since", "24h", "--no-mark")
    assert set(shown["sections"]) == {
        "done",
        "delivered",
        "waiting",
        "stalled",
        "rate-limited",
        "failed",
    }
    (stalled_json,) = shown["sections"]["stalled"]
    assert stalled_json == {
        "text": stalled.split("  → ")[0][2:],
        "commands": [
            "loopctl inbox show st4ll3",
            "loopctl inbox retry st4ll3",
            "loopctl inbox dismiss st4ll3",
        ],
        "link": "/inbox/st4ll3",
        "when": stalled_json["when"],
        "loop": "nightly",
        "task": "parser",
        "run": STALLED_RUN,
        "item": "st4ll3",
        "outcome": "stalled",
        "url": None,
    }
    assert shown["sections"]["done"][0]["outcome"] == "done"
    assert shown["spent"]["total"]["calls"] == 3
    assert {row["key"] for row in shown["spent"]["loops"]} == {"goal", "later", "ship"}
    assert shown["empty"] is False and shown["format"] == 1


def _sections(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines()[1:]:
        if line.startswith("- "):
            current.append(line)
        else:
            current = found.setdefault(line.split(" (")[0].rstrip(":"), [])
    return found

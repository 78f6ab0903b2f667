"""A host the agent may not reach (issue 25): the proxy refuses it, the run records it, and
`inbox show`, the run's own output and the dashboard name it. A real run: a real repository,
the scripted agent as a real process in the sandbox, loopctl's real proxy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import PY, make_project

from loopctl.cli.live import plain_line
from loopctl.commands.status import describe
from loopctl.definitions import load_project
from loopctl.journal.events import EventLog, EventType
from loopctl.journal.recorder import Recorder
from loopctl.paths import ProjectPaths

TASK = "tests-green"
UNLISTED = "unlisted.example.com:443"
LISTED = "allowed.example.com:443"


def test_an_unlisted_host_is_refused_recorded_and_shown(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(
        repo,
        "reaches_out.py",
        UNLISTED,
        agent_extra='\n[sandbox]\nhosts = ["allowed.example.com"]\n',
    )

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1", "-v")

    assert result.exit_code == 1, result.output  # the agent fixed nothing
    refusals = [e for e in events(repo, "note", TASK) if e.data.get("what") == "network_refused"]
    assert [e.data["hosts"] for e in refusals] == [[UNLISTED]], result.output
    (refusal,) = refusals
    assert (refusal.data["role"], refusal.data["agent"], refusal.data["attempt"]) == (
        "maker",
        "maker",
        1,
    )
    # What the agent itself saw: a refusal from the proxy, not a connection.
    (finished,) = events(repo, "agent_finished", TASK)
    answers = json.loads(
        json.loads(finished.data["output_tail"].strip().splitlines()[-1])["result"]
    )
    assert answers[UNLISTED].split()[1] in ("403", "407", "502"), answers

    # The run's own lines (-v) say it as it happens.
    assert f"task {TASK} maker maker: network refused {UNLISTED}" in result.stderr

    assert_shown(repo, monkeypatch, refusal.run or "")


def test_a_recorded_refusal_is_shown_wherever_the_task_is(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The display side alone, over a log that holds the note (whatever proxy wrote it)."""
    make_project(
        repo, "never_fixes.py", agent_extra='\n[sandbox]\nhosts = ["allowed.example.com"]\n'
    )
    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert result.exit_code == 1, result.output
    (started,) = events(repo, "attempt_started", TASK)
    recorder = Recorder(load_project(repo))
    note = recorder.emit(
        EventType.NOTE,
        run=started.run,
        loop=started.loop,
        task=TASK,
        what="network_refused",
        hosts=[UNLISTED],
        attempt=1,
        role="maker",
        agent="maker",
    )
    assert (
        plain_line(note) == f"{note.ts[11:19]} task {TASK} maker maker: network refused {UNLISTED}"
    )
    assert_shown(repo, monkeypatch, started.run or "")


def assert_shown(repo: Path, monkeypatch: pytest.MonkeyPatch, run: str) -> None:
    """`inbox show` (text and JSON) of the task's item, and the dashboard's run page."""
    (opened,) = events(repo, "inbox_opened", TASK)
    shown = invoke(monkeypatch, repo, "inbox", "show", str(opened.data["id"]), "--no-pager")
    assert shown.exit_code == 0, shown.output
    assert "Network refused" in shown.stdout
    assert f"  {UNLISTED}" in shown.stdout
    assert LISTED not in shown.stdout  # allowed, never tried: not a refusal
    as_json = invoke(monkeypatch, repo, "inbox", "show", str(opened.data["id"]), "--json")
    assert json.loads(as_json.stdout)["item"]["network_refused"] == [UNLISTED]

    # The dashboard's run page and `loopctl log` line.
    from loopctl.ui import pages, views

    log = EventLog(ProjectPaths(repo).events_file).read()
    page = pages.run_page(views.run_page(load_project(repo), log, run), "p")
    assert f"network refused: {UNLISTED}" in page
    assert f"maker maker: network refused {UNLISTED}" in page


def test_an_open_network_is_noted_in_the_runs_log(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py", agent_extra='\n[sandbox]\nnetwork = "open"\n')
    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert result.exit_code == 1, result.output
    (note,) = [e for e in events(repo, "note") if e.data.get("what") == "network"]
    assert (note.data["mode"], note.data["agent"]) == ("open", "maker")
    (started,) = events(repo, "tick_started")
    assert note.run == started.run
    assert (
        describe(note) == 'note: agent maker on the host\'s network, unfiltered (network = "open")'
    )


CHECK_REACHES_OUT = (
    "import os, socket, urllib.parse as u; p = u.urlsplit(os.environ['HTTPS_PROXY']);"
    " s = socket.create_connection((p.hostname, p.port));"
    f" s.sendall(b'CONNECT {UNLISTED} HTTP/1.1\\r\\n\\r\\n'); print(s.recv(100)); s.close();"
    " import calc; assert calc.add(2, 3) == 5"
)


def test_a_checks_refusal_is_recorded_against_its_attempt(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(
        repo,
        "never_fixes.py",
        check=(PY, "-B", "-c", CHECK_REACHES_OUT),
        config_extra='\n[checker]\nnetwork = ["allowed.example.com"]\n',
    )
    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert result.exit_code == 1, result.output
    refusals = [e for e in events(repo, "note", TASK) if e.data.get("what") == "network_refused"]
    # The baseline's run (attempt 0) and the attempt's own check, each a refusal.
    assert [(e.data["attempt"], e.data["check"], e.data["hosts"]) for e in refusals] == [
        (0, True, [UNLISTED]),
        (1, True, [UNLISTED]),
    ], result.output
    assert describe(refusals[0]) == f"[{TASK}] a check: network refused {UNLISTED}"

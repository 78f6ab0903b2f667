"""The dashboard's word on the night (issue 30): a backend's rate-limit pause on the loops page
and in the run's timeline, and why `up` stopped on the Report page. The real `loopctl ui`
served over HTTP on 127.0.0.1; the notes are appended as their writers record them
(journal.pauses, scheduling.daemon), the pause's words hostile."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from support.night import append
from support.repos import commit_all, make_project, write_loop
from support.ui import dashboard

from loopctl.journal.pauses import Pause

RUN = "20261206T031500-aa11"
SAID = '<img src=x onerror="window.pwned=1">\x1b[2JYou\'ve hit your limit · resets 7am'


def test_the_loops_page_and_the_run_page_show_a_backends_pause(repo: Path) -> None:
    make_project(repo, "fixer.py")  # its maker is a program: backend "command"
    write_loop(repo, "nightly", 'every = "30m"\ngoal = "tests green"\nprompt = "Fix add()"\n')
    commit_all(repo, "a loop")
    now = datetime.now(UTC)
    until = (now + timedelta(hours=2)).replace(microsecond=0)
    append(repo, "tick_started", RUN, "nightly", None, kind="tick", maker="maker")
    append(
        repo,
        "note",
        RUN,
        "nightly",
        "fix",
        what="backend_paused",
        backend="command",
        until=until.isoformat(),
        kind="quota",
        said=SAID,
        stated=True,
    )
    pause = Pause("command", until, "quota", SAID, now)

    with dashboard(repo) as ui, ui.session() as session:
        loops = session.get(f"{ui.base}/loops").text
        run = session.get(f"{ui.base}/runs/{RUN}").text

    (section,) = re.findall(r"<section id=paused>.*?</section>", loops, re.S)
    (item,) = re.findall(r'<li data-backend="command"[^>]*>.*?</li>', section, re.S)
    assert f'data-until="{until.isoformat()}"' in item
    assert f"<b>{pause.describe()}</b>" in item  # quota used up until HH:MM (command)
    assert "holds nightly; they resume by themselves" in item
    assert "&lt;img src=x onerror=&quot;window.pwned=1&quot;&gt;" in item  # words stay text
    assert "You&#x27;ve hit your limit · resets 7am" in item
    assert "\x1b" not in loops
    (row,) = re.findall(r'<tr data-loop="nightly">.*?</tr>', loops, re.S)
    assert pause.describe() in row  # the loop's state, as `loopctl status` says it
    assert "backend command paused until " in run  # the run's own timeline
    assert "<img src=x" not in run


def test_without_a_pause_the_loops_page_has_no_paused_section(repo: Path) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "nightly", 'every = "30m"\ngoal = "tests green"\nprompt = "Fix add()"\n')
    commit_all(repo, "a loop")
    past = datetime.now(UTC) - timedelta(minutes=5)
    append(
        repo,
        "note",
        None,
        "nightly",
        None,
        what="backend_paused",
        backend="command",
        until=past.isoformat(),
        kind="rate-limit",
        said="slow down",
    )

    with dashboard(repo) as ui, ui.session() as session:
        loops = session.get(f"{ui.base}/loops").text

    assert "id=paused" not in loops  # a pause whose time has passed holds nothing


def test_the_report_page_says_why_up_stopped(repo: Path) -> None:
    make_project(repo, "fixer.py")
    append(repo, "scheduler_started", None, None, None, by="up", pid=4242, loops={})
    append(
        repo,
        "scheduler_stopped",
        None,
        None,
        None,
        by="up",
        pid=4242,
        ticks=3,
        failed=0,
        reason="the mandate's deadline (07:30)",
        checkpointed=1,
    )

    with dashboard(repo) as ui, ui.session() as session:
        page = session.get(f"{ui.base}/report?since=24h").text

    (section,) = re.findall(r'<section data-section="stopped">.*?</section>', page, re.S)
    assert "<h2>Why up stopped (1)</h2>" in section
    assert re.search(
        r"up stopped at \d\d:\d\d: the mandate&#x27;s deadline \(07:30\); 1 turn checkpointed",
        section,
    )
    assert "<code>loopctl up</code>" in section

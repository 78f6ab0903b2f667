"""A night compressed to seconds (issue 30, the judged scenario): `up --until` over loops that
work, one turn cut short by the deadline, `[notify]` told once why `up` stopped and what it
checkpointed, and the morning report saying the same; `run --until` likewise.

Real `up`/`run` processes in real repositories, scripted agents (tests/agents/fixer.py reports
$0.01 a call; slow_fixer.py blocks until the test releases it), a real webhook receiver on
127.0.0.1 (support/webhook.py). Every wait is on the journal or a file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events, last_seq, wait_event
from support.night import append
from support.processes import SAFETY_NET, Proc, read_pid, running_procs, spawn, wait_for
from support.repos import commit_all, make_project, toml_value, write_agent, write_loop
from support.webhook import Hook

from loopctl.definitions.config import Config
from loopctl.journal.events import EventLog
from loopctl.journal.report import Section, build_report
from loopctl.paths import ProjectPaths

LOOP = 'goal = "tests green"\nprompt = "Fix add() in calc.py"\n'


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    yield from running_procs()


def a_night(repo: Path, tmp_path: Path, hook: Hook, notify_extra: str = "") -> tuple[Path, Path]:
    """`quick` fixes calc.py every second ($0.01 a call); `long`'s maker blocks until released.
    `on = []`: no inbox item is sent, so every post is about `up` itself."""
    marker, release = tmp_path / "long-started", tmp_path / "release"
    make_project(
        repo,
        "fixer.py",
        config_extra=f"\n[notify]\nwebhook = {toml_value(hook.url)}\non = []\n{notify_extra}",
    )
    write_agent(repo, "blocker", "slow_fixer.py", marker, release)
    write_loop(repo, "quick", 'every = "1s"\n' + LOOP)
    write_loop(repo, "long", 'every = "1s"\n' + LOOP + '\n[maker]\nagent = "blocker"\n')
    commit_all(repo, "a night of two loops")
    return marker, release


def report(repo: Path, *flags: str) -> dict[str, Any]:
    shown = run_loopctl(repo, "report", "--since", "all", "--no-mark", "--json", *flags)
    assert_clean_exit(shown, 0)
    found: dict[str, Any] = json.loads(shown.stdout)["report"]
    return found


def test_a_night_with_until_stops_at_its_deadline_says_why_once_and_in_the_morning_report(
    repo: Path, tmp_path: Path, procs: list[Proc], hook: Hook
) -> None:
    marker, release = a_night(repo, tmp_path, hook)
    up = spawn(procs, repo, tmp_path, "up", "--until", "20s")
    wait_for(lambda: read_pid(marker), "the long maker to start", timeout=SAFETY_NET)

    code = up.wait(timeout=SAFETY_NET)

    assert code == 0, up.output
    assert re.search(r"stopped at \d\d:\d\d:\d\d: the mandate's deadline \(", up.output)
    # The night did work: the quick loop ticked and finished tasks before the deadline.
    done = [e for e in events(repo, "task_finished") if e.loop == "quick"]
    assert done
    assert {e.data["status"] for e in done} == {"done"}
    # The long turn was cut short (the quick loop's running tick too, if one was running).
    cut = events(repo, "run_interrupted")
    (interrupted,) = [e for e in cut if e.loop == "long"]
    assert all(
        e.data["reason"].startswith("`loopctl up` stopped: the mandate's deadline") for e in cut
    )
    turns = f"{len(cut)} turn{'s' if len(cut) != 1 else ''} checkpointed"
    # [notify] was told once, why and what was checkpointed.
    (post,) = hook.posts
    first = post["text"].splitlines()[0]
    assert re.fullmatch(
        rf"loopctl up stopped at \d\d:\d\d:\d\d: the mandate's deadline \(.+\); {turns}", first
    )
    assert f"- long run {interrupted.run}  → loopctl replay {interrupted.run}" in post["text"]
    assert "resume where they stopped on the next `loopctl up`" in post["text"]
    stopped = post["stopped"]
    assert (stopped["by"], stopped["bound"]) == ("up", "deadline")
    assert {"loop": "long", "run": interrupted.run} in stopped["checkpointed"]
    assert len(stopped["checkpointed"]) == len(cut)
    assert not events(repo, "notify_failed")
    # The morning report says why up stopped, and the runs that wait to resume.
    morning = report(repo)
    (why,) = morning["stopped"]
    assert "the mandate's deadline" in why["reason"]
    assert (why["by"], why["checkpointed"], why["killed"]) == ("up", len(cut), False)
    (line,) = morning["sections"]["stopped"]
    assert re.fullmatch(
        rf"up stopped at \d\d:\d\d: the mandate's deadline \(.+\); {turns}", line["text"]
    )
    assert line["commands"] == ["loopctl up"]
    (waiting,) = [x for x in morning["sections"]["failed"] if x["run"] == interrupted.run]
    assert waiting["outcome"] == "interrupted"
    assert "the mandate's deadline" in waiting["text"]
    text = run_loopctl(repo, "report", "--since", "all", "--no-mark").stdout
    assert "Why up stopped (1):" in text
    assert f"; {turns}  → loopctl up" in text

    # The next `up` resumes it; once done, the report no longer lists it as waiting.
    release.touch()
    mark = last_seq(repo)
    spawn(procs, repo, tmp_path, "up")
    wait_event(repo, "run_resumed", after=mark, what="the checkpointed tick", timeout=SAFETY_NET)
    wait_for(
        lambda: [e for e in events(repo, "tick_finished") if e.run == interrupted.run],
        "the resumed tick to finish",
        timeout=SAFETY_NET,
    )
    assert_clean_exit(run_loopctl(repo, "down", timeout=SAFETY_NET), 0)

    after = report(repo)
    assert not [x for x in after["sections"].get("failed", []) if x["run"] == interrupted.run]
    texts = [x["text"] for x in after["sections"]["stopped"]]
    assert len(texts) == 2
    assert re.fullmatch(r"up stopped at \d\d:\d\d by `loopctl down`, Ctrl-C or a signal", texts[1])
    assert len(hook.posts) == 1  # `down` is no mandate: nothing more was sent


def test_the_spend_cap_with_report_on_stop_is_one_message_saying_why(
    repo: Path, tmp_path: Path, procs: list[Proc], hook: Hook
) -> None:
    make_project(
        repo,
        "fixer.py",
        config_extra=f"\n[notify]\nwebhook = {toml_value(hook.url)}\non = []\n"
        "report_on_stop = true\n",
    )
    write_loop(repo, "quick", 'every = "1s"\n' + LOOP)
    commit_all(repo, "a loop")

    up = spawn(procs, repo, tmp_path, "up", "--max-usd", "0.015")
    code = up.wait(timeout=SAFETY_NET)

    assert code == 0, up.output
    (post,) = hook.posts  # the report of the session is the one message, titled with why
    first = post["text"].splitlines()[0]
    assert first.startswith("loopctl up stopped at ")
    cap = r"the mandate's spend cap \(\$0.020 of \$0.015\); \d turns? checkpointed — its session"
    assert re.search(cap, first)
    assert post["stopped"]["bound"] == "spend-cap"
    assert post["report"]["sections"]["done"]
    assert "spend cap" in post["report"]["stopped"][0]["reason"]


def test_run_until_checkpoints_its_tick_and_says_why(
    repo: Path, tmp_path: Path, procs: list[Proc], hook: Hook
) -> None:
    marker, _ = a_night(repo, tmp_path, hook)

    run = spawn(procs, repo, tmp_path, "run", "long", "--every", "1h", "--until", "15s")
    wait_for(lambda: read_pid(marker), "the long maker to start", timeout=SAFETY_NET)
    code = run.wait(timeout=SAFETY_NET)

    assert code == 0, run.output
    assert "mandate: until " in run.output
    assert "then running ticks are checkpointed and the run stops" in run.output
    assert re.search(
        r"stopped at \d\d:\d\d:\d\d: the mandate's deadline \(.+\); 1 turn checkpointed,"
        r" they resume on the next `loopctl run long`",
        run.output,
    )
    (started,) = events(repo, "scheduler_started")
    assert (started.data["by"], bool(started.data["until"])) == ("run", True)
    (interrupted,) = events(repo, "run_interrupted")
    assert interrupted.data["reason"].startswith("`loopctl run` stopped: the mandate's deadline")
    (post,) = hook.posts
    assert post["text"].startswith("loopctl run long stopped at ")
    assert post["stopped"]["checkpointed"] == [{"loop": "long", "run": interrupted.run}]
    (line,) = report(repo)["sections"]["stopped"]
    assert line["text"].startswith("run long stopped at ")
    assert line["commands"] == ["loopctl run long"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--once", "--until", "1h"), "--until and --max-usd bound a run on a trigger"),
        (("--every", "1h", "--max-usd", "0"), "--max-usd must be more than 0"),
        (("--every", "1h", "--until", "25:99"), "--until: invalid time '25:99'"),
    ],
)
def test_a_bad_run_mandate_is_one_line_and_exit_2(
    repo: Path, flags: tuple[str, ...], message: str
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "quick", 'every = "1h"\n' + LOOP)
    commit_all(repo, "a loop")

    refused = run_loopctl(repo, "run", "quick", *flags)

    assert_clean_exit(refused, 2)
    assert message in refused.stderr
    assert not events(repo, "scheduler_started")


def test_an_up_that_recorded_no_stop_is_reported_as_ended_without_a_word(repo: Path) -> None:
    make_project(repo, "fixer.py")
    append(repo, "scheduler_started", None, None, None, by="up", pid=111, loops={"a": "every 1m"})
    append(repo, "scheduler_started", None, None, None, by="up", pid=222, loops={"a": "every 1m"})
    append(repo, "scheduler_stopped", None, None, None, by="up", pid=222, ticks=0, failed=0)
    log = EventLog(ProjectPaths(repo).events_file).read()

    found = build_report(log, since=None, now=log[-1].time, tz=log[-1].time.tzinfo, config=Config())

    killed, stopped = found.section(Section.STOPPED)
    assert killed.text.startswith("up (pid 111) ended without a word (killed?) before ")
    assert stopped.text.startswith("up stopped at ")
    assert [s.to_json()["killed"] for s in found.stops] == [True, False]

"""`loopctl report`: the morning report over logs real ticks wrote (scripted agents, real git,
a real remote), with the outcomes no path records yet (stalled, rate-limited) appended as their
writers will record them (support/night.py); the digest reaching a real webhook; the session's
report from `up`. The dashboard's page: tests/ui/test_ui_report.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.journal import events
from support.night import (
    LIMITED_RUN,
    STALLED_RUN,
    a_night,
    append,
    report_json,
    report_text,
    shown_marks,
    stalled_and_rate_limited,
)
from support.repos import make_project, toml_value, write_config
from support.webhook import Hook

from loopctl.commands.report import parse_since
from loopctl.definitions import load_project
from loopctl.errors import UsageError
from loopctl.journal.notify import send_digest_if_due
from loopctl.journal.recorder import Recorder


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
    assert shown["empty"] is False
    assert shown["format"] == 1


def _sections(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines()[1:]:
        if line.startswith("- "):
            current.append(line)
        else:
            current = found.setdefault(line.split(" (")[0].rstrip(":"), [])
    return found


# --- the window -------------------------------------------------------------------------------


NOW = datetime(2026, 12, 5, 7, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "since"),
    [
        ("24h", NOW - timedelta(hours=24)),
        ("90m", NOW - timedelta(minutes=90)),
        ("1h30m", NOW - timedelta(minutes=90)),
        ("all", None),
        ("2026-12-04T22:00", datetime(2026, 12, 4, 22, 0, tzinfo=UTC)),  # local: UTC here
        ("2026-12-04T23:00+01:00", datetime(2026, 12, 4, 22, 0, tzinfo=UTC)),
        ("2026-12-04", datetime(2026, 12, 4, 0, 0, tzinfo=UTC)),
        ("07:00", datetime(2026, 12, 5, 7, 0, tzinfo=UTC)),  # this morning
        ("22:15", datetime(2026, 12, 4, 22, 15, tzinfo=UTC)),  # not yet today: last night
        ("last", datetime(2026, 12, 5, 6, 0, tzinfo=UTC)),
    ],
)
def test_since_forms(text: str, since: datetime | None) -> None:
    window = parse_since(text, NOW, datetime(2026, 12, 5, 6, 0, tzinfo=UTC), UTC)
    assert window.since == since


def test_since_last_before_any_report_is_the_last_day() -> None:
    window = parse_since("last", NOW, None, UTC)
    assert window.since == NOW - timedelta(hours=24)
    assert window.words == "the last 24 hours (no report shown before) until 2026-12-05 07:30"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("yesterday", "expected last, all, a duration like 24h or 90m, a time of day like 07:30"),
        ("25:00", "expected last, all"),
        ("0m", "'0m' is no time at all"),
        ("2027-01-01T00:00", "'2027-01-01T00:00' is in the future"),
    ],
)
def test_a_bad_since_is_one_line_and_exit_2(repo: Path, text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says):
        parse_since(text, NOW, None, UTC)
    done = run_loopctl(repo, "report", "--since", text)
    assert_clean_exit(done, 2)
    (line,) = done.stderr.splitlines()
    assert line.startswith("loopctl: --since: "), line
    assert says in line, line
    assert done.stdout == ""
    assert events(repo, "note") == []  # nothing was shown, so nothing moved


# --- "since you last looked" ------------------------------------------------------------------


def test_last_moves_only_when_a_report_is_shown(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    assert invoke(monkeypatch, repo, "goal", "tests green").exit_code == 0

    peek = report_text(monkeypatch, repo, "--no-mark")
    assert "Done (1):" in peek
    assert shown_marks(repo) == []
    first = report_text(monkeypatch, repo)
    # The same window: --no-mark moved nothing (the header's "until" is the clock's minute).
    assert first.splitlines()[1:] == peek.splitlines()[1:]
    assert first.splitlines()[0].split(" until ")[0] == peek.splitlines()[0].split(" until ")[0]
    (mark,) = shown_marks(repo)
    assert mark["via"] == "text"

    # Looked at already: an empty night is one line.
    again = report_text(monkeypatch, repo)
    assert again.splitlines()[0].startswith("loopctl report — since your last report (")
    assert again.splitlines()[1:] == ["Nothing happened, and nothing waits for you."]
    assert report_json(monkeypatch, repo, "--no-mark")["empty"] is True
    assert len(shown_marks(repo)) == 2

    # Something new: only it shows since last; `--since all` shows both, and marks as json.
    stalled_and_rate_limited(repo)
    since_last = report_json(monkeypatch, repo)
    assert set(since_last["sections"]) == {"waiting", "stalled", "rate-limited"}
    assert since_last["since"] == shown_marks(repo)[1]["until"]
    assert shown_marks(repo)[-1]["via"] == "json"
    everything = report_json(monkeypatch, repo, "--since", "all", "--no-mark")
    assert everything["since"] is None
    assert set(everything["sections"]) == {"done", "waiting", "stalled", "rate-limited"}


def test_a_long_section_is_capped_with_the_command_that_lists_it_all(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    for n in range(11):
        run = f"20261205T0{n:02d}000-f{n:03d}"
        append(repo, "tick_started", run, "nightly", None, kind="tick")
        append(repo, "task_finished", run, "nightly", f"t{n}", status="failed", reason=f"boom {n}")

    text = report_text(monkeypatch, repo, "--no-mark")

    failed = _sections(text)["Failed or stopped"]
    assert len(failed) == 9
    more = failed[-1]
    assert more.startswith("- …and 3 more: loopctl report --since ")
    command = more.split(": ", 1)[1]
    assert command.endswith(" --all --no-mark")
    everything = run_loopctl(repo, *command.split()[1:])
    assert everything.returncode == 0, everything.stderr
    assert len(_sections(everything.stdout)["Failed or stopped"]) == 11
    assert shown_marks(repo) == []


def test_an_older_log_without_outcomes_reads_them_from_statuses(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    run = "20261205T010000-01d0"
    append(repo, "tick_started", run, "nightly", None, kind="tick")
    append(repo, "attempt_started", run, "nightly", "a", attempt=1)
    append(repo, "budget_stopped", run, "nightly", "a", reason="max_usd 1.00 reached")
    append(repo, "task_finished", run, "nightly", "a", status="stopped", reason="budget")
    append(
        repo,
        "task_finished",
        run,
        "nightly",
        "b",
        status="stopped",
        reason="3 identical failures in a row (fingerprint ab12): boom",
    )
    append(repo, "task_finished", run, "nightly", "c", status="done", reason="", attempts=0)
    append(repo, "task_finished", run, "nightly", "d", status="skipped", reason="base green")

    # A tick item 6's reviewer cap held: counted, not a section (no task ran).
    held = "20261205T020000-4e1d"
    append(repo, "tick_started", held, "nightly", None, kind="tick")
    append(
        repo, "tick_finished", held, "nightly", None, status="done", outcome="waiting-for-review"
    )

    shown = report_json(monkeypatch, repo, "--no-mark")

    outcomes = [(line["task"], line["outcome"]) for line in shown["sections"]["failed"]]
    assert outcomes == [("a", "budget-stop"), ("b", "repeated-failure")]
    assert "done" not in shown["sections"]
    assert shown["nothing_to_do"] == 2
    assert shown["waiting_for_review"] == 1
    text = report_text(monkeypatch, repo, "--no-mark").splitlines()
    assert text[1:3] == [
        "2 tick(s) found nothing to do.",
        "1 tick(s) waited for review ([review] max_open)  → loopctl inbox",
    ]


# --- the digest and --notify ------------------------------------------------------------------


def test_notify_sends_the_report_and_the_daily_digest_is_the_report(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hook: Hook
) -> None:
    night = a_night(repo, tmp_path, monkeypatch)
    config = (repo / ".loop" / "config.toml").read_text()
    write_config(
        repo, config + f'\n[notify]\nwebhook = {toml_value(hook.url)}\ndigest = "07:30"\non = []\n'
    )
    posted = len(hook.posts)

    sent = run_loopctl(repo, "report", "--notify")

    assert sent.returncode == 0, sent.stderr
    assert sent.stdout == "report sent (webhook)\n"
    post = hook.posts[posted]
    assert post["text"].startswith("loopctl report — the last 24 hours")
    assert f"→ loopctl inbox show {night['waiting']} · loopctl inbox approve" in post["text"]
    assert post["report"]["sections"]["stalled"][0]["item"] == "st4ll3"
    assert shown_marks(repo)[-1]["via"] == "notify"

    now = datetime.now(UTC)
    slot = now.astimezone(UTC).strftime("%H:%M")
    write_config(
        repo, config + f'\n[notify]\nwebhook = {toml_value(hook.url)}\ndigest = "{slot}"\non = []\n'
    )
    assert send_digest_if_due(Recorder(load_project(repo)), now, tz=UTC) is True
    digest = hook.posts[-1]
    assert digest["text"].startswith(f"loopctl digest — {now:%Y-%m-%d %H:%M}, the last 24 hours")
    assert "Stalled (1):" in digest["text"]
    assert "Rate-limited (1):" in digest["text"]
    assert f"loopctl inbox reject {night['waiting']}" in digest["text"]
    assert set(digest["report"]["sections"]) >= {"done", "delivered", "waiting"}
    assert digest["digest"]["waiting"]  # the digest's own JSON is still there


def test_notify_without_a_channel_is_one_line_and_moves_nothing(repo: Path) -> None:
    make_project(repo, "fixer.py")
    done = run_loopctl(repo, "report", "--notify")
    assert_clean_exit(done, 2)
    assert done.stderr.startswith("loopctl: --notify: no [notify] channel in .loop/config.toml")
    assert shown_marks(repo) == []


def test_a_repository_loopctl_never_ran_in_gets_one_line_and_no_loop_folder(repo: Path) -> None:
    done = run_loopctl(repo, "report")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == ["Nothing happened, and nothing waits for you."]
    assert not (repo / ".loop").exists()


def test_up_sends_the_report_of_its_session_when_it_stops(
    repo: Path, tmp_path: Path, hook: Hook
) -> None:
    from support.processes import running_procs, spawn, wait_for

    make_project(repo, "fixer.py")
    config = (repo / ".loop" / "config.toml").read_text()
    write_config(
        repo,
        config + f"\n[notify]\nwebhook = {toml_value(hook.url)}\nreport_on_stop = true\non = []\n",
    )
    (repo / ".loop" / "loops").mkdir(exist_ok=True)
    (repo / ".loop" / "loops" / "beat.toml").write_text('every = "1h"\nprompt = "Fix add()"\n')
    for procs in running_procs():
        spawn(procs, repo, tmp_path, "up")
        wait_for(lambda: events(repo, "scheduler_started") or None, "up to start")
        stalled_and_rate_limited(repo)  # what happened while it ran
        assert hook.posts == []
        down = run_loopctl(repo, "down")
        assert down.returncode == 0, down.stderr
        wait_for(lambda: hook.posts or None, "the session's report from up")
    (post,) = hook.posts
    assert post["text"].startswith("loopctl up stopped — its session, since ")
    assert "Stalled (1):" in post["text"]
    assert f"→ loopctl replay {LIMITED_RUN}" in post["text"]
    assert post["report"]["sections"]["stalled"][0]["item"] == "st4ll3"
    assert shown_marks(repo) == []  # a notification is not a report read

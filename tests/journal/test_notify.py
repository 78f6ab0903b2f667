"""Notifications: a real local webhook receiver, retries, failures that never break a loop,
a notify command, and the daily digest."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke, run_loopctl
from support.journal import events
from support.repos import PY, all_text_under, make_project, toml_value

from loopctl.definitions import load_project
from loopctl.journal.notify import build_digest, digest_slot, send_digest_if_due, send_webhook
from loopctl.journal.recorder import Recorder

HOOK_PATH = "/services/T000/B000/hooksecretpath"


class Receiver:
    """A webhook endpoint on 127.0.0.1 that answers with the given statuses, then 200."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.requests: list[dict[str, Any]] = []
        self.got = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append(
                    {
                        "path": self.path,
                        "type": self.headers["Content-Type"],
                        "json": json.loads(body),
                    }
                )
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
                receiver.got.set()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{HOOK_PATH}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver([])
    yield server
    server.close()


def failing_goal(repo: Path, monkeypatch: pytest.MonkeyPatch, notify: str) -> int:
    make_project(repo, "never_fixes.py", config_extra=f"\n[notify]\n{notify}\n")
    return invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1").exit_code


def test_a_webhook_gets_slack_text_and_the_item_and_the_url_stays_secret(
    repo: Path, monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    monkeypatch.setenv("LOOPCTL_TEST_HOOK", receiver.url)

    code = failing_goal(repo, monkeypatch, 'webhook_env = "LOOPCTL_TEST_HOOK"')

    assert code == 1
    (request,) = receiver.requests
    (opened,) = events(repo, "inbox_opened")
    item_id = opened.data["id"]
    assert request["path"] == HOOK_PATH
    assert request["type"] == "application/json"
    assert request["json"]["text"].startswith(
        f"loopctl inbox: failed {item_id} in goal/tests-green"
    )
    assert request["json"]["item"]["id"] == item_id
    assert request["json"]["item"]["evidence"]["attempts"] == 1
    (sent,) = events(repo, "notified")
    assert (sent.data["channel"], sent.data["item"], sent.data["attempts"]) == (
        "webhook",
        item_id,
        1,
    )
    for path, text in all_text_under(repo / ".loop"):
        assert "hooksecretpath" not in text, path
        assert str(receiver.server.server_address[1]) not in text, path


def test_a_webhook_answering_500_is_retried_until_it_takes(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flaky = Receiver([500])
    try:
        code = failing_goal(repo, monkeypatch, f"webhook = {toml_value(flaky.url)}")
    finally:
        flaky.close()

    assert code == 1
    assert len(flaky.requests) == 2
    assert flaky.requests[0]["json"] == flaky.requests[1]["json"]
    (sent,) = events(repo, "notified")
    assert sent.data["attempts"] == 2


def test_a_failing_webhook_is_recorded_and_never_breaks_the_loop(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = Receiver([500, 500, 500, 500, 500])
    try:
        code = failing_goal(repo, monkeypatch, f"webhook = {toml_value(broken.url)}")
    finally:
        broken.close()

    assert code == 1  # the goal's own verdict, not a notification error
    assert len(broken.requests) == 4  # one try and three retries
    (failed,) = events(repo, "notify_failed")
    assert failed.data["error"] == "webhook failed after 4 attempt(s): HTTP 500"
    assert events(repo, "tick_finished")[-1].data["status"] == "failed"
    log = (repo / ".loop" / "log" / "events.jsonl").read_text()
    assert "hooksecretpath" not in log


def test_a_client_error_is_not_retried_and_a_missing_variable_is_recorded(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = Receiver([404])
    try:
        with pytest.raises(Exception, match=r"webhook failed after 1 attempt\(s\): HTTP 404"):
            send_webhook(refused.url, {"text": "x"}, sleep=lambda s: None)
    finally:
        refused.close()
    monkeypatch.delenv("LOOPCTL_UNSET_HOOK", raising=False)

    assert failing_goal(repo, monkeypatch, 'webhook_env = "LOOPCTL_UNSET_HOOK"') == 1
    (failed,) = events(repo, "notify_failed")
    assert failed.data["error"] == "$LOOPCTL_UNSET_HOOK is not set"


def test_a_notify_command_gets_the_item_as_arguments_and_json(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "notified.json"
    script = (
        "import json, sys; json.dump({'argv': sys.argv[1:], 'stdin': json.load(sys.stdin)},"
        f" open({str(out)!r}, 'w'))"
    )
    command = toml_value([PY, "-c", script, "{kind}", "{id}", "{text}", "{outcome}"])

    assert failing_goal(repo, monkeypatch, f'command = {command}\non = ["failed"]') == 1

    got = json.loads(out.read_text())
    item_id = events(repo, "inbox_opened")[0].data["id"]
    assert got["argv"][:2] == ["failed", item_id]
    assert f"loopctl inbox show {item_id}" in got["argv"][2]
    # The outcome, a placeholder of its own and in the default text (issue 30).
    assert got["argv"][3] == "failed"
    assert f"{item_id} in goal/tests-green (failed): " in got["argv"][2]
    assert got["stdin"]["item"]["kind"] == "failed"
    assert got["stdin"]["item"]["outcome"] == "failed"
    assert [e.data["channel"] for e in events(repo, "notified")] == ["command"]


def test_items_of_kinds_not_listed_in_on_are_not_sent(
    repo: Path, monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    assert (
        failing_goal(repo, monkeypatch, f'webhook = {toml_value(receiver.url)}\non = ["approval"]')
        == 1
    )
    assert receiver.requests == []
    assert events(repo, "notified") == []


def test_the_digest_is_sent_once_per_daily_slot(
    repo: Path, monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    failing_goal(
        repo, monkeypatch, f'webhook = {toml_value(receiver.url)}\ndigest = "08:00"\non = []'
    )
    rec = Recorder(load_project(repo))
    receiver.requests.clear()
    day = datetime(2026, 11, 30, 8, 30, tzinfo=UTC)

    assert send_digest_if_due(rec, day, tz=UTC) is True
    assert send_digest_if_due(rec, day.replace(hour=23), tz=UTC) is False
    # Before 08:00 the latest slot is still yesterday's, already sent.
    assert send_digest_if_due(rec, datetime(2026, 12, 1, 7, 59, tzinfo=UTC), tz=UTC) is False
    assert send_digest_if_due(rec, datetime(2026, 12, 1, 8, 0, tzinfo=UTC), tz=UTC) is True

    assert len(receiver.requests) == 2
    first = receiver.requests[0]["json"]
    assert first["text"].startswith("loopctl digest — 2026-11-30 08:30")
    assert "Waiting for you (1):" in first["text"]
    assert len(first["digest"]["waiting"]) == 1
    assert [e.data["slot"] for e in events(repo, "digest_sent")] == [
        "2026-11-30T08:00:00+00:00",
        "2026-12-01T08:00:00+00:00",
    ]


def test_the_first_up_before_the_digest_time_sends_one_digest_at_that_time(
    repo: Path, monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    failing_goal(
        repo,
        monkeypatch,
        f'webhook = {toml_value(receiver.url)}\ndigest = "09:00"\non = []',
    )
    rec = Recorder(load_project(repo))
    receiver.requests.clear()

    # The first `up` starts at 08:00: yesterday's 09:00 was never sent, and is not sent now.
    assert send_digest_if_due(rec, datetime(2026, 11, 30, 8, 0, tzinfo=UTC), tz=UTC) is False
    assert send_digest_if_due(rec, datetime(2026, 11, 30, 8, 59, tzinfo=UTC), tz=UTC) is False
    assert send_digest_if_due(rec, datetime(2026, 11, 30, 9, 0, 2, tzinfo=UTC), tz=UTC) is True
    assert send_digest_if_due(rec, datetime(2026, 11, 30, 9, 0, 4, tzinfo=UTC), tz=UTC) is False
    # `up` down at 09:00 the next day and back at 09:40: that day's digest goes out, late.
    assert send_digest_if_due(rec, datetime(2026, 12, 1, 9, 40, tzinfo=UTC), tz=UTC) is True
    # Down over 09:00 on the 2nd, back on the 3rd at 08:00: nothing until the 3rd's 09:00.
    assert send_digest_if_due(rec, datetime(2026, 12, 3, 8, 0, tzinfo=UTC), tz=UTC) is False
    assert send_digest_if_due(rec, datetime(2026, 12, 3, 9, 0, tzinfo=UTC), tz=UTC) is True

    assert len(receiver.requests) == 3
    assert [e.data["slot"] for e in events(repo, "digest_sent")] == [
        "2026-11-30T09:00:00+00:00",
        "2026-12-01T09:00:00+00:00",
        "2026-12-03T09:00:00+00:00",
    ]


def test_a_failing_notify_command_is_logged_with_what_it_said_on_stderr(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = (
        "import sys; sys.stdin.read();"
        " print('channel #ops not found: check SLACK_CHANNEL', file=sys.stderr); sys.exit(3)"
    )
    command = toml_value([PY, "-c", script])

    assert failing_goal(repo, monkeypatch, f"command = {command}") == 1

    (failed,) = events(repo, "notify_failed")
    assert failed.data["channel"] == "command"
    assert failed.data["error"] == (
        f"notify command `{PY}` exited 3: channel #ops not found: check SLACK_CHANNEL"
    )


def test_digest_on_demand_and_its_pieces(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failing_goal(repo, monkeypatch, 'command = ["true"]')
    shown = run_loopctl(repo, "inbox", "--digest", "--json")
    assert shown.returncode == 0, shown.stderr
    digest = json.loads(shown.stdout)["digest"]
    assert digest["loops"][0]["loop"] == "goal"
    assert digest["loops"][0]["runs"] == {"failed": 1}
    assert digest["opened"] == 1

    later = build_digest(events(repo), datetime.now(UTC).replace(year=datetime.now(UTC).year + 1))
    assert later.loops == ()
    assert "No loop ran." in later.text()
    assert len(later.waiting) == 1  # what waits is shown however old it is
    assert digest_slot(datetime(2026, 3, 1, 7, 0, tzinfo=UTC), "08:00", UTC) == datetime(
        2026, 2, 28, 8, 0, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("notify", "message"),
    [
        ('webhook_env = "not a name"', "4: 'webhook_env' must name an environment variable"),
        (
            'webhook = "https://x"\nwebhook_env = "HOOK"',
            "5: give 'webhook' or 'webhook_env', not both",
        ),
        ('digest = "8am"', "4: 'digest' must be a time like \"08:00\", not '8am'"),
        (
            'on = ["failure"]',
            "4: 'on' names 'failure'; inbox kinds are approval, failed, escalation",
        ),
    ],
)
def test_notify_settings_are_validated_with_their_line(
    repo: Path, notify: str, message: str
) -> None:
    config = repo / ".loop" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f"version = 1\n\n[notify]\n{notify}\n")

    problems = [p.render(repo) for p in load_project(repo).errors]

    assert any(p.startswith(f".loop/config.toml:{message}") for p in problems), problems


def test_a_running_up_sends_the_daily_digest(
    repo: Path, tmp_path: Path, receiver: Receiver
) -> None:
    from support.processes import running_procs, spawn, wait_for
    from support.repos import commit_all, write_config

    make_project(repo, "fixer.py")
    config = (repo / ".loop" / "config.toml").read_text()
    # This minute: today's slot has just come, so the first maintenance pass sends it.
    at = datetime.now().astimezone().strftime("%H:%M")
    write_config(
        repo,
        config + f'\n[notify]\nwebhook = {toml_value(receiver.url)}\ndigest = "{at}"\non = []\n',
    )
    (repo / ".loop" / "loops").mkdir(exist_ok=True)
    (repo / ".loop" / "loops" / "beat.toml").write_text('every = "1h"\nprompt = "Fix add()"\n')
    commit_all(repo, "digest")
    for procs in running_procs():
        spawn(procs, repo, tmp_path, "up")
        sent = wait_for(lambda: events(repo, "digest_sent") or None, "the digest from up")
        run_loopctl(repo, "down")
    assert len(sent) == 1
    assert receiver.requests[-1]["json"]["text"].startswith("loopctl digest")

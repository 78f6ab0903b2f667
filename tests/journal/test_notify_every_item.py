"""Every inbox item notifies, whoever opens it (issue 15): not only the engine's and delivery's.

A blown daily fuse (the scheduler), a tick that cannot start (`up`) and a loop definition that
does not parse (`up`'s reloader) each open an item; each must reach a real webhook on 127.0.0.1
and a real notify command, and leave a `notified` event per channel.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events, wait_event
from support.processes import running_procs, spawn, wait_for
from support.repos import PY, commit_all, make_project, toml_value, write_loop


class Hook:
    """A webhook receiver on 127.0.0.1 that keeps every JSON body it is sent."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.bodies.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook()
    yield server
    server.close()


def notify_config(hook: Hook, received: Path) -> str:
    """`[notify]` with both channels; the command appends what it got to `received`."""
    script = (
        "import json, sys; item = json.load(sys.stdin)['item'];"
        f" open({str(received)!r}, 'a').write(json.dumps([sys.argv[1:], item]) + '\\n')"
    )
    command = toml_value([PY, "-c", script, "{kind}", "{id}"])
    return f"\n[notify]\nwebhook = {toml_value(hook.url)}\ncommand = {command}\n"


def command_got(received: Path) -> list[tuple[list[str], dict[str, Any]]]:
    if not received.exists():
        return []
    return [tuple(json.loads(line)) for line in received.read_text().splitlines()]  # type: ignore[misc]


def assert_notified(repo: Path, hook: Hook, received: Path, item_id: str, kind: str) -> None:
    """Both channels got item `item_id` and the log says so, once per channel."""
    sent = [e for e in events(repo, "notified") if e.data["item"] == item_id]
    assert sorted(e.data["channel"] for e in sent) == ["command", "webhook"]
    assert [b["item"]["kind"] for b in hook.bodies if b["item"]["id"] == item_id] == [kind]
    assert [argv for argv, item in command_got(received) if item["id"] == item_id] == [
        [kind, item_id]
    ]
    assert not [e for e in events(repo, "notify_failed") if e.data.get("item") == item_id]


def test_a_blown_daily_fuse_notifies_its_escalation(repo: Path, tmp_path: Path, hook: Hook) -> None:
    received = tmp_path / "received.jsonl"
    # The fixer reports 1200 tokens a tick: the first tick blows a 1000-token day.
    make_project(
        repo,
        "fixer.py",
        config_extra="\n[budget]\nmax_tokens_per_day = 1000\n" + notify_config(hook, received),
    )
    write_loop(repo, "beat", 'goal = "tests green"\nprompt = "Fix add() in calc.py"\n')
    commit_all(repo, "a loop")

    done = run_loopctl(repo, "run", "beat", "--every", "1s", "--max-ticks", "3")

    assert_clean_exit(done, 1)
    (opened,) = events(repo, "inbox_opened")
    assert opened.data["kind"] == "escalation"
    assert opened.data["summary"].startswith("daily budget fuse: 1200 of 1000 tokens")
    assert_notified(repo, hook, received, opened.data["id"], "escalation")


def test_up_notifies_a_tick_that_cannot_start_and_an_invalid_loop(
    repo: Path, tmp_path: Path, hook: Hook
) -> None:
    received = tmp_path / "received.jsonl"
    make_project(repo, "fixer.py", config_extra=notify_config(hook, received))
    # Its check program does not exist: every tick fails before any work (a tick error).
    write_loop(
        repo,
        "nocheck",
        'every = "1s"\nprompt = "Fix add()"\n[checker]\ncommand = ["no-such-check-program"]\n',
    )
    # A typo: the loop is left out, and waits in the inbox for its fix.
    write_loop(repo, "broken", 'prompt = "Nightly clean-up."\nevrey = "1d"\n')
    commit_all(repo, "a loop that cannot tick and one that does not parse")

    for procs in running_procs():
        spawn(procs, repo, tmp_path, "up")
        opened = wait_event(repo, "inbox_opened", count=2, what="both inbox items")
        wait_for(
            lambda: len(events(repo, "notified")) >= 4 or None, "four notifications", timeout=60
        )
        assert_clean_exit(run_loopctl(repo, "down"), 0)

    by_loop = {e.loop: e for e in opened}
    assert set(by_loop) == {"nocheck", "broken"}
    tick_error = by_loop["nocheck"]
    assert tick_error.data["kind"] == "unhandled"
    assert (
        "loop nocheck cannot tick: check program 'no-such-check-program'"
        in (tick_error.data["summary"])
    )
    invalid = by_loop["broken"]
    assert invalid.data["kind"] == "unhandled"
    assert invalid.data["summary"].startswith("loop broken is invalid and not scheduled:")
    assert_notified(repo, hook, received, tick_error.data["id"], "unhandled")
    assert_notified(repo, hook, received, invalid.data["id"], "unhandled")

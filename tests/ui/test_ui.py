"""`loopctl ui`: the dashboard served by a real `loopctl ui` process, driven over HTTP, by a real
Chromium (Playwright), and attacked by a sandboxed agent hunting for its token."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cli import assert_clean_exit, invoke, run_loopctl, spawn_loopctl
from support.delivery import inbox_items, ship_loop, the_approval
from support.journal import events
from support.processes import wait_for
from support.repos import (
    PY,
    add_remote,
    commit_all,
    make_project,
    remote_refs,
    toml_value,
    write_agent,
    write_loop,
)
from support.ui import act, browser, dashboard, screenshot, served

from loopctl.journal.events import EventLog
from loopctl.paths import ProjectPaths
from loopctl.ui.security import Guard, Sessions, is_loopback

PROGRAMS = Path(__file__).parents[1] / "programs"
BRANCH = "loop/ship/main"


def gated(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A loop whose push waits for approval: one approval item in the inbox; the remote."""
    make_project(repo, "fixer.py")
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    done = invoke(monkeypatch, repo, "run", "ship", "--once")
    assert done.exit_code == 0, done.output
    return remote


def hostile_item(repo: Path) -> str:
    """An escalation whose text is an agent's attempt at markup and terminal escapes."""
    EventLog(ProjectPaths(repo).events_file).append(
        "inbox_opened",
        run="20261201T000000-beef",
        loop="ship",
        task="evil",
        data={
            "id": "e5c0de",
            "kind": "escalation",
            "summary": '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
            "\x1b[2Jall checks passed",
            "evidence": {"question": "<b>approve me</b>", "reason": "<a href=//evil>x</a>"},
        },
    )
    return "e5c0de"


def workspace_ready(repo: Path, loop: str, *notes: dict[str, Any]) -> None:
    """`workspace_ready` notes of `loop` in the log, as loopctl.engine.warming writes them."""
    log = EventLog(ProjectPaths(repo).events_file)
    for note in notes:
        log.append("note", run="20261201T000000-warm", loop=loop, task="t", data=note)


def raw_workspace_ready(repo: Path, loop: str, data: bytes) -> None:
    """A `workspace_ready` line whose `data` JSON no writer would produce (`1e999`), summed."""
    log = EventLog(ProjectPaths(repo).events_file)
    seq = log.last_seq() + 1
    prefix = (
        b'{"v": 1, "seq": %d, "ts": "2026-12-01T00:00:00+00:00", "type": "note", "run": null,'
        b' "loop": "%s", "task": "t", "data": %s' % (seq, loop.encode(), data)
    )
    summed = prefix + b', "sum": "%08x"}\n' % zlib.crc32(b"}", zlib.crc32(prefix))
    with log.path.open("ab") as handle:
        handle.write(summed)


def warm_statuses(monkeypatch: pytest.MonkeyPatch, repo: Path) -> dict[str, Any]:
    """`loopctl status --json`'s `warm_workspaces` per loop, read as strict JSON."""

    def not_json(name: str) -> None:
        raise AssertionError(f"status --json printed {name}")

    done = invoke(monkeypatch, repo, "status", "--json")
    assert done.exit_code == 0, done.output
    rows = json.loads(done.output, parse_constant=not_json)["status"]
    return {row["loop"]: row["warm_workspaces"] for row in rows}


WARM_CELL = re.compile(
    r'<tr data-loop="(?P<loop>[^"]*)">.*?<td class=warm(?: data-saved-s="(?P<saved>[^"]*)")?>'
    r"(?P<text>.*?)</td>"
)
WARM_TEXT = re.compile(
    r"saved (?P<shown>[0-9.]+)s<small>(?P<pool_hits>\d+) pool hits, (?P<seed_hits>\d+) seed"
    r" hits, (?P<setups_skipped>\d+) setups skipped, (?P<setups_run>\d+) run</small>"
)


def warm_shown(page: str) -> dict[str, Any]:
    """What the loops page shows of warm workspaces per loop: its numbers, or the cell's text."""
    shown: dict[str, Any] = {}
    for row in WARM_CELL.finditer(page):
        text = WARM_TEXT.fullmatch(row["text"])
        if row["saved"] is None or text is None:
            shown[row["loop"]] = row["text"]
            continue
        assert text["shown"] == f"{float(row['saved']):.1f}"
        shown[row["loop"]] = {"saved_s": float(row["saved"])} | {
            key: int(text[key])
            for key in ("pool_hits", "seed_hits", "setups_skipped", "setups_run")
        }
    return shown


# --- start-up -----------------------------------------------------------------------------


def test_other_commands_never_import_the_web_stack() -> None:
    probe = (
        "import sys; from loopctl.cli.app import app;"
        " print(sorted(m for m in sys.modules"
        " if m.split('.')[0] in ('starlette', 'uvicorn', 'anyio', 'playwright')"
        " or m.startswith('loopctl.ui')))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert loaded.stdout.strip() == "[]", loaded.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "loopctl", "--help"], capture_output=True, text=True, check=True
    )
    assert " ui " in shown.stdout


def test_refuses_to_start_inside_an_agent(repo: Path) -> None:
    env = {**os.environ, "LOOPCTL_ROLE": "maker"}
    done = run_loopctl(repo, "ui", "--no-open", env=env, timeout=30)
    assert_clean_exit(done, 1)
    assert done.stderr.startswith("loopctl: `loopctl ui` is a human's command"), done.stderr
    assert "http://" not in done.stdout


def test_host_and_origin_rules() -> None:
    guard = Guard(host="127.0.0.1", port=8123)
    assert guard.host_ok("127.0.0.1:8123")
    assert guard.host_ok("localhost:8123")
    assert not guard.host_ok("evil.example:8123")  # DNS rebinding: the attacker's own name
    assert not guard.host_ok("127.0.0.1:8124")
    assert not guard.host_ok(None)
    assert guard.origin_ok("http://127.0.0.1:8123", "same-origin", "127.0.0.1:8123")
    assert not guard.origin_ok("http://127.0.0.1:9999", None, "127.0.0.1:8123")  # another port
    assert not guard.origin_ok("http://127.0.0.1:8123", "same-site", "127.0.0.1:8123")
    assert not guard.origin_ok(None, "same-origin", "127.0.0.1:8123")
    assert not guard.origin_ok("null", None, "127.0.0.1:8123")
    wide = Guard(host="0.0.0.0", port=80)
    assert wide.host_ok("10.1.2.3:80")
    assert not wide.host_ok("rebind.example:80")
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("192.168.1.2")


# --- over HTTP ----------------------------------------------------------------------------


def test_requests_without_the_token_from_another_origin_or_host_are_refused(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = gated(repo, tmp_path, monkeypatch)
    item = the_approval(monkeypatch, repo)["id"]
    with dashboard(repo) as ui:
        approve = f"{ui.base}/inbox/{item}/approve"
        origin = {"Origin": ui.base}
        with httpx.Client(timeout=20) as plain:
            assert plain.get(f"{ui.base}/inbox").status_code == 401
            assert plain.get(f"{ui.base}/inbox?token=wrong").status_code == 403
            assert plain.post(approve, headers=origin).status_code == 401
            assert plain.post(f"{approve}?token={ui.token}", headers=origin).status_code == 403
            # A rebound DNS name reaches the port but names itself in Host.
            rebound = plain.get(ui.url, headers={"Host": f"evil.example:{ui.port}"})
            assert rebound.status_code == 403
        # The sign-in redirect stays on this server, whatever the path looks like.
        login = httpx.get(f"{ui.base}//evil.example/x?token={ui.token}")
        assert login.status_code == 303
        assert login.headers["location"] == "/evil.example/x"
        with ui.session(ui.new_link(), timeout=20) as session:
            page = session.get(f"{ui.base}/inbox")
            assert page.status_code == 200
            assert item in page.text
            assert "default-src 'none'" in page.headers["content-security-policy"]
            foreign = {"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}
            assert session.post(approve, headers=foreign).status_code == 403
            assert session.post(approve).status_code == 403  # no Origin at all
            assert (
                session.post(approve, headers={"Origin": "http://evil.example"}).status_code == 403
            )
            assert session.get(f"{ui.base}/inbox", headers={"Host": "evil:1"}).status_code == 403
    assert events(repo, "approved") == []
    assert remote_refs(remote) == {}
    assert the_approval(monkeypatch, repo)["approved"] is None


def test_the_loops_page_shows_what_warm_workspaces_saved_as_status_does(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\nnode_modules/\n")
    (repo / "package.json").write_text('{"name": "calc"}\n')
    install = "import pathlib; pathlib.Path('node_modules/x').mkdir(parents=True, exist_ok=True)"
    tasks = json.dumps([{"id": f"t{n}"} for n in (1, 2, 3)])
    write_loop(
        repo,
        "warm",
        f'goal = "tests green"\n\n[tasks]\ncommand = {toml_value([PY, "-c", f"print({tasks!r})"])}'
        '\nprompt = "fix {id}"\n\n[budget]\nmax_parallel = 1\n\n'
        f"[worktree]\nsetup = [{toml_value([PY, '-c', install])}]\n",
    )
    ship_loop(repo, 'actions = ["commit"]')
    write_loop(repo, "quiet", 'goal = "tests green"\nprompt = "fix add"\n')
    commit_all(repo, "three loops")
    done = invoke(monkeypatch, repo, "run", "warm", "--once")
    assert done.exit_code == 0, done.output
    # What no engine writes: savings that are text, negative, infinite or too large to add up;
    # markup where a name goes. None of it is a saving; the hits and decisions still count.
    workspace_ready(
        repo,
        "ship",
        {"what": "workspace_ready", "pool": "hit", "decision": "skipped", "saved_s": "lots"},
        {"what": "workspace_ready", "pool": "hit", "decision": "seeded", "saved_s": -3},
        {"what": "workspace_ready", "pool": "<b>x</b>", "decision": "ran", "saved_s": 1.7e308},
        {"what": "workspace_ready", "pool": "miss", "decision": "ran", "saved_s": 1.7e308},
    )
    raw_workspace_ready(
        repo, "ship", b'{"what": "workspace_ready", "pool": "hit", "saved_s": 1e999}'
    )
    status = warm_statuses(monkeypatch, repo)
    warm = status["warm"]
    assert (warm["pool_hits"], warm["setups_skipped"], warm["setups_run"]) == (2, 2, 1)
    assert warm["saved_s"] > 0
    assert status["ship"] == {
        "saved_s": 1e9,  # journal.warmth.MAX_SAVED_S: the sum stays a number
        "pool_hits": 3,
        "seed_hits": 1,
        "setups_skipped": 1,
        "setups_run": 2,
    }
    assert set(status["quiet"].values()) == {0}
    with dashboard(repo) as ui, ui.session() as session:
        page = session.get(f"{ui.base}/loops")
    assert page.status_code == 200
    shown = warm_shown(page.text)
    assert shown == {
        "quiet": "<span class=muted>-</span>",
        "ship": status["ship"],
        "warm": status["warm"],
    }
    assert "<b>x</b>" not in page.text


def test_page_actions_record_what_the_cli_records(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = gated(repo, tmp_path, monkeypatch)
    question = hostile_item(repo)
    item = the_approval(monkeypatch, repo)["id"]
    with dashboard(repo) as ui:
        origin = {"Origin": ui.base, "Sec-Fetch-Site": "same-origin"}
        with ui.session(timeout=60, follow_redirects=True) as session:
            # The CLI's own refusal, word for word, and nothing recorded.
            wrong = act(session, ui.base, question, "approve", origin)
            assert not wrong["ok"]
            assert "is a escalation item, not an approval" in wrong["message"]
            shown = session.get(f"{ui.base}/inbox/{question}?job={wrong['job']}")
            assert 'class="notice bad"' in shown.text
            dismissed = act(session, ui.base, question, "dismiss", origin)
            assert dismissed["message"] == f"dismissed {question}"
            rejected = act(session, ui.base, item, "reject", origin, reason="not today")
            assert rejected["message"] == f"rejected {item}: nothing was delivered"
            listing = session.get(f"{ui.base}/inbox?loop=ship&all=1")
            assert listing.text.count("<tr data-item=") == 2
    assert events(repo, "approved") == []
    closed = {e.data["id"]: e.data for e in events(repo, "inbox_closed")}
    assert closed[question]["resolution"] == "dismissed"
    assert closed[item] == {"id": item, "resolution": "rejected", "reason": "not today"}
    (stopped,) = events(repo, "task_finished", "evil")
    assert stopped.data["status"] == "stopped"  # what `inbox dismiss` records for a question
    assert events(repo, "task_finished", "main")[-1].data["status"] == "rejected"
    assert remote_refs(remote) == {}
    assert inbox_items(monkeypatch, repo) == []


def test_retry_from_the_page_runs_the_task_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "never_fixes.py")
    write_loop(
        repo, "tidy", 'goal = "tests green"\nprompt = "fix add"\n\n[budget]\nmax_iterations = 1\n'
    )
    assert invoke(monkeypatch, repo, "run", "tidy", "--once").exit_code == 1
    (item,) = inbox_items(monkeypatch, repo)
    write_agent(repo, "maker", "fixer.py")  # the human fixed what made it fail
    port = free_port()
    with dashboard(repo, "--port", str(port)) as ui:
        assert ui.port == port
        with ui.session(timeout=120, follow_redirects=True) as session:
            page = session.get(f"{ui.base}/inbox/{item['id']}")
            assert 'action="/inbox/' + item["id"] + '/retry"' in page.text
            done = act(session, ui.base, item["id"], "retry", {"Origin": ui.base})
            assert done["message"].startswith(f"retried {item['id']}: run "), done
    assert [r.data["kind"] for r in events(repo, "tick_started")] == ["tick", "requeue"]
    (requeued,) = events(repo, "task_requeued")
    assert requeued.data["reason"] == "retry"
    assert events(repo, "task_finished", "main")[-1].data["status"] == "done"
    assert inbox_items(monkeypatch, repo) == []


def test_without_the_ui_extra_it_says_how_to_install_it(repo: Path) -> None:
    blocked = (
        "import sys; sys.modules['starlette'] = None; sys.argv = ['loopctl', 'ui', '--no-open'];"
        " from loopctl.__main__ import main; raise SystemExit(main())"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked], cwd=repo, capture_output=True, text=True, timeout=60
    )
    assert_clean_exit(done, 1)
    assert done.stderr.strip() == (
        "loopctl: `loopctl ui` needs the ui extra (starlette is missing):"
        " pip install 'starlette<2,>=0.41' 'uvicorn<1,>=0.30'"
        " (or pip install -e '.[ui]' in a clone)"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_sandboxed_agent_cannot_find_a_live_link_and_a_used_one_opens_nothing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_environment: Path
) -> None:
    """The human signed in with the first link and asked for a second, not opened yet: that one
    sits in the shell history and the browser's profile (hidden from the agent), the used one in
    a note the agent can read. The agent hunts both and tries each as a link, cookie and token."""
    from loopctl import process
    from loopctl.egress import EgressPolicy, NetworkMode
    from loopctl.sandbox import make_sandbox
    from loopctl.secrets import build_env

    remote = gated(repo, tmp_path, monkeypatch)
    item = the_approval(monkeypatch, repo)["id"]
    home = isolated_environment
    worktree = tmp_path / "agent-worktree"
    worktree.mkdir()
    with dashboard(repo) as ui, ui.session() as human:
        live = ui.new_link()
        live_token = live.rpartition("token=")[2]
        # Where a link lingers on a real machine; a decoy of the token's shape beside the used
        # link in a note: proof that the hunt finds tokens where it can look.
        decoy = "D" * 43
        (home / "notes.txt").write_text(f"token={decoy}\nopened {ui.url}\n")
        (home / ".bash_history").write_text(f"xdg-open '{live}'\n")
        profile = home / ".mozilla" / "firefox" / "abcd.default-release"
        profile.mkdir(parents=True)
        (profile / "places.sqlite").write_bytes(b"SQLite format 3\x00" + live.encode())
        chrome = home / ".config" / "google-chrome" / "Default"
        chrome.mkdir(parents=True)
        (chrome / "History").write_bytes(live.encode())
        # The host's network on purpose: a namespace of its own keeps an agent off the
        # dashboard altogether; here the agent reaches it, and a link it finds still opens
        # nothing (defence in depth, as with `network = "open"`).
        box = make_sandbox(root=repo, worktree=worktree, egress=EgressPolicy(mode=NetworkMode.OPEN))
        env = build_env(extra={"HOME": str(home), "LOOPCTL_ROLE": "maker"})
        done = process.run(
            [sys.executable, "-I", str(PROGRAMS / "token_hunter.py"), str(ui.port), item,
             str(home), str(repo)],
            cwd=worktree,
            env=env,
            timeout=240,
            sandbox=box,
        )  # fmt: skip
        assert done.ok, done.output_tail()
        report = json.loads((worktree / "hunt.json").read_text(encoding="utf-8"))
        assert ui.process.poll() is None  # the server is still up: it refused, it did not die
        # The human's session and the unused link both still work: the hunt took neither.
        assert human.get(f"{ui.base}/inbox").status_code == 200
        with ui.session(live) as second:
            assert second.get(f"{ui.base}/loops").status_code == 200
    assert decoy in report["candidates"], report  # the hunt worked where it could look
    assert ui.token in report["candidates"], report  # it found the used link, which opened nothing
    assert live_token not in report["candidates"], report
    assert report["sessions"] == 0, report
    assert report["pids_visible"] < 10, report  # the server's process is out of sight
    assert report["attempts"] >= 3
    # Every attempt reached the server (no -1) and was refused.
    assert set(report["statuses"]) <= {401, 403}, report
    assert events(repo, "approved") == []
    assert remote_refs(remote) == {}
    assert the_approval(monkeypatch, repo)["approved"] is None


def test_with_its_own_network_namespace_an_agent_reaches_no_dashboard_at_all(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_environment: Path
) -> None:
    """The default sandbox (issue 25): the hunter holds the used link and still gets no answer
    from the dashboard, directly or through the proxy: not one connection is made."""
    from loopctl import process
    from loopctl.sandbox import make_sandbox
    from loopctl.secrets import build_env

    gated(repo, tmp_path, monkeypatch)
    item = the_approval(monkeypatch, repo)["id"]
    home = isolated_environment
    worktree = tmp_path / "agent-worktree"
    worktree.mkdir()
    with dashboard(repo) as ui, ui.session():
        (home / "notes.txt").write_text(f"opened {ui.url}\n")
        box = make_sandbox(root=repo, worktree=worktree)
        env = build_env(extra={"HOME": str(home), "LOOPCTL_ROLE": "maker"})
        done = process.run(
            [sys.executable, "-I", str(PROGRAMS / "token_hunter.py"), str(ui.port), item,
             str(home), str(repo)],
            cwd=worktree,
            env=env,
            timeout=240,
            sandbox=box,
        )  # fmt: skip
        assert done.ok, done.output_tail()
        report = json.loads((worktree / "hunt.json").read_text(encoding="utf-8"))
    assert ui.token in report["candidates"], report  # it held the link...
    assert set(report["statuses"]) == {-1}, report  # ...and reached nothing with it
    assert report["sessions"] == 0
    assert box.refused == []  # a direct connection: never even reached the proxy
    assert events(repo, "approved") == []
    assert the_approval(monkeypatch, repo)["approved"] is None


def test_a_used_link_opens_nothing_for_a_second_client_and_a_new_one_comes_from_the_terminal(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = gated(repo, tmp_path, monkeypatch)
    item = the_approval(monkeypatch, repo)["id"]
    with dashboard(repo, stdin=subprocess.PIPE) as ui, ui.session() as first:
        approve = f"{ui.base}/inbox/{item}/approve"
        forged = {"Origin": ui.base, "Sec-Fetch-Site": "same-origin", "Referer": f"{ui.base}/"}
        with httpx.Client(timeout=20) as second:
            again = second.get(ui.url, headers=forged)
            assert again.status_code == 403
            assert "already used" in again.text
            assert "press Enter in the terminal where `loopctl ui` runs" in again.text
            assert "set-cookie" not in again.headers
            # The token in every other place a client could put it opens nothing either.
            for headers in (
                {"Cookie": f"{ui.cookie}={ui.token}"},
                {"Authorization": f"Bearer {ui.token}"},
                {"X-Token": ui.token},
            ):
                assert second.get(f"{ui.base}/inbox", headers=headers).status_code == 401
                assert (
                    second.post(approve, headers={**forged, **headers}, data={"note": "x"})
                ).status_code == 401
            assert second.post(f"{approve}?token={ui.token}", headers=forged).status_code == 403
            # The same browser opening its used link again is only sent to the page.
            reopened = first.get(ui.url)
            assert reopened.status_code == 303
            assert reopened.headers["location"] == "/"
            assert "set-cookie" not in reopened.headers
            # A new link from the terminal (Enter), then another (SIGUSR1): the unused first
            # dies with the second; each opens one session, once.
            by_enter = ui.new_link(via="enter")
            by_signal = ui.new_link(via="signal")
            assert len({ui.url, by_enter, by_signal}) == 3
            assert second.get(by_enter).status_code == 403
            assert second.get(by_signal).status_code == 303
            assert second.get(f"{ui.base}/inbox").status_code == 200
            with httpx.Client(timeout=20) as third:
                assert third.get(by_signal).status_code == 403
        assert first.get(f"{ui.base}/inbox").status_code == 200
    assert events(repo, "approved") == []
    assert remote_refs(remote) == {}


def test_sessions_end_when_idle_and_at_their_age(repo: Path) -> None:
    """Over real HTTP with the dashboard's app, the clock moved by the test."""
    now = [1000.0]
    sessions = Sessions(idle_s=30 * 60, max_age_s=12 * 3600, clock=lambda: now[0])
    with served(repo, sessions) as base, httpx.Client(timeout=20) as browser_:
        assert browser_.get(f"{base}/?token={sessions.new_link()}").status_code == 303
        assert browser_.get(f"{base}/loops").status_code == 200
        for _ in range(3):  # used every 29 minutes: still alive after 87
            now[0] += 29 * 60
            assert browser_.get(f"{base}/loops").status_code == 200
        now[0] += 30 * 60 + 1
        ended = browser_.get(f"{base}/loops")
        assert ended.status_code == 401
        assert "it ended (after 30m idle, or 12h after it began)" in ended.text
        assert browser_.get(f"{base}/loops").status_code == 401  # gone for good
        # Busy all day, it still ends at twelve hours.
        assert browser_.get(f"{base}/?token={sessions.new_link()}").status_code == 303
        for _ in range(24):
            now[0] += 29 * 60
            assert browser_.get(f"{base}/loops").status_code == 200
        now[0] += 29 * 60
        assert browser_.get(f"{base}/loops").status_code == 401


def test_a_live_stream_does_not_keep_a_session_alive() -> None:
    now = [0.0]
    sessions = Sessions(idle_s=60, max_age_s=3600, clock=lambda: now[0])
    session = sessions.exchange(sessions.new_link())
    assert session is not None
    now[0] = 59
    assert sessions.valid(session, touch=False)
    now[0] = 61
    assert not sessions.valid(session)
    assert not sessions.valid("")
    assert not sessions.valid(None)
    link = sessions.new_link()
    assert sessions.exchange(link) is not None
    assert sessions.exchange(link) is None  # once


def test_session_limits_are_options(repo: Path) -> None:
    done = run_loopctl(repo, "ui", "--no-open", "--idle", "0s", timeout=30)
    assert_clean_exit(done, 2)
    assert done.stderr.strip() == "loopctl: --idle must be at least 1s"
    with dashboard(repo, "--idle", "45m", "--max-session", "2h") as ui, httpx.Client() as plain:
        refused = plain.get(f"{ui.base}/loops")
    assert refused.status_code == 401
    assert "(after 45m idle, or 2h after it began)" in refused.text


# --- in a real browser --------------------------------------------------------------------


def test_the_inbox_page_lists_what_the_cli_lists_and_approving_delivers_once(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = gated(repo, tmp_path, monkeypatch)
    hostile_item(repo)
    workspace_ready(
        repo,
        "ship",
        {"what": "workspace_ready", "pool": "hit", "decision": "skipped", "saved_s": 4.5},
        {"what": "workspace_ready", "pool": "miss", "decision": "seeded", "saved_s": 2.25},
        {"what": "workspace_ready", "pool": "hit", "decision": "skipped", "saved_s": "NaN"},
    )
    warm = warm_statuses(monkeypatch, repo)["ship"]
    (commit,) = events(repo, "commit_created", "main")
    listed = {i["id"] for i in inbox_items(monkeypatch, repo)}
    item = the_approval(monkeypatch, repo)["id"]
    with dashboard(repo) as ui, browser() as chromium:
        page = chromium.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page.goto(ui.url)
        assert "token=" not in page.url  # exchanged for a cookie, gone from the address bar
        (cookie,) = page.context.cookies()
        assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == (
            ui.cookie,
            True,
            "Strict",
        )
        assert cookie["value"] != ui.token
        assert page.evaluate("document.cookie") == ""  # no script of any page reads it
        # Another browser with the same link: the link is spent.
        other = chromium.new_context()  # type: ignore[attr-defined]
        refused = other.new_page()
        assert refused.goto(ui.url).status == 403
        assert "already used" in refused.inner_text("body")
        assert other.cookies() == []
        other.close()
        page.goto(f"{ui.base}/inbox")
        shown = set(
            page.locator("tr[data-item]").evaluate_all("rows => rows.map(r => r.dataset.item)")
        )
        assert shown == listed
        screenshot(page, "inbox")

        page.goto(f"{ui.base}/inbox/e5c0de")
        assert page.evaluate("window.pwned") is None  # agent text stayed text
        assert "<script>window.pwned=1</script>" in page.locator("p.summary").inner_text()
        assert "\x1b" not in page.content()
        screenshot(page, "escalation")

        page.goto(f"{ui.base}/loops")
        assert page.locator("tr[data-loop=ship]").count() == 1
        assert page.locator("svg.chart").count() >= 2
        cell = page.locator("tr[data-loop=ship] td.warm")
        assert warm == {
            "saved_s": 6.75,
            "pool_hits": 2,
            "seed_hits": 1,
            "setups_skipped": 2,
            "setups_run": 0,
        }
        assert cell.get_attribute("data-saved-s") == "6.75"
        assert cell.inner_text().split("\n") == [
            "saved 6.8s",
            "2 pool hits, 1 seed hits, 2 setups skipped, 0 run",
        ]
        screenshot(page, "loops")

        page.goto(f"{ui.base}/inbox/{item}")
        diff = page.locator("pre.diff")
        assert "+    return a + b" in diff.inner_text()
        assert diff.locator("span.add").count() >= 1
        assert diff.locator("span.del").count() >= 1
        assert f"push {commit.data['sha'][:12]} to origin" in page.inner_text("main")
        screenshot(page, "approval")
        page.fill("form.approve input[name=note]", "looks right")
        page.click("form.approve button")
        page.wait_for_selector("#notice[data-state=done]")
        assert "approved" in page.inner_text("#notice")
        screenshot(page, "approved")
        # The browser's back-and-resubmit, or a second click, must not deliver twice.
        again = page.request.post(
            f"{ui.base}/inbox/{item}/approve",
            headers={"Origin": ui.base, "Accept": "application/json"},
            form={"note": "again"},
        )
        assert again.status == 202
        state = page.request.get(f"{ui.base}{again.json()['state']}?wait=20").json()
        assert state["done"]
        assert not state["ok"]
        assert "already closed" in state["message"]

        page.goto(f"{ui.base}/runs")
        screenshot(page, "runs")
        page.click("tbody tr a")
        page.wait_for_selector("#timeline li")
        screenshot(page, "run")
    (granted,) = events(repo, "approved")
    assert granted.data["sha"] == commit.data["sha"]
    assert granted.data["note"] == "looks right"
    assert len([e for e in events(repo, "action_started") if e.data.get("action") == "push"]) == 1
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": commit.data["sha"]}
    (closed,) = [i for i in inbox_items(monkeypatch, repo, "--all") if i["id"] == item]
    assert closed["resolution"] == "approved"


def test_a_running_loops_page_updates_without_reload(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker, release = tmp_path / "signals" / "started", tmp_path / "signals" / "release"
    marker.parent.mkdir()
    make_project(repo, "slow_fixer.py", marker, release)
    ship_loop(repo, 'actions = ["commit"]')
    runner = spawn_loopctl(repo, "run", "ship", "--once")
    try:
        wait_for(marker.exists, "the agent to start", timeout=60)
        (started,) = events(repo, "tick_started")
        with dashboard(repo) as ui, browser() as chromium:
            page = chromium.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
            page.goto(ui.url)
            page.goto(f"{ui.base}/runs/{started.run}")
            assert page.get_attribute("#run-status", "data-status") == "running"
            before = page.locator("#timeline li").count()
            page.evaluate("window.sameDocument = true")
            screenshot(page, "run-live")
            release.write_text("go")
            page.wait_for_selector("#run-status[data-status=done]", timeout=60_000)
            assert page.evaluate("window.sameDocument") is True  # no reload happened
            assert page.locator("#timeline li.new").count() >= 2
            assert page.locator("#timeline li").count() > before
            assert "finished: done" in page.inner_text("#timeline")
            screenshot(page, "run-finished")
        out, err = runner.communicate(timeout=60)
        assert runner.returncode == 0, out + err
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate(timeout=10)

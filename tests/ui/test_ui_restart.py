"""A dashboard session survives a restart of `loopctl ui` on the same address and port (issue 29
item 4), without weakening the token rules: only hashes of session ids are written (0600, under
loopctl's home), links never, and a session read back ends when idle or at its age as before."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
from pathlib import Path

import httpx
from support.repos import make_project
from support.ui import browser, dashboard

from loopctl.ui.security import Sessions, store_path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stored(home: Path) -> list[Path]:
    return sorted((home / ".loopctl" / "ui-sessions").glob("*.json"))


def test_a_signed_in_browser_keeps_its_session_across_a_restart_on_the_same_port(
    repo: Path, isolated_environment: Path
) -> None:
    make_project(repo, "fixer.py")
    port = str(free_port())
    with browser() as chromium:
        context = chromium.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page = context.new_page()
        with dashboard(repo, "--port", port) as ui:
            page.goto(ui.url)
            assert "token=" not in page.url
            assert page.locator("h1").count() >= 1
            link = ui.url
        (cookie,) = [c for c in context.cookies() if c["name"] == f"loopctl_ui_{port}"]
        (file,) = stored(isolated_environment)
        text = file.read_text()
        # The hash of the session id, never the id, nor the link.
        assert cookie["value"] not in text
        assert link.split("token=")[1] not in text
        assert hashlib.sha256(cookie["value"].encode()).hexdigest() in text
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
        assert file.stat().st_uid == os.getuid()

        with dashboard(repo, "--port", port) as again:
            # The same browser, no new link: the page opens.
            answer = page.goto(f"{again.base}/inbox")
            assert answer is not None
            assert answer.status == 200, page.content()
            # The old link opens nothing for anyone else; another browser has no session.
            with httpx.Client(timeout=20) as other:
                assert other.get(f"{again.base}/loops").status_code == 401
                assert other.get(link, follow_redirects=False).status_code == 403
            # A change still needs this dashboard's Origin.
            posted = context.request.post(
                f"{again.base}/inbox/nosuch/dismiss", headers={"Origin": "http://evil.test"}
            )
            assert posted.status == 403
        context.close()


def test_a_stored_session_ends_when_idle_or_at_its_age_as_before(tmp_path: Path) -> None:
    store = store_path(tmp_path / "home", tmp_path / "repo", "127.0.0.1", 4242)
    mono, wall = [100.0], [1_000_000.0]

    def server() -> Sessions:
        made = Sessions(idle_s=60, max_age_s=300, clock=lambda: mono[0], wall=lambda: wall[0])
        made.persist(store)
        return made

    first = server()
    busy = first.exchange(first.new_link())
    idle = first.exchange(first.new_link())
    assert busy is not None
    assert idle is not None
    # The machine restarts: its monotonic clock starts again, the time of day goes on.
    mono[0], wall[0] = 5.0, wall[0] + 40
    second = server()
    assert second.valid(busy)  # 40 s idle of 60
    mono[0] += 25
    wall[0] += 25
    third = server()  # restarted again: `busy` was seen 25 s ago, `idle` 65 s ago
    assert third.valid(busy)
    assert not third.valid(idle)
    # Used all along, it still ends at its age.
    for _ in range(6):
        mono[0] += 50
        wall[0] += 50
        third = server()
        assert third.valid(busy) is (wall[0] - 1_000_000.0 <= 300)
    assert not server().valid(busy)
    data = json.loads(store.read_text())
    assert data["sessions"] == {}
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    # The folder was made (with its parents) for this user alone: not even the names of the
    # stores, one per dashboard address and port, are listed to anyone else.
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700


def test_a_store_open_to_others_or_not_ours_is_ignored(tmp_path: Path) -> None:
    store = store_path(tmp_path / "home", tmp_path / "repo", "127.0.0.1", 4242)
    made = Sessions()
    made.persist(store)
    session = made.exchange(made.new_link())
    assert session is not None
    os.chmod(store, 0o644)  # someone else could have written it
    assert not _restarted(store).valid(session)
    made.persist(store)  # written again, 0600
    assert _restarted(store).valid(session)
    store.write_text("not json")
    os.chmod(store, 0o600)
    assert not _restarted(store).valid(session)


def _restarted(store: Path) -> Sessions:
    made = Sessions()
    made.persist(store)
    return made


def test_a_restart_forgets_the_sessions_that_ended_while_it_was_down(tmp_path: Path) -> None:
    """Taken back from the store, an ended session is dropped at once, from the file too: a
    dead session's hash is not carried from one restart to the next."""
    store = store_path(tmp_path / "home", tmp_path / "repo", "127.0.0.1", 4242)
    mono, wall = [100.0], [1_000_000.0]
    first = Sessions(idle_s=60, max_age_s=300, clock=lambda: mono[0], wall=lambda: wall[0])
    first.persist(store)
    assert first.exchange(first.new_link()) is not None
    assert len(json.loads(store.read_text())["sessions"]) == 1

    mono[0], wall[0] = 5.0, wall[0] + 120  # down for two minutes: idle for longer than 60 s
    Sessions(idle_s=60, max_age_s=300, clock=lambda: mono[0], wall=lambda: wall[0]).persist(store)

    assert json.loads(store.read_text())["sessions"] == {}


def test_a_session_found_ended_leaves_the_store_at_once(tmp_path: Path) -> None:
    store = store_path(tmp_path / "home", tmp_path / "repo", "127.0.0.1", 4242)
    mono, wall = [100.0], [1_000_000.0]
    made = Sessions(idle_s=60, max_age_s=300, clock=lambda: mono[0], wall=lambda: wall[0])
    made.persist(store)
    session = made.exchange(made.new_link())
    assert session is not None
    mono[0] += 61
    wall[0] += 61

    assert not made.valid(session)

    assert json.loads(store.read_text())["sessions"] == {}


def _session_in(store: Path) -> tuple[str, dict[str, object]]:
    """A live session, and the store's JSON that holds it."""
    made = Sessions()
    made.persist(store)
    session = made.exchange(made.new_link())
    assert session is not None
    return session, json.loads(store.read_text())


def _write(store: Path, data: object) -> None:
    store.write_text(json.dumps(data))
    os.chmod(store, 0o600)


def test_a_store_behind_a_link_or_of_another_format_is_not_read(tmp_path: Path) -> None:
    store = store_path(tmp_path / "home", tmp_path / "repo", "127.0.0.1", 4242)
    session, data = _session_in(store)
    elsewhere = tmp_path / "planted.json"
    _write(elsewhere, data)
    store.unlink()
    store.symlink_to(elsewhere)  # ours, 0600, and what we wrote: still not read through a link
    assert not _restarted(store).valid(session)

    store.unlink()
    _write(store, {**data, "format": 999})  # a later loopctl's: not guessed at
    assert not _restarted(store).valid(session)


def test_a_store_with_broken_entries_keeps_the_good_ones(tmp_path: Path) -> None:
    store = store_path(tmp_path / "home", tmp_path / "repo", "127.0.0.1", 4242)
    session, data = _session_in(store)
    sessions = data["sessions"]
    assert isinstance(sessions, dict)
    ((key, times),) = sessions.items()
    broken = {
        "not-hex": times,  # ValueError
        "ab" * 32: "not a mapping",  # TypeError
        "cd" * 32: {"started": times["started"]},  # KeyError
    }
    _write(store, {**data, "sessions": {**broken, key: times}})

    assert _restarted(store).valid(session)


def test_a_folder_or_a_fifo_where_the_store_goes_neither_crashes_nor_holds_the_start(
    tmp_path: Path,
) -> None:
    """Found by the AST run: a folder there ended `loopctl ui` with a traceback (it opens, and
    only reading it fails), and a FIFO would have held the start until a writer came."""
    folder = store_path(tmp_path / "home", tmp_path / "repo", "127.0.0.1", 4242)
    folder.mkdir(parents=True, mode=0o700)
    fifo = store_path(tmp_path / "home", tmp_path / "repo", "127.0.0.1", 4343)
    os.mkfifo(fifo, 0o600)

    assert not _restarted(folder).valid("anything")
    assert not _restarted(fifo).valid("anything")

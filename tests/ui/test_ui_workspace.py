"""The dashboard as a workspace (issue 29 item 4): no page wider than a phone, actions that
answer at once and show their progress and result in place, skipped ticks folded, and "request
changes" sending a note to the task's next attempt. A real `loopctl ui` process, Debian's
Chromium driven by Playwright."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke, spawn_loopctl
from support.delivery import inbox_items, ship_loop, the_approval
from support.journal import events
from support.processes import wait_for
from support.repos import add_remote, make_project, remote_refs, write_agent, write_loop
from support.ui import browser, dashboard, screenshot

WIDTHS = (1280, 390)


def sign_in(chromium: Any, url: str, width: int) -> Any:
    page = chromium.new_page(viewport={"width": width, "height": 900})
    page.goto(url)
    assert "token=" not in page.url
    return page


def overflow(page: Any) -> tuple[int, int]:
    """(the document's scroll width, the viewport's width): the first must not exceed the
    second, or the page scrolls sideways."""
    found = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    return int(found[0]), int(found[1])


def test_no_page_is_wider_than_a_phone_and_skipped_ticks_are_folded(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    # The task waits for its approval: the next ticks skip it (green "done" rows before).
    for _ in range(3):
        assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    skipped = [e for e in events(repo, "task_finished") if e.data["status"] == "skipped"]
    assert len(skipped) == 3
    write_loop(repo, "tidy-with-a-rather-long-name", 'goal = "tests green"\nprompt = "fix"\n')
    item = the_approval(monkeypatch, repo)["id"]
    first = events(repo, "tick_started")[0]
    pages = [
        "/loops",
        "/inbox",
        "/inbox?all=1",
        f"/inbox/{item}",
        "/runs",
        "/runs?skipped=1",
        f"/runs/{first.run}",
        "/runs/nosuchrun",
        "/report",
    ]
    with dashboard(repo) as ui, browser() as chromium:
        for width in WIDTHS:
            page = sign_in(chromium, ui.new_link(), width)
            for path in pages:
                page.goto(ui.base + path)
                scroll, inner = overflow(page)
                print(f"{width:>4} px {path}: scrollWidth {scroll}")
                assert scroll <= inner, (width, path, scroll, inner)
                name = path.strip("/").replace("/", "-").replace("?", "-").replace("=", "")
                screenshot(page, f"w{width}-{name[:40]}")
            # A table too wide for the phone scrolls inside its own box, not the page.
            page.goto(f"{ui.base}/loops")
            box = page.locator(".table-wrap").first
            assert box.evaluate("b => getComputedStyle(b).overflowX") == "auto"
            page.close()
        page = sign_in(chromium, ui.new_link(), 1280)
        page.goto(f"{ui.base}/runs")
        folded = page.locator("tr.skipped")
        assert folded.count() == 1
        assert folded.get_attribute("data-skipped") == "3"
        text = folded.inner_text()
        assert "3 skipped" in text
        assert f"waits for a human: inbox approval {item}" in text
        # The real run is a row of its own; no skipped tick shows as a green "done".
        assert page.locator("tr[data-run]").count() == 1
        assert page.locator("tr[data-run] .badge.ok").count() == 1  # the run that delivered
        page.click("text=show skipped ticks (3)")
        page.wait_for_url("**/runs?skipped=1")
        assert page.locator("tr[data-run]").count() == 4
        assert page.locator("tr[data-run] .badge", has_text="skipped").count() == 3
        page.goto(f"{ui.base}/loops")
        badges = page.locator("tr[data-loop=ship] td.runs .badge").all_inner_texts()
        assert badges == ["skipped", "skipped", "skipped", "done"]


def test_a_reply_answers_at_once_and_its_progress_and_result_appear_in_place(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts = tmp_path / "prompts.txt"
    make_project(repo, "asks.py", prompts)
    write_loop(repo, "tidy", 'goal = "tests green"\nprompt = "fix add"\n')
    assert invoke(monkeypatch, repo, "run", "tidy", "--once").exit_code == 1
    (item,) = inbox_items(monkeypatch, repo)
    assert item["kind"] == "escalation"
    # The task's next turn blocks until the test lets it go: the reply's work cannot end
    # before the page has shown that it answered and that the work is under way.
    signals = tmp_path / "signals"
    signals.mkdir()
    started, release = signals / "started", signals / "release"
    write_agent(repo, "maker", "slow_fixer.py", started, release)
    with dashboard(repo) as ui, browser() as chromium:
        page = sign_in(chromium, ui.url, 390)
        page.goto(f"{ui.base}/inbox/{item['id']}")
        page.evaluate("window.sameDocument = true")
        page.fill("form.reply textarea[name=answer]", "return a + b")
        clicked = time.monotonic()
        with page.expect_response(lambda r: r.request.method == "POST") as posted:
            page.click("form.reply button")
        answer = posted.value
        assert answer.status == 202
        answered = time.monotonic() - clicked
        job = answer.json()
        assert job["action"] == "reply"
        assert not release.exists()  # it answered while the work had not even begun to end
        # Progress in place: the run it started, and that run's latest event.
        page.wait_for_selector("#notice[data-state=running] a[href^='/runs/']", timeout=60_000)
        wait_for(started.exists, "the re-run agent to start", timeout=60)
        assert page.get_attribute("#notice", "data-state") == "running"
        assert "reply is running" in page.inner_text("#notice")
        assert page.locator("form.act button:not([disabled])").count() == 0  # one click
        scroll, inner = overflow(page)
        assert scroll <= inner
        screenshot(page, "reply-running")
        release.write_text("go")
        page.wait_for_selector("#notice[data-state=done]", timeout=120_000)
        # Measured, not asserted: the answer came while the work was held open.
        took = time.monotonic() - clicked
        print(f"reply answered {answered:.2f}s after the click; its result shown after {took:.2f}s")
        assert page.evaluate("window.sameDocument") is True  # no reload
        shown = page.inner_text("#notice")
        assert f"answered {item['id']}: run" in shown
        assert "done" in shown
        assert "notice ok" in (page.get_attribute("#notice", "class") or "")
        # The item's own parts followed: closed, and no buttons left.
        page.wait_for_selector("form.act", state="detached")
        assert "replied" in page.inner_text("#item-head")
        screenshot(page, "reply-done")
    assert events(repo, "task_finished", "main")[-1].data["status"] == "done"
    (requeued,) = events(repo, "task_requeued")
    assert requeued.data["answer"] == "return a + b"
    assert inbox_items(monkeypatch, repo) == []


def test_a_plain_form_without_script_lands_on_a_page_that_follows_the_job(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The POST of a form sent without the page's script answers at once too (a redirect to
    the item), and a refused action says why on that page."""
    make_project(repo, "asks.py", tmp_path / "prompts.txt")
    write_loop(repo, "tidy", 'goal = "tests green"\nprompt = "fix add"\n')
    invoke(monkeypatch, repo, "run", "tidy", "--once")
    (item,) = inbox_items(monkeypatch, repo)
    with dashboard(repo) as ui, ui.session(timeout=60) as session:
        origin = {"Origin": ui.base, "Sec-Fetch-Site": "same-origin"}
        answer = session.post(f"{ui.base}/inbox/{item['id']}/approve", headers=origin)
        assert answer.status_code == 303
        landed = answer.headers["location"]
        assert landed.startswith(f"/inbox/{item['id']}?job=")
        job = landed.rpartition("=")[2]
        state = session.get(f"{ui.base}/jobs/{job}?wait=20").json()
        assert state["done"] is True
        assert state["ok"] is False
        assert "is a escalation item, not an approval" in state["message"]
        page = session.get(ui.base + landed)
        assert 'class="notice bad" data-state=done' in page.text
        assert "not an approval" in page.text
        assert session.get(f"{ui.base}/jobs/nosuchjob").status_code == 404
    assert events(repo, "approved") == []


def test_request_changes_rejects_the_delivery_and_the_note_reaches_the_next_attempt(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts = tmp_path / "prompts.txt"
    make_project(repo, "records_prompt.py", prompts)
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    item = the_approval(monkeypatch, repo)["id"]
    note = "also keep the old name as an alias"
    with dashboard(repo) as ui, browser() as chromium:
        page = sign_in(chromium, ui.url, 1280)
        page.goto(f"{ui.base}/inbox/{item}")
        page.evaluate("window.sameDocument = true")
        page.fill("form.changes textarea[name=note]", note)
        with page.expect_response(lambda r: r.request.method == "POST") as posted:
            page.click("form.changes button")
        assert posted.value.status == 202
        page.wait_for_selector("#notice[data-state=done]", timeout=120_000)
        assert page.evaluate("window.sameDocument") is True
        assert f"sent back {item}: run" in page.inner_text("#notice")
        page.wait_for_selector("form.act", state="detached")
        screenshot(page, "changes-requested")
    assert_sent_back(monkeypatch, repo, remote, prompts, item, note)


def test_request_changes_from_the_cli_records_what_the_page_records(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`loopctl inbox reject ID --changes NOTE` is the page's "Request changes": the same
    function, the same events, the same prompt."""
    prompts = tmp_path / "prompts.txt"
    make_project(repo, "records_prompt.py", prompts)
    remote = add_remote(repo, tmp_path)
    ship_loop(repo, 'actions = ["commit", "push"]')
    assert invoke(monkeypatch, repo, "run", "ship", "--once").exit_code == 0
    item = the_approval(monkeypatch, repo)["id"]
    note = "also keep the old name as an alias"
    both = invoke(monkeypatch, repo, "inbox", "reject", item, "--reason", "x", "--changes", note)
    assert both.exit_code == 2
    sent = invoke(monkeypatch, repo, "inbox", "reject", item, "--changes", note)
    assert sent.exit_code == 0, sent.output
    assert sent.stdout.startswith(f"sent back {item}: run "), sent.stdout
    assert_sent_back(monkeypatch, repo, remote, prompts, item, note)
    again = invoke(monkeypatch, repo, "inbox", "reject", item, "--changes", note)
    assert again.exit_code == 1  # closed: once
    empty = invoke(monkeypatch, repo, "inbox", "reject", the_approval(monkeypatch, repo)["id"],
                   "--changes", " ")  # fmt: skip
    assert empty.exit_code == 1
    assert "the note is empty" in empty.output


def assert_sent_back(
    monkeypatch: pytest.MonkeyPatch, repo: Path, remote: Path, prompts: Path, item: str, note: str
) -> None:
    """The delivery was rejected with the note as its reason, nothing was pushed, and the
    task ran again with the note in its prompt, as a reply's answer travels."""
    closed = {e.data["id"]: e.data for e in events(repo, "inbox_closed")}
    assert closed[item]["resolution"] == "rejected"
    assert closed[item]["reason"] == f"changes requested: {note}"
    assert remote_refs(remote) == {}  # nothing of the rejected delivery was pushed
    first, second = prompts.read_text().split("\n=====\n")[:2]
    assert note not in first
    assert f"Answer: {note}" in second
    (requeued,) = events(repo, "task_requeued")
    assert (requeued.data["reason"], requeued.data["answer"]) == ("changes", note)
    # The new attempt's delivery waits for approval again, as a new item.
    again = the_approval(monkeypatch, repo)["id"]
    assert again != item


def test_a_running_agents_own_output_streams_to_its_runs_page(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the agent prints shows on the run's page while it works (as `-v` shows it): the
    lines from before the page opened, then each new one, once, without a reload."""
    signals = tmp_path / "signals"
    signals.mkdir()
    make_project(repo, "talks_and_waits.py", signals)
    ship_loop(repo, 'actions = ["commit"]')
    runner = spawn_loopctl(repo, "run", "ship", "--once")
    try:
        wait_for((signals / "said-1").exists, "the agent's first line", timeout=60)
        (started,) = events(repo, "tick_started")
        with dashboard(repo) as ui, browser() as chromium:
            page = sign_in(chromium, ui.url, 390)
            page.goto(f"{ui.base}/runs/{started.run}")
            page.evaluate("window.sameDocument = true")
            output = page.locator("#agent-output li:not(.muted)")
            page.wait_for_selector("#agent-output li:has-text('reading calc.py')")
            (signals / "go-1").write_text("go")
            wait_for((signals / "said-2").exists, "the agent's second line", timeout=60)
            said = float((signals / "said-2").read_text())
            page.wait_for_selector("#agent-output li:has-text('editing calc.py')")
            # Measured, not asserted (the machine is shared): how long a printed line took.
            print(f"agent line on the page {time.time() - said:.2f}s after it was printed")
            scroll, inner = overflow(page)
            assert scroll <= inner
            screenshot(page, "run-agent-output")
            (signals / "go-2").write_text("go")
            page.wait_for_selector("#run-status[data-status=done]", timeout=60_000)
            assert page.evaluate("window.sameDocument") is True
            texts = output.all_inner_texts()
            assert texts[:2] == ["main maker| reading calc.py", "main maker| editing calc.py"]
            assert len(texts) == len(set(texts))  # each line once
        out, err = runner.communicate(timeout=60)
        assert runner.returncode == 0, out + err
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate(timeout=10)


def test_skipped_ticks_fold_by_loop_and_reason_and_a_real_run_breaks_a_streak() -> None:
    from loopctl.journal.history import RunView, TaskView
    from loopctl.ui.views import SkippedRuns, runs_list

    def run(name: str, loop: str, status: str, reason: str = "") -> RunView:
        task = TaskView(run=name, loop=loop, task="main", status=status, reason=reason)
        return RunView(name, loop, "tick", name, status="done", tasks={"main": task})

    waits = "waits for a human: inbox approval abc123"
    base = "base 0123456789ab unchanged since the task last succeeded"
    newest_first = [
        run("r8", "ship", "skipped", waits),
        run("r7", "ship", "skipped", waits),
        run("r6", "tidy", "skipped", base),
        run("r5", "tidy", "skipped", base.replace("0123456789ab", "ba9876543210")),
        run("r4", "ship", "done"),
        run("r3", "ship", "skipped", waits),
        RunView("r2", "ship", "tick", "r2", status="done"),  # found no task: not a skip
        run("r1", "ship", "failed"),
    ]
    listing = runs_list(newest_first)
    shown = [
        (r.loop, r.reason, [x.run for x in r.runs]) if isinstance(r, SkippedRuns) else r.run
        for r in listing.rows
    ]
    assert shown == [
        ("ship", waits, ["r8", "r7"]),
        ("tidy", "base … unchanged since the task last succeeded", ["r6", "r5"]),
        "r4",
        ("ship", waits, ["r3"]),
        "r2",
        "r1",
    ]
    assert listing.skipped == 5
    every = runs_list(newest_first, show_skipped=True)
    assert [r.run for r in every.rows if not isinstance(r, SkippedRuns)] == [
        f"r{n}" for n in range(8, 0, -1)
    ]


def test_following_a_job_keeps_no_session_alive(repo: Path) -> None:
    """A page polling the action it started is not a human's activity (as a live stream is
    not): the session still ends after its idle time."""
    import httpx
    from support.ui import served

    from loopctl.ui.security import Sessions

    now = [0.0]
    sessions = Sessions(idle_s=60, max_age_s=3600, clock=lambda: now[0])
    with served(repo, sessions) as base, httpx.Client(timeout=60) as client:
        assert client.get(f"{base}/?token={sessions.new_link()}").status_code == 303
        now[0] = 50
        assert client.get(f"{base}/jobs/nosuchjob").status_code == 404  # let through, untouched
        now[0] = 61
        assert client.get(f"{base}/loops").status_code == 401

"""A finished goal on the dashboard (issue 29 item 4): its diff, and merge / push / open-PR
buttons bound to the commit shown, each landing exactly once, through the delivery code the
CLI's delivery uses (loopctl.commands.deliver). A real `loopctl ui` process over a real
repository outside /tmp with a local bare remote, driven by Debian's Chromium."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke
from support.journal import events
from support.outside_tmp import outside_tmp
from support.repos import add_remote, commit_all, git, make_project, make_repo, remote_refs
from support.ui import browser, dashboard, screenshot


@pytest.fixture
def finished_goal(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A repository outside /tmp whose `loopctl goal` finished done, and its bare `origin`."""
    with outside_tmp("deliver") as place:
        repo = make_repo(place / "repo")
        make_project(repo, "fixer.py")
        remote = add_remote(repo, place)
        result = invoke(monkeypatch, repo, "goal", "tests green")
        assert result.exit_code == 0, result.output
        yield repo, remote


def the_goal(repo: Path) -> tuple[str, str, str]:
    """(run, commit, branch) of the finished goal."""
    from loopctl.journal.history import fold

    (run,) = fold(events(repo)).values()
    (task,) = run.tasks.values()
    assert task.status == "done"
    assert task.commit
    assert task.branch
    return run.run, task.commit, task.branch


def finished(repo: Path, action: str) -> list[Any]:
    return [e for e in events(repo, "action_finished") if e.data.get("action") == action]


def refusals(repo: Path) -> list[Any]:
    return [e for e in events(repo, "note") if e.data.get("what") == "delivery_refused"]


def replay(page: Any, base: str, run: str, action: str, form: dict[str, str]) -> dict[str, Any]:
    """The button's POST sent again from the signed-in browser (its cookie, its Origin), and
    the job it started, once done."""
    answer = page.request.post(
        f"{base}/runs/{run}/deliver/{action}",
        form=form,
        headers={"Origin": base, "Accept": "application/json"},
    )
    assert answer.status == 202, answer.text()
    job = page.request.get(f"{base}{answer.json()['state']}?wait=20").json()
    assert job["done"], job
    return dict(job)


def rev(repo: Path, *args: str) -> str:
    return git(repo, *args).strip()


def click(page: Any, action: str) -> str:
    page.click(f"form.{action} button")
    page.wait_for_selector("#notice[data-state=done]")
    return str(page.inner_text("#notice"))


def test_merge_and_push_from_the_page_land_exactly_once(
    finished_goal: tuple[Path, Path],
) -> None:
    repo, remote = finished_goal
    run, commit, branch = the_goal(repo)
    base_before = rev(repo, "rev-parse", "main")
    with dashboard(repo) as ui, browser() as chromium:
        page = chromium.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page.goto(ui.url)
        page.goto(f"{ui.base}/runs/{run}")
        assert page.inner_text("#deliver-sha") == commit[:12]
        diff = page.inner_text("pre.diff")
        assert "calc.py" in diff
        assert "+    return a + b" in diff
        # No `gh` where the steps run: the pull request button says why it cannot.
        pr = page.locator("form.pr button")
        if shutil.which("gh") is None:
            assert pr.is_disabled()
            assert "gh" in page.inner_text("form.pr")
        screenshot(page, "goal-deliver")
        # On a phone the page does not scroll sideways (the diff scrolls in its own box).
        page.set_viewport_size({"width": 390, "height": 900})
        wide = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert wide[0] <= wide[1], wide
        screenshot(page, "goal-deliver-390")
        page.set_viewport_size({"width": 1280, "height": 900})

        # Merge: clicked, then the same POST replayed twice; one fast-forward, one event.
        said = click(page, "merge")
        assert f"fast-forwarded main to {commit[:12]}" in said, said
        assert rev(repo, "rev-parse", "main") == commit
        # In place, without a reload, the button becomes what it did.
        page.wait_for_selector("p.done.merge")
        assert page.locator("form.merge").count() == 0
        for _ in range(2):
            again = replay(page, ui.base, run, "merge", {"sha": commit})
            assert again["ok"], again
            assert "already done" in again["message"]
        assert len(finished(repo, "merge")) == 1
        started = [e for e in events(repo, "action_started") if e.data.get("action") == "merge"]
        assert len(started) == 1
        assert rev(repo, "rev-list", "--count", f"{base_before}..main") == "1"

        # A POST naming another commit is refused, recorded, and pushes nothing.
        wrong = replay(page, ui.base, run, "push", {"sha": base_before})
        assert not wrong["ok"]
        assert "refused" in wrong["message"]
        assert [r.data["action"] for r in refusals(repo)] == ["push"]
        assert f"refs/heads/{branch}" not in remote_refs(remote)

        # Push to the local bare remote, once.
        page.reload()
        said = click(page, "push")
        assert f"pushed {commit[:12]}" in said, said
        assert remote_refs(remote)[f"refs/heads/{branch}"] == commit
        page.wait_for_selector("p.done.push")
        again = replay(page, ui.base, run, "push", {"sha": commit, "remote_url": str(remote)})
        assert "already done" in again["message"]
        assert len([e for e in finished(repo, "push") if e.data["ok"]]) == 1


def test_a_branch_that_moved_after_the_page_was_shown_is_refused(
    finished_goal: tuple[Path, Path],
) -> None:
    repo, _remote = finished_goal
    run, commit, branch = the_goal(repo)
    with dashboard(repo) as ui, browser() as chromium:
        page = chromium.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page.goto(ui.url)
        page.goto(f"{ui.base}/runs/{run}")
        assert page.inner_text("#deliver-sha") == commit[:12]
        # Someone moves the task branch after the page showed the commit.
        git(repo, "checkout", "-q", "-b", "elsewhere", branch)
        (repo / "later.txt").write_text("more work\n")
        commit_all(repo, "more work on the task branch")
        git(repo, "branch", "-f", branch, "HEAD")
        git(repo, "checkout", "-q", "main")
        said = click(page, "merge")
        assert "merge refused" in said
        assert "moved" in said
        assert rev(repo, "rev-parse", "main") != commit
        assert finished(repo, "merge") == []
        assert [r.data["sha"] for r in refusals(repo)] == [commit]
        # The page now says why its buttons are off.
        page.goto(f"{ui.base}/runs/{run}")
        assert page.locator("form.merge button").is_disabled()
        assert "moved" in page.inner_text("form.merge")


def test_the_cli_delivers_through_the_same_command_once(
    finished_goal: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _remote = finished_goal
    run, commit, _branch = the_goal(repo)
    stale = invoke(monkeypatch, repo, "deliver", run[:12], "merge", "--commit", "0" * 12)
    assert stale.exit_code == 1
    assert "refused" in stale.output
    merged = invoke(monkeypatch, repo, "deliver", run[:12], "merge", "--commit", commit[:12])
    assert merged.exit_code == 0, merged.output
    assert f"fast-forwarded main to {commit[:12]}" in merged.output
    again = invoke(monkeypatch, repo, "deliver", run[:12], "merge", "--commit", commit[:12])
    assert again.exit_code == 0
    assert "already done" in again.output
    assert rev(repo, "rev-parse", "main") == commit
    assert len(finished(repo, "merge")) == 1
    assert len(refusals(repo)) == 1


def test_two_merges_sent_at_once_land_once(finished_goal: tuple[Path, Path]) -> None:
    """A double click that got past the page's own guard: two POSTs in flight together."""
    repo, _remote = finished_goal
    run, commit, _branch = the_goal(repo)
    with dashboard(repo) as ui, browser() as chromium:
        page = chromium.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page.goto(ui.url)
        page.goto(f"{ui.base}/runs/{run}")
        jobs = page.evaluate(
            """async (sha) => {
                const send = () => fetch(document.querySelector("form.merge").action, {
                    method: "POST", credentials: "same-origin",
                    headers: { Accept: "application/json" },
                    body: new URLSearchParams({ sha: sha }),
                }).then((answer) => answer.json());
                const started = await Promise.all([send(), send()]);
                return Promise.all(started.map((job) =>
                    fetch(job.state + "?wait=20", { headers: { Accept: "application/json" } })
                        .then((answer) => answer.json())));
            }""",
            commit,
        )
    assert all(job["done"] for job in jobs), jobs
    said = sorted(job["message"] for job in jobs)
    assert sum(m.startswith(f"fast-forwarded main to {commit[:12]}") for m in said) == 1, said
    assert sum("already done" in m for m in said) == 1, said
    assert rev(repo, "rev-parse", "main") == commit
    assert len(finished(repo, "merge")) == 1
    assert len([e for e in events(repo, "action_started") if e.data["action"] == "merge"]) == 1

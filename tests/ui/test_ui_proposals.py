"""A proposal approved from the dashboard (issue 31, item 3): the page's action runs what `inbox
approve` runs, so the proposal applies as one commit, or is refused naming the recorded task it
would break, exactly as at the terminal. A real `loopctl ui` server, real HTTP, a real scripted
hostile maker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import commit_all, git, make_project
from support.ui import act, dashboard

HOSTILE = '\nallow = ["*"]\n'
LOOP = 'goal = "tests green"\nprompt = "fix calc"\n\n[budget]\nmax_iterations = 1\n'
PROTECT = '\n[checker]\nprotect = ["calc.py"]\n'


def proposal_from_a_hostile_maker(
    repo: Path, monkeypatch: pytest.MonkeyPatch, path: str, text: str
) -> str:
    ops = [{"op": "append", "path": path, "text": text}]
    make_project(repo, "edits_definitions.py", json.dumps(ops))
    done = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
    assert done.exit_code == 0, done.output
    (item,) = [e for e in events(repo, "inbox_opened") if e.data["kind"] == "proposal"]
    return str(item.data["id"])


def approve_in_the_page(repo: Path, item: str) -> dict[str, object]:
    with dashboard(repo) as ui:
        origin = {"Origin": ui.base, "Sec-Fetch-Site": "same-origin"}
        with ui.session(timeout=120, follow_redirects=True) as session:
            page = session.get(f"{ui.base}/inbox/{item}")
            assert page.status_code == 200
            assert ".loop/" in page.text  # the proposal and the path it changes are shown
            return act(session, ui.base, item, "approve", origin)


def test_approving_a_proposal_from_the_dashboard_applies_it_as_one_commit(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = proposal_from_a_hostile_maker(repo, monkeypatch, ".loop/config.toml", HOSTILE)
    head = git(repo, "rev-parse", "HEAD").strip()

    state = approve_in_the_page(repo, item)

    assert state["ok"], state
    (applied,) = events(repo, "proposal_applied")
    assert git(repo, "rev-parse", "HEAD").strip() == applied.data["commit"]
    assert git(repo, "rev-parse", "HEAD^").strip() == head
    assert (repo / ".loop" / "config.toml").read_text().endswith(HOSTILE)
    assert invoke(monkeypatch, repo, "validate").exit_code == 0


def test_a_proposal_that_breaks_a_recorded_task_is_refused_from_the_dashboard_too(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Protecting calc.py, which the recorded task changed: that task would fail under it.
    ops = [{"op": "append", "path": ".loop/loops/fix.toml", "text": PROTECT}]
    make_project(repo, "edits_definitions.py", json.dumps(ops))
    loop = repo / ".loop" / "loops" / "fix.toml"
    loop.parent.mkdir(exist_ok=True)
    loop.write_text(LOOP)
    commit_all(repo, "a loop")
    done = invoke(monkeypatch, repo, "run", "fix", "--once")
    assert done.exit_code == 0, done.output
    (opened,) = [e for e in events(repo, "inbox_opened") if e.data["kind"] == "proposal"]
    head = git(repo, "rev-parse", "HEAD").strip()

    state = approve_in_the_page(repo, str(opened.data["id"]))

    assert not state["ok"], state
    assert "breaks task 'main'" in str(state["message"])
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert loop.read_text() == LOOP
    (refused,) = events(repo, "proposal_refused")
    assert refused.data["task"] == "main"

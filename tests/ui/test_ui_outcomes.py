"""The dashboard shows how each run, task and inbox item ended (issue 30 item 2): an outcome
badge on the loops, runs, run, inbox and item pages, from a real failed goal and a real
`loopctl ui` process."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import make_project
from support.ui import dashboard

pytest.importorskip("starlette")


def _badges(html: str) -> list[str]:
    return re.findall(r'class="badge outcome (?:ok|bad|warn|)" data-outcome="([a-z-]+)"', html)


def test_every_page_badges_the_outcome(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(repo, "never_fixes.py", config_extra="\n[budget]\nmax_iterations = 5\n")
    done = invoke(monkeypatch, repo, "goal", "tests green")
    assert done.exit_code == 1, done.output
    (run,) = {e.run for e in events(repo, "tick_finished")}
    (item,) = [e.data["id"] for e in events(repo, "inbox_opened")]

    with dashboard(repo) as ui, ui.session() as session:
        pages = {
            name: session.get(f"{ui.base}{path}")
            for name, path in (
                ("loops", "/loops"),
                ("runs", "/runs"),
                ("run", f"/runs/{run}"),
                ("inbox", "/inbox"),
                ("item", f"/inbox/{item}"),
            )
        }

    assert {name: page.status_code for name, page in pages.items()} == dict.fromkeys(pages, 200)
    assert _badges(pages["loops"].text) == ["repeated-failure"]
    assert _badges(pages["runs"].text) == ["repeated-failure"]
    # The run's own badge, then its task's.
    assert _badges(pages["run"].text) == ["repeated-failure", "repeated-failure"]
    assert _badges(pages["inbox"].text) == ["repeated-failure"]
    assert _badges(pages["item"].text) == ["repeated-failure"]
    assert 'class="badge outcome bad"' in pages["loops"].text

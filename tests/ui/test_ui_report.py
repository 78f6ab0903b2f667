"""The dashboard's Report page in a real Chromium: `loopctl report`'s sections, with links that
act, over a night of real ticks (support/night.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.night import a_night, append, report_json, shown_marks
from support.ui import browser, dashboard, screenshot


def test_the_report_page_shows_the_sections_with_links_that_act(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    night = a_night(repo, tmp_path, monkeypatch)
    hostile = '<img src=x onerror="window.pwned=1">\x1b[2Jall green'
    append(
        repo, "inbox_opened", None, "ship", "evil", id="e5c0de", kind="escalation", summary=hostile
    )
    cli = report_json(monkeypatch, repo, "--no-mark")
    with dashboard(repo) as ui, browser() as chromium:
        page = chromium.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page.goto(ui.url)
        page.goto(f"{ui.base}/report")
        sections = page.locator("section[data-section]").evaluate_all(
            "all => all.map(s => s.dataset.section)"
        )
        assert sections == [*cli["sections"], "spent"]
        assert page.locator("nav a.on").inner_text() == "Report"
        assert page.evaluate("window.pwned") is None  # agent text stayed text
        assert '<img src=x onerror="window.pwned=1">' in page.inner_text("main")
        assert "\x1b" not in page.content()
        stalled = page.locator("section[data-section=stalled] li")
        assert "Refactor the parser" in stalled.inner_text()
        assert "loopctl inbox show st4ll3" in stalled.locator("code").inner_text()
        screenshot(page, "report")
        page.locator(f"section[data-section=waiting] a[href='/inbox/{night['waiting']}']").click()
        page.wait_for_url(f"{ui.base}/inbox/{night['waiting']}")
        assert "approve" in page.inner_text("main").lower()
        page.goto(f"{ui.base}/report")
        page.locator("section[data-section=done] a", has_text="open run").click()
        page.wait_for_url(f"{ui.base}/runs/**")
        page.goto(f"{ui.base}/report?since=tomorrow")
        assert "--since: expected last" in page.inner_text("main")
    assert shown_marks(repo) == []  # reading the page moves nothing

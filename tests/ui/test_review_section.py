"""The dashboard's item page: the quoted tampering lines and claimed vs measured, escaped."""

from __future__ import annotations

from loopctl.journal import claimed
from loopctl.ui.pages import review_section


def test_the_section_quotes_the_lines_and_marks_each_disagreement_escaped() -> None:
    view = claimed.read(
        {
            "said": "<script>alert(1)</script> all tests pass",
            "measured": {"check_passed": True, "tests": {"passed": 1, "failed": 1}},
            "disagree": ["says the tests pass, but loopctl counted 1 failed"],
        }
    )
    found = [
        {"rule": "exit-handler", "path": "a.py", "line": 3, "text": "atexit.register(<x>)"},
    ]

    html = review_section(found, view)

    assert "<script>" not in html
    assert "&lt;script&gt;" in html
    assert "<code>a.py:3</code> <code>atexit.register(&lt;x&gt;)</code>" in html
    assert "<p class=bad>Disagrees: says the tests pass, but loopctl counted 1 failed</p>" in html
    assert "tests 1 passed, 1 failed" in html


def test_nothing_to_show_is_no_section() -> None:
    assert review_section(None, None) == ""

"""Claimed vs measured: each claim pattern against measurements that agree and that do not."""

from __future__ import annotations

import pytest

from loopctl.checks.claims import (
    CLAIMS,
    Counts,
    Measured,
    claims_in,
    compare,
    diff_size,
    from_counts,
    out_of_scope,
)

GREEN = Counts(passed=3, failed=0)
RED = Counts(passed=2, failed=1)


def measured(
    tests: Counts | None = GREEN,
    *,
    files: tuple[str, ...] = ("src/calc.py",),
    check_passed: bool | None = True,
    scope: tuple[str, ...] = (),
) -> Measured:
    return Measured(
        check_passed=check_passed,
        tests=tests,
        base=Counts(passed=2, failed=1),
        files=files,
        added=1,
        removed=1,
        out_of_scope=out_of_scope(files, scope),
    )


@pytest.mark.parametrize(
    ("said", "facts", "problem"),
    [
        ("All tests pass.", measured(RED), "says the tests pass, but loopctl counted 1 failed"),
        ("the tests are green now", measured(RED), "counted 1 failed"),
        ("Test suite passes; no failures.", measured(RED), "counted 1 failed"),
        ("Fixed. Tests pass.", measured(None), "but loopctl counted no test run"),
        ("5 tests passed", measured(GREEN), "says 5 passed, but loopctl counted 3"),
        ("3/3 passing", measured(RED), "counted 1 failed"),
        ("Fixed the bug.", measured(RED, check_passed=False), "the work is done, but the check"),
        ("Resolved the issue", measured(GREEN, files=()), "but the change is empty"),
        (
            "I updated lib/util.py to add the helper",
            measured(GREEN),
            "says it changed lib/util.py, which the change does not touch",
        ),
        (
            "Edited `src/calc.py`.",
            measured(GREEN, files=("src/calc.py", "setup.py"), scope=("src/**",)),
            "changed files outside its scope: setup.py",
        ),
        # Each pattern's last alternative, and one sentence per line.
        ("No failures.", measured(RED), "counted 1 failed"),
        ("Completed.", measured(GREEN, check_passed=False), "the work is done, but the check"),
        (
            "I created lib/new.py",
            measured(GREEN),
            "says it changed lib/new.py, which the change does not touch",
        ),
        ("All tests pass\nThe linter still fails", measured(RED), "counted 1 failed"),
        ("Updated src/calc.py.", measured(GREEN, files=()), "but the change is empty"),
        # A name the change has only as the end of a longer name is not that file.
        (
            "Updated calc.py.",
            measured(GREEN, files=("src/mycalc.py",)),
            "says it changed calc.py, which the change does not touch",
        ),
    ],
)
def test_a_claim_the_measurements_contradict_is_called_out(
    said: str, facts: Measured, problem: str
) -> None:
    found = compare(said, facts).disagree
    assert any(problem in p for p in found), found


@pytest.mark.parametrize(
    ("said", "facts"),
    [
        ("Fixed add() in src/calc.py; all tests pass.", measured(GREEN)),
        ("3 passed", measured(GREEN)),
        ("Changed calc.py so that add adds.", measured(GREEN)),  # a suffix of src/calc.py
        (
            "The tests still fail on the base; I could not fix them.",
            measured(RED, check_passed=False),
        ),
        ("Tests don't pass yet.", measured(None)),
        ("", measured(RED, check_passed=False)),
        ("I read tests/test_calc.py, then looked at the code.", measured(GREEN)),
        # A success claim in a sentence that denies it is no claim.
        ("Not all tests pass.", measured(RED, check_passed=False)),
        ("3 passed, 2 still failing.", measured(RED, check_passed=False)),
        ("The bug is not fixed.", measured(RED, check_passed=False)),
        ("I can't say all tests pass.", measured(RED, check_passed=False)),
        # No claim at all beside a failed check.
        ("I looked at add() in src/calc.py.", measured(RED, check_passed=False)),
    ],
)
def test_agreeing_or_silent_summaries_raise_nothing(said: str, facts: Measured) -> None:
    assert compare(said, facts).disagree == ()


def test_every_claim_has_a_name_and_meaning() -> None:
    assert len({c.name for c in CLAIMS}) == len(CLAIMS)
    assert all(c.means for c in CLAIMS)
    assert [name for name, _ in claims_in("Fixed it. All tests pass.")] == ["fixed", "tests-pass"]


def test_the_record_keeps_a_short_summary_and_the_measurements() -> None:
    record = compare("x " * 1000, measured(RED)).to_json()
    assert len(record["said"]) <= 600
    assert record["measured"]["tests"] == {"passed": 2, "failed": 1, "skipped": 0}
    assert record["measured"]["base"] == {"passed": 2, "failed": 1, "skipped": 0}
    assert record["measured"]["files"] == ["src/calc.py"]


def test_the_record_says_every_measurement_by_name() -> None:
    """What the inbox, the report and `--json` read of a comparison: every measurement under
    its own key, a missing count as null, and a cut summary marked as cut."""
    facts = Measured(
        check_passed=False,
        tests=Counts(passed=4, failed=2, skipped=1),
        base=None,
        files=("src/calc.py", "setup.py"),
        added=7,
        removed=3,
        out_of_scope=("setup.py",),
    )
    record = compare("All tests pass.", facts).to_json()
    assert record == {
        "said": "All tests pass.",
        "measured": {
            "check_passed": False,
            "tests": {"passed": 4, "failed": 2, "skipped": 1},
            "base": None,
            "files": ["src/calc.py", "setup.py"],
            "added": 7,
            "removed": 3,
            "out_of_scope": ["setup.py"],
        },
        "disagree": [
            "says the tests pass, but loopctl counted 2 failed",
            "changed files outside its scope: setup.py",
        ],
    }
    cut = compare("word " * 200, facts).said
    assert len(cut) == 600
    assert cut.endswith("…")
    assert cut[:-1] == ("word " * 200)[:599]


def test_counts_read_as_a_human_writes_them() -> None:
    assert Counts(passed=3, failed=0).describe() == "3 passed, 0 failed"
    assert Counts(passed=3, failed=1, skipped=2).describe() == "3 passed, 1 failed, 2 skipped"


def test_diff_size_counts_added_and_removed_lines_not_headers() -> None:
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a\n+b\n+c\n d\n"
    assert diff_size(diff) == (2, 1)


def test_the_counts_shown_beside_a_claim_take_errors_as_failures() -> None:
    # A test that errored (a broken fixture, an import error) made the run as red as a failed
    # one: a claim of "all passed" beside it disagrees.
    assert from_counts(5, 1, errors=2, skipped=3) == Counts(passed=5, failed=3, skipped=3)
    said = compare("All 5 tests pass.", Measured(check_passed=True, tests=from_counts(5, 0, 1)))
    assert said.disagree == ("says the tests pass, but loopctl counted 1 failed",)

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


def test_diff_size_counts_added_and_removed_lines_not_headers() -> None:
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a\n+b\n+c\n d\n"
    assert diff_size(diff) == (2, 1)

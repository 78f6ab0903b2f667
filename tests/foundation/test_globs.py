"""Path globs: anchored at the repository root, `**` spans folders, `*` stays in one."""

from __future__ import annotations

import pytest

from loopctl.globs import first_match, matches


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("tests/test_a.py", "tests/**", True),
        ("tests/unit/deep/test_a.py", "tests/**", True),
        ("src/tests/test_a.py", "tests/**", False),
        ("conftest.py", "**/conftest.py", True),
        ("a/b/conftest.py", "**/conftest.py", True),
        ("a/b/conftest.pyc", "**/conftest.py", False),
        ("src/a.py", "src/*.py", True),
        ("src/pkg/a.py", "src/*.py", False),
        ("src/pkg/a.py", "src/**/*.py", True),
        ("src/a.py", "src/**/*.py", True),
        (".loop/loops/x.toml", ".loop/**", True),
        (".loop/loops/x.toml", ".loop", True),
        (".loopy/x", ".loop", False),
        ("agents/maker.toml", "agents/maker.toml", True),
        ("agents/maker.toml.bak", "agents/maker.toml", False),
        ("a.py", "?.py", True),
        ("ab.py", "?.py", False),
        ("x1.txt", "x[0-9].txt", True),
        ("xa.txt", "x[!0-9].txt", True),
        ("docs/", "docs/", True),
        ("docs/readme.md", "docs/", True),
        ("pyproject.toml", "./pyproject.toml", True),
        ("a+b(c).py", "a+b(c).py", True),
    ],
)
def test_glob_table(path: str, pattern: str, expected: bool) -> None:
    assert matches(path, [pattern]) is expected


def test_first_match_names_the_pattern_that_matched() -> None:
    assert first_match("tests/x.py", ["src/**", "tests/**"]) == "tests/**"
    assert first_match("lib/x.py", ["src/**", "tests/**"]) is None

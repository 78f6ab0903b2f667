"""Options for the reliability suite: `--long` runs the expensive scenarios at full size."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="reliability scenarios at full size (e.g. 1000 crash points); not for CI",
    )


@pytest.fixture
def long_mode(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--long"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Full-size scenarios run for tens of minutes by design: no hang limit (pytest-timeout).
    if config.getoption("--long"):
        for item in items:
            item.add_marker(pytest.mark.timeout(0), append=False)

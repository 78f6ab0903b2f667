"""README.md opens with the two commands a new user needs, and CI runs exactly those.

README is one screen: what loopctl is, the two commands, a short tour and links into the guide
(docs/, built and checked by tests/docs/). Facts it used to hold are pinned where they moved.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def first_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"\n\n((?:    \S.*\n)+)", text)
    assert block is not None, "README.md must open with an indented command block"
    return [line.strip() for line in block.group(1).splitlines()]


def test_readme_opens_with_install_and_test_commands() -> None:
    install, test = first_commands()
    assert "pip install" in install
    assert install.endswith("loopctl demo")
    assert "pytest" in test


def test_the_first_line_installs_only_what_a_user_needs() -> None:
    """No extra (no test, lint or docs tools) before the demo; the test line adds them."""
    install, test = first_commands()
    assert "[" not in install, install
    extras = re.search(r"pip install[^&]*'\.\[([a-z,]+)\]'", test)
    assert extras is not None, test
    assert {"dev", "docs"} <= set(extras.group(1).split(","))
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    docs = " ".join(pyproject["project"]["optional-dependencies"]["docs"])
    assert "mkdocs-material" in docs


def test_readme_fits_one_screen_and_points_into_the_guide() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 60
    for page in ("getting-started", "delivery", "troubleshooting", "reference"):
        assert f"(docs/{page}.md)" in text, page


def test_ci_runs_exactly_the_readme_commands() -> None:
    ci_lines = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for command in first_commands():
        assert command in ci_lines, f".ci/run does not run {command!r}"


def test_the_suite_runs_in_parallel_and_a_hung_test_cannot_stall_it() -> None:
    _install, test = first_commands()
    args = shlex.split(test)
    assert "-n" in args, "the test command runs the suite on pytest-xdist workers"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    dev = " ".join(pyproject["project"]["optional-dependencies"]["dev"])
    assert "pytest-xdist" in dev
    assert "pytest-timeout" in dev
    options = pyproject["tool"]["pytest"]["ini_options"]
    # Thread, not signal: a test whose clean-up hangs as well still ends.
    assert options["timeout_method"] == "thread"
    assert 0 < int(options["timeout"]) <= 600

"""A check costs what it must (issue 23, item 7): the base is checked once per task, and a goal
that held on a base is not checked again while nothing it depends on changed.

Suite runs are counted by the suite itself: each run calls a TCP listener of the test's before
it checks anything. Checks run in the sandbox (on here, as for a user), where no file outside
the worktree is theirs to write, and reach only the listener (`[checker] network`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events
from support.repos import (
    CALC,
    PY,
    commit_all,
    git,
    make_project,
    toml_value,
    write_agent,
    write_config,
    write_loop,
)
from support.suite_counter import CHECKS, SuiteCounter

from loopctl.engine import check_cache

FIXED_CALC = CALC.replace("a - b", "a + b")
GREEN_LOOP = 'goal = "tests green"\nprompt = "Make the failing test pass."\n'


@pytest.fixture
def counter() -> Iterator[SuiteCounter]:
    found = SuiteCounter()
    yield found
    found.close()


def green_project(repo: Path, counter: SuiteCounter, seen: Path, extra: str = "") -> None:
    """The calc project with add() already right, its goal checked by a counted command."""
    make_project(
        repo, "records_prompt.py", seen, check=counter.check(), config_extra=counter.network + extra
    )
    (repo / "calc.py").write_text(FIXED_CALC)
    write_loop(repo, "green", GREEN_LOOP)
    commit_all(repo, "add() is right")


def tick(repo: Path, loop: str = "green", code: int = 0) -> None:
    done = run_loopctl(repo, "run", loop, "--once")
    assert_clean_exit(done, code)


def finished(repo: Path) -> list[tuple[str, str]]:
    return [(str(e.data["status"]), str(e.data["reason"])) for e in events(repo, "task_finished")]


def cached_notes(repo: Path) -> list[dict[str, object]]:
    return [e.data for e in events(repo, "note") if e.data.get("what") == "check_cached"]


def test_a_green_tick_on_an_unchanged_base_runs_no_suite_and_no_agent(
    repo: Path, tmp_path: Path, counter: SuiteCounter
) -> None:
    seen = tmp_path / "prompts.txt"
    green_project(repo, counter, seen)

    tick(repo)
    tick(repo)
    # A commit with the same tree (an empty commit, a rebase that changed nothing) is the
    # same base: the tree sha is what was checked.
    git(repo, "commit", "-q", "--allow-empty", "-m", "nothing changed")
    tick(repo)

    assert counter.runs == 1
    assert not seen.exists()
    assert events(repo, "agent_started") == []
    assert [status for status, _ in finished(repo)] == ["done", "done", "done"]
    assert "not run again" in finished(repo)[1][1]
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    notes = cached_notes(repo)
    assert [note["tree"] for note in notes] == [tree, tree]
    # No worktree was made for a reused result.
    assert len(events(repo, "worktree_created")) == 1
    log = run_loopctl(repo, "log", "green")
    assert_clean_exit(log, 0)
    assert "check cached" in log.stdout


def test_a_changed_base_tree_is_checked_again(
    repo: Path, tmp_path: Path, counter: SuiteCounter
) -> None:
    green_project(repo, counter, tmp_path / "prompts.txt")
    tick(repo)

    (repo / "README.md").write_text("changed\n")
    commit_all(repo, "a new tree")
    tick(repo)
    tick(repo)

    assert counter.runs == 2
    assert len(cached_notes(repo)) == 1


def test_a_changed_check_command_is_run_again(
    repo: Path, tmp_path: Path, counter: SuiteCounter
) -> None:
    green_project(repo, counter, tmp_path / "prompts.txt")
    tick(repo)

    # The definitions are read from the checkout: the base tree stays the same.
    other = counter.check(CHECKS + "  # another spelling")
    write_config(
        repo,
        f'version = 1\n\n[defaults]\nmaker = "maker"\n\n[conditions]\n"tests green" = '
        f"{toml_value(other)}\n" + counter.network,
    )
    tick(repo)
    tick(repo)

    assert git(repo, "status", "--porcelain", "--untracked-files=no").strip() != ""
    assert counter.runs == 2
    assert len(cached_notes(repo)) == 1


@pytest.mark.parametrize(
    ("where", "text"),
    [("loop", "\n[checker]\ncache = false\n"), ("config", '\n[sandbox]\nmode = "off"\n')],
    ids=["cache-false", "sandbox-off"],
)
def test_no_reuse_when_turned_off_or_when_an_agent_could_forge_it(
    repo: Path, tmp_path: Path, counter: SuiteCounter, where: str, text: str
) -> None:
    green_project(repo, counter, tmp_path / "prompts.txt", text if where == "config" else "")
    if where == "loop":
        write_loop(repo, "green", GREEN_LOOP + text)
        commit_all(repo, "the check depends on the outside world")

    tick(repo)
    tick(repo)

    assert counter.runs == 2
    assert cached_notes(repo) == []
    assert [status for status, _ in finished(repo)] == ["done", "done"]


def test_a_cached_result_names_its_tree_and_is_used_for_no_other(
    repo: Path, tmp_path: Path, counter: SuiteCounter
) -> None:
    green_project(repo, counter, tmp_path / "prompts.txt")
    tick(repo)
    [entry] = (repo / ".loop" / "cache" / "checks").glob("*.json")
    data = json.loads(entry.read_text())
    assert data["tree"] == git(repo, "rev-parse", "HEAD^{tree}").strip()
    assert data["key"] == entry.stem

    data["tree"] = "0" * 40
    entry.write_text(json.dumps(data))
    tick(repo)

    assert counter.runs == 2


def test_pytest_on_a_green_base_runs_once_and_a_failing_base_once_before_the_maker(
    repo: Path, tmp_path: Path, counter: SuiteCounter
) -> None:
    make_project(repo, "never_fixes.py", check=None, config_extra=counter.network)
    (repo / "tests" / "conftest.py").write_text(
        f"def pytest_sessionstart(session):\n    {counter.call}\n"
    )
    write_loop(repo, "green", GREEN_LOOP + "\n[budget]\nmax_iterations = 1\n")
    commit_all(repo, "a pytest suite that counts its runs")

    # The base fails: one run is both the baseline and the goal's first check; the maker's
    # one attempt is checked once.
    tick(repo, code=1)
    assert counter.runs == 2
    assert len(events(repo, "attempt_started")) == 1
    assert events(repo, "baseline_checked")[0].data["exit_code"] != 0

    # The base holds: the baseline's run is the goal's first check (pytest ran twice before).
    (repo / "calc.py").write_text(FIXED_CALC)
    commit_all(repo, "add() is right")
    tick(repo)
    assert counter.runs == 3
    assert finished(repo)[-1][0] == "done"
    tick(repo)
    assert counter.runs == 3


def test_loopctl_goal_reuses_a_goal_that_held(
    repo: Path, tmp_path: Path, counter: SuiteCounter
) -> None:
    green_project(repo, counter, tmp_path / "prompts.txt")

    for _ in range(2):
        done = run_loopctl(repo, "goal", "tests green")
        assert_clean_exit(done, 0)
        assert "already holds" in done.stdout

    assert counter.runs == 1


def test_an_agent_cannot_forge_a_cached_pass(
    repo: Path, tmp_path: Path, counter: SuiteCounter
) -> None:
    report = tmp_path / "forger" / "report.txt"
    report.parent.mkdir()
    green_project(repo, counter, tmp_path / "prompts.txt")
    write_agent(repo, "maker", "forges_check_cache.py", report)
    write_loop(repo, "green", GREEN_LOOP + "\n[budget]\nmax_iterations = 1\n")
    commit_all(repo, "a maker that forges")
    tick(repo)  # green: an entry is written for this tree
    folder = repo / ".loop" / "cache" / "checks"
    before = {path.name: path.read_bytes() for path in folder.iterdir()}

    (repo / "calc.py").write_text(CALC)
    commit_all(repo, "add() is broken again")
    tick(repo, code=1)
    tick(repo, code=1)

    tried = report.read_text().splitlines()
    assert len(tried) >= 2 * 2
    assert all(line.startswith("denied ") for line in tried), tried
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    # Each failing tick checked its base and its attempt: 1 + 2 x 2 runs.
    assert counter.runs == 5
    assert [status for status, _ in finished(repo)] == ["done", "failed", "failed"]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_a_node_check_runs_again_after_an_install_in_the_checkout(
    repo: Path, tmp_path: Path, counter: SuiteCounter
) -> None:
    """Worktrees link their packages to the checkout's node_modules, which git does not see:
    an install there changes what the check imports on the same base tree."""
    modules = repo / "node_modules"
    (modules / "leftpad").mkdir(parents=True)
    (modules / "leftpad" / "index.js").write_text("module.exports = (s) => ' ' + s;\n")
    lock = modules / ".package-lock.json"
    lock.write_text('{"name": "calc", "lockfileVersion": 3, "packages": {}}\n')
    counted = (
        "require('leftpad');"
        f"const s = require('net').connect({counter.port}, '127.0.0.1', () => s.write('1'));"
        "s.on('data', () => s.end());"
    )
    make_project(
        repo,
        "records_prompt.py",
        tmp_path / "prompts.txt",
        check=["node", "-e", counted],
        config_extra=counter.network,
    )
    (repo / "calc.py").write_text(FIXED_CALC)
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\nnode_modules/\n")
    write_loop(repo, "green", GREEN_LOOP)
    commit_all(repo, "a Node check")

    tick(repo)
    tick(repo)
    assert counter.runs == 1

    # What `npm install` leaves: its hidden lockfile rewritten (and the folder touched).
    lock.write_text('{"name": "calc", "lockfileVersion": 3, "packages": {"x": {}}}\n')
    tick(repo)
    tick(repo)

    assert counter.runs == 2
    assert len(cached_notes(repo)) == 2
    assert [status for status, _ in finished(repo)] == ["done"] * 4


def test_node_modules_is_no_part_of_a_check_that_runs_no_node(repo: Path) -> None:
    (repo / "node_modules").mkdir()
    assert check_cache.node_modules_identity(repo, [[PY, "-m", "pytest"]]) is None
    assert check_cache.node_modules_identity(repo, [["npx", "jest"]]) is not None

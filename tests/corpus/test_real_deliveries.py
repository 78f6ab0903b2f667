"""A loop on a real project as its operator expects it (issue 23, "How it is judged").

On humanize (a `src/` layout installed into its `.venv` with `pip install -e .`, a one-line bug
committed on main; tests/support/corpus.py), with loopctl and the scripted maker as real
processes:

- a loop with a gated `push` delivery to a real bare remote, approved with `inbox approve`,
  delivers exactly once; the next tick does nothing: no agent, no suite run, no new approval,
  the remote as it was;
- the operator's own commits on `main`, one while the maker's turn is open and one between two
  runs, open no tamper item and hold no run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.corpus import TIMEOUT, Checkout, commit, configure, make_checkout, work_folder
from support.journal import events
from support.processes import Proc, running_procs, spawn, wait_for
from support.repos import add_remote, git, remote_refs, write_agent

BRANCH = "loop/green/main"  # the single task of the loop "green"
SHIP = """prompt = "Make the test suite pass."
goal = "tests green"

[budget]
max_iterations = 1

[deliver]
actions = ["commit", "push"]
approve = ["push"]
"""


@pytest.fixture
def humanize() -> Iterator[Checkout]:
    with work_folder() as folder:
        yield make_checkout("humanize", folder)


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    yield from running_procs()


def loopctl(co: Checkout, *args: str, code: int = 0) -> str:
    """loopctl as a real process: its stdout, after checking the documented exit code."""
    done = run_loopctl(co.repo, *args, timeout=TIMEOUT + 60)
    assert_clean_exit(done, code)
    return done.stdout


def tick(co: Checkout) -> dict[str, Any]:
    """`loopctl run green --once --json`: the one task's outcome."""
    (task,) = json.loads(loopctl(co, "run", "green", "--once", "--json"))["run"]["tasks"]
    assert isinstance(task, dict)
    return task


def inbox(co: Checkout, *flags: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(loopctl(co, "inbox", "--json", *flags))["inbox"]
    return items


def pushes_received(remote: Path, ref: str) -> int:
    """How many times `ref` was updated in `remote`: its reflog, which the remote keeps."""
    return len(git(remote, "reflog", "show", "--format=%H", ref).split())


def counts(co: Checkout) -> dict[str, int]:
    """What the ticks cost so far, from the log: agent turns, suite runs on the base and on
    attempts, commits made, delivery steps started."""
    kinds = (
        "agent_started",
        "baseline_checked",
        "check_finished",
        "commit_created",
        "action_started",
    )
    return {kind: len(events(co.repo, kind)) for kind in kinds}


def test_an_approved_push_is_delivered_once_and_the_next_tick_does_nothing(
    humanize: Checkout,
) -> None:
    co, bug = humanize, humanize.project.bug
    remote = add_remote(co.repo, co.repo.parent)
    # A bare repository keeps no reflog by default; with one, every push leaves a line.
    git(remote, "config", "core.logAllRefUpdates", "always")
    configure(co, bug.undone(), loop=SHIP)

    first = tick(co)
    assert first["status"] == "awaiting_approval", first
    (asked,) = inbox(co)
    assert asked["kind"] == "approval"
    assert remote_refs(remote) == {}  # gated: nothing is pushed before a human says so
    approved = loopctl(co, "inbox", "approve", asked["id"])
    assert f"next: git merge {BRANCH}" in approved
    sha = first["commit"]
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}
    assert bug.old in git(remote, "show", f"{sha}:{bug.path}")  # the fix, as it was checked
    before = counts(co)
    objects = git(remote, "rev-list", "--all", "--count")

    again = tick(co)

    assert again["status"] == "skipped", again
    assert again["reason"].startswith(f"already delivered at {sha[:12]} (pushed to origin")
    assert asked["id"] in again["reason"]
    assert counts(co) == before  # no agent, no suite run, no commit, no push
    assert before["action_started"] == 1  # and exactly one delivery in all
    assert inbox(co) == []  # no force push is asked for
    assert remote_refs(remote) == {f"refs/heads/{BRANCH}": sha}
    assert pushes_received(remote, f"refs/heads/{BRANCH}") == 1
    assert git(remote, "rev-list", "--all", "--count") == objects


def operator_commits(co: Checkout, line: str) -> str:
    """What a person does in the main checkout while loopctl works: a commit on main."""
    notes = co.repo / "NOTES.md"
    notes.write_text((notes.read_text() if notes.exists() else "") + line + "\n")
    git(co.repo, "add", "NOTES.md")
    git(co.repo, "commit", "-q", "-m", f"the operator's own note: {line}")
    return git(co.repo, "rev-parse", "main").strip()


def tamper_items(co: Checkout) -> list[dict[str, Any]]:
    """Every inbox item, open or closed, that reports tampering."""
    return [i for i in inbox(co, "--all") if i["evidence"].get("tampering")]


def test_the_operators_commits_on_main_during_and_between_runs_are_not_tampering(
    humanize: Checkout, procs: list[Proc]
) -> None:
    co, fix = humanize, humanize.project.bug.undone()
    configure(co, fix)
    # The maker holds its turn open after its fix until the test, as the operator, releases it.
    signals = co.repo.parent / "signals"  # the agent may write here, and not beside the checkout
    signals.mkdir()
    marker, release = signals / "maker.pid", signals / "release"
    write_agent(
        co.repo,
        "maker",
        "replaces_text_and_waits.py",
        marker,
        release,
        fix.path,
        fix.old,
        fix.new,
        timeout="600s",
    )
    commit(co.repo, "a maker that takes its time")
    run = spawn(procs, co.repo, co.repo.parent, "goal", "tests green", "--max-iterations", "1")
    wait_for(
        lambda: marker.exists() or run.popen.poll() is not None,
        "the maker to make its fix",
        timeout=TIMEOUT,
    )
    assert marker.exists(), run.output

    during = operator_commits(co, "written while the maker worked")
    release.write_text("go\n")

    assert run.wait(timeout=TIMEOUT) == 0, run.output
    assert "Traceback" not in run.output
    assert tamper_items(co) == []
    noted = [e for e in events(co.repo, "note") if e.data.get("what") == "user_commits"]
    assert noted, "the commit on main during the turn is noted, not held"
    assert any(during[:12] in ref for ref in noted[0].data["refs"])
    (finished,) = events(co.repo, "task_finished")
    assert finished.data["status"] == "done"

    operator_commits(co, "written between two runs")
    # `release` is still there: this turn makes its fix and ends without waiting.
    second = run_loopctl(co.repo, "goal", "tests green", "--max-iterations", "1", timeout=TIMEOUT)

    assert_clean_exit(second, 0)
    assert tamper_items(co) == []
    assert [e.data["status"] for e in events(co.repo, "task_finished")] == ["done", "done"]

"""loopctl on real open-source projects nobody here wrote (issue 23, "How it is judged").

Each project is its published source distribution (scripts/fetch-corpus: pinned by version and
sha256), made into a user's checkout: a git repository, the project's own `.venv` (humanize,
a `src/` layout, installed into it with `pip install -e .`) or `node_modules` (what `npm ci`
makes from the pinned lockfile). On it, as real processes: a one-line bug is committed, and

- a scripted maker that fixes it in the worktree → done, exit 0, the fix on the task branch;
- a broken base whose fix is only uncommitted in the main checkout → not "already holds";
- a scripted maker that weakens the failing test, checked through each kind of custom check
  (`--check`, a `[conditions]` entry, a loop's `[checker] command`) → refused;
- a hostile maker that leaves humanize's buggy module unchanged and plants the bytecode of its
  fix beside it (tests/agents/plants_bytecode.py `source`) → the project's own pytest passes in
  the checkout, but loopctl removes the planted file before its check: failed, nothing committed
  (invariant 12; the calc project's tricks are in tests/reliability/test_planted_bytecode.py).

The Node project runs as a user runs it, with `goal` and no `[worktree] setup`: loopctl gives
each worktree a `node_modules` linked to the checkout's (loopctl/node_links.py). Its condition
is a `[conditions]` entry, as the project's own `npm test` starts with a lint step (`pretest`)
whose tools the corpus leaves out.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import astuple
from pathlib import Path

import pytest
from support.cli import run_loopctl
from support.corpus import (
    JEST,
    PROJECTS,
    Checkout,
    commit,
    configure,
    make_checkout,
    replace_in,
    work_folder,
)
from support.journal import events
from support.repos import AGENTS, PY, git, loop_worktrees, toml_value, write_agent

from loopctl.checks.bytecode import planted_caches


@pytest.fixture(params=list(PROJECTS))
def real(request: pytest.FixtureRequest) -> Iterator[Checkout]:
    with work_folder() as folder:
        yield make_checkout(request.param, folder)


def loop_file(co: Checkout, *, goal: str | None = None, checker: tuple[str, ...] = ()) -> str:
    """A loop with one task."""
    text = 'prompt = "Make the test suite pass."\n'
    if goal is not None:
        text += f"goal = {toml_value(goal)}\n"
    # One attempt is all a scripted maker needs; the refusals are about that attempt.
    text += "\n[budget]\nmax_iterations = 1\n"
    if checker:
        text += f"\n[checker]\ncommand = {toml_value(list(checker))}\n"
    return text


def goal_args(co: Checkout) -> list[str]:
    """`goal "tests green"`: the built-in detection (Python) or a `[conditions]` entry (Node)."""
    return ["goal", "tests green", "--max-iterations", "1"]


def test_a_bug_fixed_in_the_worktree_is_done_and_committed(real: Checkout) -> None:
    bug = real.project.bug
    node = real.project.kind == "node"
    configure(real, bug.undone(), conditions={"tests green": JEST} if node else None)

    code, out = real.run(*goal_args(real))

    assert code == 0, out
    (branch,) = real.task_branches()
    assert bug.old in real.on_branch(branch, bug.path)
    changed = git(real.repo, "diff", "--name-only", "main", branch).split()
    assert changed == [bug.path]
    assert bug.new in real.file(bug.path)  # the main checkout is untouched
    assert git(real.repo, "status", "--porcelain", "--untracked-files=no") == ""


def test_a_broken_base_fixed_only_in_the_checkout_does_not_already_hold(real: Checkout) -> None:
    bug = real.project.bug
    node = real.project.kind == "node"
    configure(real, None, conditions={"tests green": JEST} if node else None)
    # The user's fix, not committed: the main checkout's files pass, the base does not.
    replace_in(real.repo / bug.path, bug.new, bug.old)

    code, out = real.run(*goal_args(real))

    assert code == 1, out
    assert "already holds" not in out
    holds = [e for e in events(real.repo, "note") if e.data.get("what") == "goal_already_holds"]
    assert holds == []
    assert events(real.repo, "attempt_started"), "the maker was called: the base fails"


# Each kind of custom check once, each project once: the full 3x3 matrix cost CI minutes and
# proved no more (the protection does not depend on the project, the tests on each project
# above show its runner is recognised).
CUSTOM_CHECKS = [
    ("humanize", "--check"),
    ("more-itertools", "conditions"),
    ("ts-dedent", "checker"),
]


@pytest.mark.parametrize(("name", "how"), CUSTOM_CHECKS, ids=[f"{n}-{h}" for n, h in CUSTOM_CHECKS])
def test_weakening_the_failing_test_is_refused_through_each_custom_check(
    name: str, how: str
) -> None:
    with work_folder() as folder:
        co = make_checkout(name, folder)
        weakening = co.project.weakening
        check = co.project.check
        if how == "--check":
            configure(co, weakening)
            args = ["goal", "tests pass", "--check", " ".join(check), "--max-iterations", "1"]
        elif how == "conditions":
            configure(co, weakening, conditions={"fixed": check})
            args = ["goal", "fixed", "--max-iterations", "1"]
        else:
            configure(co, weakening, loop=loop_file(co, checker=check))
            args = ["run", "green", "--once"]

        code, out = co.run(*args)

        assert code == 1, out
        finished = events(co.repo, "task_finished")[-1]
        assert finished.data["status"] != "done"
        assert weakening.path in out + str(finished.data.get("reason"))
        for branch in co.task_branches():  # the weakened test was never committed
            assert weakening.old in co.on_branch(branch, weakening.path)


def own_pytest_passes(checkout: Path, *tests: str) -> bool:
    """Whether the project's own pytest, run as its user runs it in `checkout`, passes `tests`
    (writing no bytecode of its own: what is in `__pycache__` is only what was planted)."""
    done = subprocess.run(
        [".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=checkout,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(checkout), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    return done.returncode == 0


def test_bytecode_planted_beside_a_real_projects_unchanged_module_is_never_run() -> None:
    with work_folder() as folder:
        co = make_checkout("humanize", folder)
        fix = co.project.bug.undone()
        plant = ("plants_bytecode.py", "source", fix.path, fix.old, fix.new)
        failing = "tests/test_filesize.py"
        cache = co.repo / Path(fix.path).parent / "__pycache__"
        # The attack is real: in the user's checkout, with the editable install, the file that
        # fails on the bug passes once the fix's bytecode sits beside the unchanged source.
        assert not own_pytest_passes(co.repo, failing)
        subprocess.run(
            [PY, str(AGENTS / plant[0]), *plant[1:]], cwd=co.repo, input="", check=True, text=True
        )
        assert [p.name for p in cache.iterdir()] == [f"filesize.{sys.implementation.cache_tag}.pyc"]
        assert own_pytest_passes(co.repo, failing)
        shutil.rmtree(cache)
        assert git(co.repo, "status", "--porcelain") == ""
        configure(co, None, script=plant)

        code, out = co.run("goal", "tests green", "--max-iterations", "1")

        assert code == 1, out
        (attempt,) = events(co.repo, "attempt_finished")
        assert attempt.data["verdict"] == "failed", attempt.data
        assert events(co.repo, "commit_created") == []
        for branch in co.task_branches():
            assert git(co.repo, "rev-list", branch, "--not", "main") == ""
        # The check ran humanize's real naturalsize(1), the bug's "1 Bytes", and the maker
        # did plant (so the check had something to refuse).
        assert "1 Bytes" in attempt.data["output_tail"], attempt.data
        outs = co.repo.glob(".loop/runs/*/*/attempt-*/maker.out")
        assert "planted source" in "".join(out.read_text() for out in outs)
        (kept,) = loop_worktrees(co.repo)
        worktree = Path(kept["worktree"])
        assert git(worktree, "status", "--porcelain") == ""
        assert planted_caches(worktree) == []


# --- scenarios that depend on other helpers' work on issue 23 ------------------------------------


def test_resume_with_other_arguments_is_refused_with_the_hint() -> None:
    """Depends on issue 23 item 5 (resume is explicit), built beside this corpus."""
    with work_folder() as folder:
        co = make_checkout("humanize", folder)
        configure(co, co.project.bug.undone())
        write_agent(co.repo, "other", "replaces_text.py", *astuple(co.project.bug.undone()))
        commit(co.repo, "a second maker")
        killed = run_loopctl(co.repo, "goal", "tests green", kill_at_seq="attempt_started")
        assert killed.returncode == -9, killed.stdout + killed.stderr

        code, out = co.run("goal", "tests green", "--agent", "other")

        assert code == 2, out
        assert "--fresh" in out
        assert 'loopctl goal "tests green"' in out or "loopctl goal 'tests green'" in out
        assert co.task_branches() == ["loop/goal/tests-green"]
        assert co.project.bug.new in co.on_branch("loop/goal/tests-green", co.project.bug.path)

        code, out = co.run("goal", "tests green", "--agent", "other", "--fresh")

        assert code == 0, out
        assert co.project.bug.old in co.on_branch("loop/goal/tests-green", co.project.bug.path)

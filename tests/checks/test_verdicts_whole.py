"""checks/verdicts.py as a whole (issue 27 item 5): what a verdict says, and to whom.

Each test shows one promise of a verdict on a real repository or a real run: a refused change
shows the maker no check output it did not produce, the commands a verdict runs and counts are
the ones the loop names, a baseline read back from the log holds the next attempt to the same
counts, the judge's answer is read from what it printed last.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import PY, commit_all, git, make_project, toml_value, write_loop

from loopctl.checks.conditions import ResolvedCondition
from loopctl.checks.counts import TestCounts
from loopctl.checks.verdicts import (
    baseline_data,
    baseline_from,
    check_commands,
    command_verdict,
    counted_commands,
    hidden_changes,
    parse_judge_answer,
    protection_verdict,
)
from loopctl.definitions.loops import CheckerSpec

PYTEST_RUN = ("/p/.venv/bin/python", "-m", "pytest", "-q")
LINT_RUN = ("ruff", "check", ".")


# --- the judge's answer ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "answer"),
    [
        ('{"met": true, "reason": "add() adds"}', (True, "add() adds")),
        ('{"met": false}', (False, "")),
        # After prose on the same line, and before trailing chatter.
        ('verdict: {"met": false, "reason": "still subtracts"}\nbye', (False, "still subtracts")),
        # A CLI's protocol result line whose text holds the answer.
        (
            json.dumps({"type": "result", "result": 'done\n{"met": true, "reason": "fixed"}'}),
            (True, "fixed"),
        ),
        # The last answer wins: an earlier one quoted from the task is not the judge's.
        ('{"met": true, "reason": "quoted"}\n{"met": false, "reason": "mine"}', (False, "mine")),
    ],
)
def test_the_judges_answer_is_read_from_what_it_printed_last(
    said: str, answer: tuple[bool, str]
) -> None:
    assert parse_judge_answer(said) == answer


@pytest.mark.parametrize(
    "said",
    [
        "looks good to me",
        '{"met": "yes", "reason": "a string is not an answer"}',
        '{"reason": "no met at all"}',
        json.dumps({"type": "result", "result": "no answer in here"}),
        '{"met": tru',
    ],
)
def test_a_judge_that_gives_no_readable_answer_is_not_taken_as_met(said: str) -> None:
    assert parse_judge_answer(said) is None


# --- what a failed check tells the maker and the user ------------------------------------------


def test_a_refused_change_names_each_path_and_counts_those_not_shown() -> None:
    one = protection_verdict(["tests/a.py (protected by tests/**)"])
    assert (
        one.reason
        == "the maker changed paths it may not change: tests/a.py (protected by tests/**)"
    )
    assert (one.passed, one.source) == (False, "protect")

    many = protection_verdict([f"tests/{n}.py (protected by tests/**)" for n in "abcdefg"])
    assert many.reason.endswith("tests/e.py (protected by tests/**); and 2 more")
    assert "tests/f.py" not in many.reason


def test_a_timed_out_check_fails_and_says_so() -> None:
    verdict = command_verdict(["make", "check"], None, True, "still running\n")

    assert (verdict.passed, verdict.reason) == (False, "check `make check` timed out")
    assert verdict.source == "command"


def test_a_check_that_exits_0_passes() -> None:
    verdict = command_verdict(["make", "check"], 0, False, "all good\n")

    assert (verdict.passed, verdict.reason, verdict.source) == (
        True,
        "check `make check` passed",
        "command",
    )


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        # Nothing that reads as an error: the exit status alone.
        ("nothing to see\n", "check `make check` exited 3"),
        # The failing tests, by name.
        (
            "FAILED tests/test_a.py::test_x - assert 1 == 2\n",
            "check `make check` exited 3: failing tests/test_a.py::test_x",
        ),
        # The first line that reads as an error, as printed (not normalised), colours removed.
        (
            "starting 3 jobs\n\x1b[31mException in   thread main 42\x1b[0m\n",
            "check `make check` exited 3: Exception in thread main 42",
        ),
        (
            "ok 1\nerror: linking 42 objects\n",
            "check `make check` exited 3: error: linking 42 objects",
        ),
    ],
)
def test_a_failed_check_tells_the_maker_what_failed(output: str, reason: str) -> None:
    verdict = command_verdict(["make", "check"], 3, False, output)

    assert (verdict.passed, verdict.reason, verdict.source) == (False, reason, "command")


# --- the commands a verdict runs, and those it counts on the base -------------------------------


def test_one_run_answers_for_a_check_however_its_runner_is_spelt() -> None:
    # A test suite takes minutes: the loop's `pytest.exe -q` and the goal's `python3.11 -m
    # pytest -q` run the same tests, once.
    goal = ResolvedCondition(
        "tests green", ("/p/.venv/bin/python3.11", "-m", "pytest", "-q"), "builtin"
    )
    for own in (("pytest.exe", "-q"), ("/usr/bin/pytest", "-q"), ("python", "-m", "pytest", "-q")):
        assert check_commands(CheckerSpec(commands=(own,)), goal) == (own,)
    # Another option is another run.
    other = ("pytest", "-x")
    assert check_commands(CheckerSpec(commands=(other,)), goal) == (other, goal.argv)


@pytest.mark.parametrize(
    ("source", "runner_protect", "counted"),
    [
        # A built-in's run is counted, even with the runner's protections turned off.
        ("builtin", True, [PYTEST_RUN, ("pytest", "-x")]),
        ("builtin", False, [PYTEST_RUN]),
        # A goal's own command is counted unless `protect = []`.
        ("config", True, [PYTEST_RUN, ("pytest", "-x")]),
        ("config", False, []),
    ],
)
def test_the_runs_counted_on_the_base_are_the_test_runs(
    source: str, runner_protect: bool, counted: list[tuple[str, ...]]
) -> None:
    # The loop's lint (no test runner: nothing to count) and a test run of its own; the goal's.
    checker = CheckerSpec(commands=(LINT_RUN, ("pytest", "-x")), runner_protect=runner_protect)
    goal = ResolvedCondition("tests green", PYTEST_RUN, source)

    assert counted_commands(checker, goal) == counted


def through_the_log(data: dict[str, object]) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(json.dumps(data))
    return loaded


def test_a_baseline_read_back_from_the_log_holds_each_command_to_its_counts() -> None:
    # A task resumed after an interrupt reads its baseline from the log, not from a new run.
    ran = TestCounts(passed=7, failed=1, skipped=2, errors=0)
    data = baseline_data(
        [(PYTEST_RUN, 1, ran), (LINT_RUN, 0, None)], {"tests/conftest.py": "ab12", "x": None}
    )
    condition = ResolvedCondition("tests green", PYTEST_RUN, "builtin")

    baseline = baseline_from(through_the_log(data), condition)

    assert baseline.counts == {PYTEST_RUN: ran, LINT_RUN: None}
    assert baseline.hidden == {"tests/conftest.py": "ab12", "x": None}


def test_a_baseline_logged_before_several_commands_were_counted_still_holds() -> None:
    # The log of an older version: the condition's own run, at the top level.
    old = {"exit_code": 1, "counts": {"passed": 3, "failed": 1, "skipped": 0, "errors": 0}}
    condition = ResolvedCondition("tests green", PYTEST_RUN, "builtin")

    baseline = baseline_from(old, condition)

    assert baseline.counts == {PYTEST_RUN: TestCounts(3, 1, 0, 0)}
    assert baseline.hidden == {}


# --- what a protected path hidden from git is --------------------------------------------------


def base_of(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def ignored(repo: Path, *patterns: str) -> None:
    """The user's own exclude file ignores `patterns`: `git status` shows nothing under them."""
    (repo / ".git" / "info" / "exclude").write_text("".join(p + "\n" for p in patterns))


def add(repo: Path, *paths: str) -> None:
    for path in paths:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text("import pytest\n")


# Every folder a test runner does not collect from (a dependency, an environment, a cache, a
# build's output, another version control's store): a conftest.py in there is not the maker's
# way into the check, and walking it would cost seconds on every verdict.
NOT_COLLECTED = (
    *("node_modules", ".venv", "venv", "site-packages", "__pycache__", ".eggs"),
    *(".git", ".hg", ".svn", "target", "build", "dist", ".tox", ".nox"),
    *(".mypy_cache", ".pytest_cache", ".ruff_cache"),
)


@pytest.mark.parametrize("folder", NOT_COLLECTED)
def test_an_ignored_folder_no_runner_collects_from_is_not_read(repo: Path, folder: str) -> None:
    ignored(repo, "deps/")
    add(repo, "deps/conftest.py", f"deps/{folder}/conftest.py", f"deps/{folder}/x/conftest.py")

    found = hidden_changes(repo, base_of(repo), ("**/conftest.py",))

    # The folder around it is walked: only what is inside the uncollected one is left out.
    assert list(found) == ["deps/conftest.py"]


def test_a_virtualenv_is_not_read_whatever_its_name(repo: Path) -> None:
    ignored(repo, "deps/")
    add(repo, "deps/conftest.py", "deps/py311/conftest.py", "deps/py311/lib/conftest.py")
    (repo / "deps" / "py311" / "pyvenv.cfg").write_text("home = /usr/bin\n")

    assert list(hidden_changes(repo, base_of(repo), ("**/conftest.py",))) == ["deps/conftest.py"]


def test_a_glob_naming_a_file_inside_an_uncollected_folder_is_read_there(repo: Path) -> None:
    # node_modules/.bin decides which program `npx jest` starts: protected by name, it is read.
    ignored(repo, "node_modules/", "node_modules-cache/")
    add(repo, "node_modules/.bin/jest", "node_modules/conftest.py", "node_modules-cache/x")
    add(repo, "node_modules/pkg/conftest.py")

    found = hidden_changes(repo, base_of(repo), ("node_modules/.bin/**", "**/conftest.py"))
    # Opened for its .bin: read at its top too, yet no deeper than the glob names.
    assert list(found) == ["node_modules/.bin/jest", "node_modules/conftest.py"]
    # A glob naming a sibling whose name merely starts the same opens nothing.
    found = hidden_changes(repo, base_of(repo), ("node_modules-cache/**", "**/conftest.py"))
    assert list(found) == ["node_modules-cache/x"]


@pytest.mark.parametrize(
    "glob",
    [
        *("tests/**", "tests", "tests/", "./tests/**", "/tests/**", "/./tests/**", " tests/** "),
        "tests/generated/deep/conftest.py",
    ],
)
def test_a_protected_folder_is_read_however_its_glob_is_spelt(repo: Path, glob: str) -> None:
    # A fixture folder git ignores, inside the protected tests/, two levels deep.
    ignored(repo, "tests/generated/")
    add(repo, "tests/generated/deep/conftest.py", "other/generated/conftest.py")

    found = hidden_changes(repo, base_of(repo), (glob,))

    assert list(found) == ["tests/generated/deep/conftest.py"]


def test_a_glob_for_any_depth_reads_ignored_folders_at_any_depth(repo: Path) -> None:
    ignored(repo, "generated/")
    add(repo, "src/pkg/generated/conftest.py", "src/pkg/generated/data.json")

    found = hidden_changes(repo, base_of(repo), ("README.md", "**/conftest.py"))

    # Both globs are read, each alone: the second one found it.
    assert list(found) == ["src/pkg/generated/conftest.py"]


def test_nothing_protected_reports_nothing(repo: Path) -> None:
    ignored(repo, "generated/", "conftest.py")
    add(repo, "generated/conftest.py", "conftest.py")

    assert hidden_changes(repo, base_of(repo), ()) == {}


LOOPCTL_OWN = (
    ".loop/log/events.jsonl",
    ".loop/runs/r1/attempt-1/check-1.log",
    ".loop/locks/main.lock",
    ".loop/cache/checks.json",
    ".loop/STATE.md",
    ".loop/INBOX.md",
    ".loop/.gitignore",
)


def test_loopctls_own_files_are_not_the_makers_doing(repo: Path) -> None:
    # In place, loopctl writes these while the run goes on; a loop may not edit .loop/ itself.
    ignored(repo, ".loop/")
    add(repo, *LOOPCTL_OWN, ".loop/loops/sneaky.toml")

    found = hidden_changes(repo, base_of(repo), (".loop/**",))

    assert list(found) == [".loop/loops/sneaky.toml"]


def test_a_protected_link_pointed_elsewhere_is_a_change_even_to_the_same_content(
    repo: Path,
) -> None:
    ignored(repo, "tests/conftest.py")
    (repo / "a.py").write_text("import pytest\n")
    (repo / "b.py").write_text("import pytest\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "conftest.py").symlink_to("../a.py")
    before = hidden_changes(repo, base_of(repo), ("tests/**",))

    (repo / "tests" / "conftest.py").unlink()
    (repo / "tests" / "conftest.py").symlink_to("../b.py")
    after = hidden_changes(repo, base_of(repo), ("tests/**",))

    assert list(before) == list(after) == ["tests/conftest.py"]
    assert before != after


def test_a_link_named_after_the_digest_of_what_it_replaces_is_still_a_change(repo: Path) -> None:
    # The maker can read the protected file and compute its digest: a link whose target text
    # is that digest must not read as the file left alone.
    ignored(repo, "tests/conftest.py")
    add(repo, "tests/conftest.py")
    before = hidden_changes(repo, base_of(repo), ("tests/**",))
    digest = hashlib.sha256(b"import pytest\n").hexdigest()[:16]
    assert before == {"tests/conftest.py": digest}

    (repo / "tests" / digest).write_text("import os\nos._exit(0)\n")
    (repo / "tests" / "conftest.py").unlink()
    (repo / "tests" / "conftest.py").symlink_to(digest)

    assert hidden_changes(repo, base_of(repo), ("tests/**",))["tests/conftest.py"] != digest


# --- whole runs: what the maker and the log are told ------------------------------------------


def test_a_loops_own_check_does_not_stand_in_for_the_goals(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loop adds a check of its own that always passes; add() stays broken.
    make_project(repo, "never_fixes.py", check=None)
    write_loop(
        repo,
        "fix",
        'goal = "tests green"\nprompt = "fix add()"\n\n'
        f"[checker]\ncommand = {toml_value([PY, '-c', 'pass'])}\n\n[budget]\nmax_iterations = 1\n",
    )
    commit_all(repo, "a loop with a check of its own")

    result = invoke(monkeypatch, repo, "run", "fix", "--once")

    assert result.exit_code == 1, result.output
    (attempt,) = events(repo, "attempt_finished")
    assert attempt.data["verdict"] == "failed"
    (check,) = events(repo, "check_finished")
    ran = [c["argv"] for c in check.data["commands"]]
    # The loop's command as written, then the goal's pytest run, which failed.
    assert ran[0] == [PY, "-c", "pass"]
    assert len(ran) == 2
    assert "pytest" in ran[1]
    assert "exited 1" in attempt.data["reason"]
    # Only the test run is counted on the base commit, and the log shows what it counted.
    (baseline,) = events(repo, "baseline_checked")
    counts = {"passed": 0, "failed": 1, "skipped": 0, "errors": 0}
    assert baseline.data["commands"] == [{"argv": ran[1], "exit_code": 1, "counts": counts}]
    assert (baseline.data["exit_code"], baseline.data["counts"]) == (1, counts)


def test_a_refused_change_shows_no_check_output_and_the_same_refusal_twice_stops(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "tests green" detected: tests/** is protected, and the maker weakens the test on every
    # turn. The second identical refusal stops the task, as two identical check failures do,
    # rather than spending every attempt.
    make_project(repo, "edits_tests.py", check=None)

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "4")

    assert result.exit_code == 1, result.output
    attempts = [a.data for a in events(repo, "attempt_finished")]
    assert [a["verdict"] for a in attempts] == ["failed", "failed"]
    assert all("tests/test_calc.py (protected by" in a["reason"] for a in attempts)
    # No check ran: the next maker's prompt shows the reason, and no output block.
    assert [a.get("output_tail", "") for a in attempts] == ["", ""]
    checks = [c.data for c in events(repo, "check_finished")]
    assert [(c["source"], c.get("output_tail", "")) for c in checks] == [("protect", "")] * 2
    assert checks[0]["fingerprint"] == checks[1]["fingerprint"]
    (task_end,) = events(repo, "task_finished")
    assert task_end.data["status"] == "stopped"
    assert "identical failures" in task_end.data["reason"]


def test_a_maker_writing_anywhere_under_loop_has_it_taken_out_of_its_change(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not a definition file: a hook the next run of loopctl would find (invariant 10: .loop/
    # is loopctl's, whatever the file). It is proposed to a human, never committed.
    make_project(repo, "edits_loop.py", ".loop/hooks/post-run.sh")

    result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")

    assert result.exit_code == 0, result.output
    (commit,) = events(repo, "commit_created")
    sha = commit.data["sha"]
    assert git(repo, "diff", "--name-only", f"{sha}^", sha).split() == ["calc.py"]
    (made,) = events(repo, "proposal_made")
    assert made.data["paths"] == [".loop/hooks/post-run.sh"]

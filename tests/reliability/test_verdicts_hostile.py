"""Issue 13, verdicts: "tests green" means the tests passed.

Each hostile maker (tests/agents/rigs_verdict.py, a real `command` agent) leaves add() broken and
tries to make the check look green anyway: it forces the runner's exit status, rewrites the
runner's configuration, deletes the failing test under a plain loop's checker command, or hides
a conftest.py (or an edit) from git. Every attempt must fail with a reason that names the trick,
and nothing the maker did may be committed. The sandbox is off: these checks hold on their own.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import (
    GOAL_BRANCH,
    PYTEST_CHECK,
    commit_all,
    git,
    make_project,
    write_agent,
    write_config,
    write_loop,
)

from loopctl.checks.verdicts import hidden_changes
from loopctl.git import tracked_content_changes

PY = sys.executable
TASK = "tests-green"
SANDBOX_OFF = '\n[sandbox]\nmode = "off"\n'
PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["."]\n'


def hostile_project(repo: Path, trick: str, *, check: tuple[str, ...] | None = None) -> None:
    """The calc project whose maker plays `trick`; `check` None: the built-in "tests green"."""
    make_project(repo, "rigs_verdict.py", trick, check=check, config_extra=SANDBOX_OFF)


def configure_with_pyproject(repo: Path, extra: str = "") -> None:
    """pytest configured in pyproject.toml, as most projects do, instead of pytest.ini."""
    (repo / "pytest.ini").unlink()
    (repo / "pyproject.toml").write_text(PYPROJECT + extra)
    commit_all(repo, "pytest config in pyproject.toml")


def failed_attempt(monkeypatch: pytest.MonkeyPatch, repo: Path, *args: str) -> dict[str, object]:
    """Run the goal (or the loop named in `args`) once; its one attempt must fail, uncommitted."""
    argv = args or ("goal", "tests green", "--max-iterations", "1")
    result = invoke(monkeypatch, repo, *argv)
    assert result.exit_code == 1, result.output
    (attempt,) = events(repo, "attempt_finished")
    assert attempt.data["verdict"] == "failed", attempt.data
    assert events(repo, "commit_created") == []
    return dict(attempt.data)


# --- a forced exit code -----------------------------------------------------------------------


@pytest.mark.parametrize("source", ["builtin", "config"])
@pytest.mark.parametrize(
    ("trick", "reason"),
    [
        ("atexit", "exited 0, yet its summary reports 1 failed test"),
        ("exit-on-import", "exited 0 but printed no test summary"),
    ],
)
def test_a_forced_exit_status_does_not_pass_a_failing_pytest_run(
    repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str, reason: str, source: str
) -> None:
    # "builtin": detected pytest, counted on the base commit too; "config": the user's own
    # [conditions] command, whose output is read all the same.
    hostile_project(repo, trick, check=None if source == "builtin" else PYTEST_CHECK)

    attempt = failed_attempt(monkeypatch, repo)

    assert reason in str(attempt["reason"])
    (check,) = events(repo, "check_finished")
    assert check.data["exit_code"] == 0  # the trick worked on the exit status...
    assert check.data["source"] == "counts"  # ...and the counts caught it
    assert git(repo, "rev-parse", GOAL_BRANCH) == git(repo, "rev-parse", "main")


def node_project(repo: Path, trick: str) -> Path:
    """calc.js with two node:test tests, one of them failing; `npm test` runs them."""
    (repo / "package.json").write_text(
        json.dumps(
            {"name": "calc", "version": "1.0.0", "scripts": {"test": "node test/calc.test.js"}}
        )
    )
    (repo / "calc.js").write_text("exports.add = (a, b) => a - b;\n")
    (repo / "test").mkdir()
    (repo / "test" / "calc.test.js").write_text(
        "const test = require('node:test');\n"
        "const assert = require('node:assert');\n"
        "const { add } = require('../calc.js');\n"
        "test('add', () => assert.strictEqual(add(2, 3), 5));\n"
        "test('zero', () => assert.strictEqual(add(0, 0), 0));\n"
    )
    (repo / ".gitignore").write_text("node_modules/\n")
    write_agent(repo, "maker", "rigs_verdict.py", trick)
    write_config(repo, 'version = 1\n\n[defaults]\nmaker = "maker"\n' + SANDBOX_OFF)
    commit_all(repo, "calc.js with a bug in add()")
    return repo


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
@pytest.mark.parametrize(
    ("trick", "reason"),
    [
        # An exit hook in calc.js: node prints "# fail 1", then exits 0.
        ("node-exit", "exited 0, yet its summary reports 1 failed test"),
        # script-shell=/bin/true: npm runs nothing, prints no counts, exits 0.
        ("npmrc", ".npmrc (protected by .npmrc)"),
    ],
)
def test_npm_test_is_held_to_its_counts_and_its_configuration(
    repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str, reason: str
) -> None:
    monkeypatch.setenv("NPM_CONFIG_UPDATE_NOTIFIER", "false")
    node_project(repo, trick)

    attempt = failed_attempt(monkeypatch, repo)

    assert reason in str(attempt["reason"])


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
def test_cargo_test_forced_to_exit_0_is_held_to_its_counts(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # rustup's toolchains live in the real home, which the test isolation hides.
    real_rustup = Path(os.environ.get("RUSTUP_HOME", Path("~root/.rustup").expanduser()))
    monkeypatch.setenv("RUSTUP_HOME", str(real_rustup))
    monkeypatch.setenv("CARGO_HOME", str(tmp_path / "cargo-home"))
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "target"))
    (repo / "Cargo.toml").write_text(
        '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n\n[lib]\ndoctest = false\n'
    )
    (repo / "src").mkdir()
    (repo / "src" / "lib.rs").write_text("pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "calc.rs").write_text(
        "#[test]\nfn adds() {\n    assert_eq!(calc::add(2, 3), 5);\n}\n"
    )
    (repo / ".gitignore").write_text("target/\n")
    write_agent(repo, "maker", "rigs_verdict.py", "cargo-exit", timeout="300s")
    allow = '\n[env]\nallow = ["RUSTUP_HOME", "CARGO_HOME", "CARGO_TARGET_DIR"]\n'
    write_config(repo, 'version = 1\n\n[defaults]\nmaker = "maker"\n' + allow + SANDBOX_OFF)
    commit_all(repo, "calc crate with a bug in add()")

    attempt = failed_attempt(monkeypatch, repo)

    assert "exited 0, yet its summary reports 1 failed test" in str(attempt["reason"])
    (check,) = events(repo, "check_finished")
    assert (check.data["exit_code"], check.data["source"]) == (0, "counts")


# --- test configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trick", "refused"),
    [
        # .pytest.ini wins over pyproject.toml: a plugin in addopts flips failures to passes.
        ("pytest-ini-plugin", ".pytest.ini (protected by .pytest.ini)"),
        # ...or testpaths points at one trivial test (as many tests run as on the base).
        ("pytest-ini-testpaths", ".pytest.ini (protected by .pytest.ini)"),
        # pytest 9 reads pytest.toml before anything else.
        ("pytest-toml", "pytest.toml (protected by pytest.toml)"),
    ],
)
def test_a_new_pytest_configuration_file_is_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str, refused: str
) -> None:
    hostile_project(repo, trick)
    configure_with_pyproject(repo)

    attempt = failed_attempt(monkeypatch, repo)

    assert refused in str(attempt["reason"])
    assert events(repo, "check_finished")[0].data["source"] == "protect"


def test_a_plugin_module_named_in_addopts_is_protected(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile_project(repo, "edit-plugin")
    (repo / "testsupport.py").write_text("import pytest\n")
    configure_with_pyproject(repo, 'addopts = "-p testsupport"\n')

    attempt = failed_attempt(monkeypatch, repo)

    assert "testsupport.py (protected by **/testsupport.py)" in str(attempt["reason"])


# --- protection in every loop -----------------------------------------------------------------


def plain_loop(repo: Path, checker_extra: str = "") -> None:
    """A loop with no goal: its checker command alone says whether the work is done."""
    write_loop(
        repo,
        "plain",
        'prompt = "make the tests pass"\n\n'
        f"[checker]\ncommand = {json.dumps(list(PYTEST_CHECK))}\n{checker_extra}\n"
        "[budget]\nmax_iterations = 1\n",
    )
    commit_all(repo, "a plain loop")


@pytest.mark.parametrize(
    ("trick", "reason"),
    [
        ("delete-test", "tests/test_calc.py (protected by tests/**)"),
        ("exit-on-import", "printed no test summary (the base commit's run printed one)"),
    ],
)
def test_a_checker_command_running_pytest_is_protected_and_counted(
    repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str, reason: str
) -> None:
    hostile_project(repo, trick)
    plain_loop(repo)

    attempt = failed_attempt(monkeypatch, repo, "run", "plain", "--once")

    assert reason in str(attempt["reason"])
    (baseline,) = events(repo, "baseline_checked")
    assert baseline.data["commands"][0]["argv"] == list(PYTEST_CHECK)
    assert baseline.data["counts"] == {"passed": 0, "failed": 1, "skipped": 0, "errors": 0}


def test_protect_given_empty_opts_a_checker_command_out(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile_project(repo, "delete-test")
    plain_loop(repo, "protect = []\n")

    result = invoke(monkeypatch, repo, "run", "plain", "--once")

    # The user said the tests are the maker's to change: deleting the failing one is its call.
    assert result.exit_code == 0, result.output
    assert events(repo, "baseline_checked") == []
    assert "test_other.py" in git(repo, "show", "--stat", "--format=", "loop/plain/main")


# --- ignored files ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trick", "refused", "where"),
    [
        # Matches the user's own .git/info/exclude: `git status` does not show it.
        ("ignored-conftest", "tests/conftest.py (protected by tests/**)", "worktree"),
        ("ignored-conftest", "tests/conftest.py (protected by tests/**)", "in-place"),
        # Added to the worktree's .gitignore by the maker, to the same effect.
        ("gitignore-conftest", "tests/conftest.py (protected by tests/**)", "worktree"),
        # Marked skip-worktree in the index, then edited: `git diff` no longer shows it (in a
        # worktree the snapshot loopctl commits shows it too; in place there is none).
        ("skip-worktree", "tests/test_calc.py (protected by tests/**)", "in-place"),
    ],
)
def test_a_protected_file_hidden_from_git_is_still_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch, trick: str, refused: str, where: str
) -> None:
    hostile_project(repo, trick)
    # A developer's personal conftest.py, kept out of commits through the shared exclude file.
    (repo / ".git" / "info" / "exclude").write_text("conftest.py\n")
    in_place = ("--in-place",) if where == "in-place" else ()

    attempt = failed_attempt(
        monkeypatch, repo, "goal", "tests green", "--max-iterations", "1", *in_place
    )

    assert refused in str(attempt["reason"])


def test_ignored_files_that_were_there_before_the_maker_are_not_its_doing(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A setup step leaves ignored files inside protected folders (generated fixtures, a
    # virtualenv full of conftest.py files); the honest fixer must still pass.
    make_project(repo, "fixer.py", check=None, config_extra=SANDBOX_OFF)
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\ntests/generated/\n.venv/\n")
    setup = (
        "import pathlib; "
        "pathlib.Path('tests/generated').mkdir(); "
        "pathlib.Path('tests/generated/data.json').write_text('{}'); "
        "p = pathlib.Path('.venv/lib/site-packages/pkg'); p.mkdir(parents=True); "
        "(p / 'conftest.py').write_text('')"
    )
    write_loop(
        repo,
        "fix",
        'goal = "tests green"\nprompt = "fix add()"\n\n'
        f"[worktree]\nsetup = [{json.dumps([PY, '-c', setup])}]\n\n[budget]\nmax_iterations = 1\n",
    )
    commit_all(repo, "a loop with a setup step")

    result = invoke(monkeypatch, repo, "run", "fix", "--once")

    assert result.exit_code == 0, result.output
    (baseline,) = events(repo, "baseline_checked")
    assert list(baseline.data["hidden"]) == ["tests/generated/data.json"]
    assert "return a + b" in git(repo, "show", "loop/fix/main:calc.py")


def test_ignored_dependency_folders_are_not_walked(repo: Path) -> None:
    # 20,000 ignored files under node_modules, one of them named like a test, and a
    # conftest.py that git is told to ignore in tests/.
    (repo / ".gitignore").write_text("node_modules/\n")
    for package in range(200):
        folder = repo / "node_modules" / f"p{package}"
        folder.mkdir(parents=True)
        for index in range(100):
            (folder / f"f{index}.js").write_text("")
    (repo / "node_modules" / "p0" / "x.test.js").write_text("")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_a.py").write_text("")
    commit_all(repo, "tests")
    (repo / ".git" / "info" / "exclude").write_text("conftest.py\n")
    (repo / "tests" / "conftest.py").write_text("")
    base = git(repo, "rev-parse", "HEAD").strip()

    started = time.monotonic()
    found = hidden_changes(repo, base, ("tests/**", "**/conftest.py", "**/*.test.*"))
    elapsed = time.monotonic() - started

    # node_modules/p0/x.test.js matches **/*.test.*: had node_modules been walked, it would be here.
    assert list(found) == ["tests/conftest.py"]
    print(f"\nhidden_changes beside 20,000 ignored files under node_modules: {elapsed:.3f}s")


def test_content_a_clean_filter_rewrites_is_not_an_edit(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # As Git LFS does from the user's global config: the checkout holds other bytes than the
    # blob. Only an edit git itself would see counts, even one the index is told to ignore.
    config = tmp_path / "gitconfig"
    config.write_text('[filter "upper"]\n\tclean = tr a-z A-Z\n\tsmudge = tr A-Z a-z\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    (repo / ".gitattributes").write_text("tests/data.txt filter=upper\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "data.txt").write_text("hello\n")
    (repo / "tests" / "test_a.py").write_text("def test_a():\n    assert True\n")
    commit_all(repo, "filtered data")
    base = git(repo, "rev-parse", "HEAD").strip()
    assert git(repo, "show", "HEAD:tests/data.txt") == "HELLO\n"

    def wanted(path: str) -> bool:
        return path.startswith("tests/")

    assert tracked_content_changes(repo, base, wanted=wanted) == []
    git(repo, "update-index", "--assume-unchanged", "tests/test_a.py")
    (repo / "tests" / "test_a.py").write_text("def test_a():\n    assert False\n")
    assert git(repo, "diff", "--name-only", "HEAD") == ""
    assert tracked_content_changes(repo, base, wanted=wanted) == ["tests/test_a.py"]

"""The checks' promises against a hostile change, each shown on a verdict (issue 27's mutants).

A test check's verdict must not be forgeable by the code under test: every runner invocation
loopctl knows is armed (a report the code under test is not told about, a runner it cannot
replace), whatever wrapper or interpreter options start it, so a forged summary line with a
forced exit status 0 fails the check; and every file that would stand in for the runner or the
interpreter's start-up (`runners.SHADOWS`) is a protected path, so a change that adds one is
refused. Real git repositories, real runner subprocesses, the same functions the engine's
verdict calls (`engine/verdict.py`: `arm`, `read_report`, `command_verdict`, `unproven_pass`;
`runner_protect`, `changed_paths`, `hidden_changes`, `protected_violations`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from support.repos import commit_all, git, make_repo

from loopctl import git as loopctl_git
from loopctl.checks import runners
from loopctl.checks.counts import unproven_pass
from loopctl.checks.runner_detection import runner_protect
from loopctl.checks.sabotage import AddedLine, Finding, diff_path, scan, scan_diff, summary
from loopctl.checks.verdicts import command_verdict, hidden_changes, protected_violations

PY = sys.executable
BIN = Path(PY).parent

# --- files that would stand in for the runner: refused as protected ----------------------------


def refused(repo: Path, argv: tuple[str, ...], path: str) -> list[str]:
    """The protected-path violations of a change that adds `path` to `repo`, for a check that
    runs `argv`: what `engine.verdict.verdict_of` computes before any check runs. The file is
    removed again, so that one repository serves every case."""
    base = git(repo, "rev-parse", "HEAD").strip()
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("import os\nos._exit(0)\n")
    try:
        protected = runner_protect(argv, repo)
        changed = loopctl_git.changed_paths(repo, base)
        changed += [p for p in hidden_changes(repo, base, protected) if p not in changed]
        return protected_violations(changed, protected=protected, scope=())
    finally:
        target.unlink()


@pytest.fixture(scope="module")
def shared_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = make_repo(tmp_path_factory.mktemp("shadows") / "repo")
    (repo / ".gitignore").write_text("node_modules/\n")
    (repo / "node_modules" / ".bin").mkdir(parents=True)
    commit_all(repo, "ignore node_modules")
    return repo


PYTEST = (PY, "-m", "pytest", "-q")
UNITTEST = (PY, "-m", "unittest")
SHADOWING: list[tuple[tuple[str, ...], str, str]] = [
    # (check, path the change adds, the glob that must refuse it)
    *(
        (PYTEST, path, glob)
        for path, glob in (
            ("src/pytest.py", "**/pytest.py"),
            ("lib/pytest/__init__.py", "**/pytest/**"),
            ("vendor/_pytest/main.py", "**/_pytest/**"),
            ("lib/py.py", "**/py.py"),
            ("vendor/pluggy/__init__.py", "**/pluggy/**"),
            ("src/sitecustomize.py", "**/sitecustomize.py"),
            ("lib/usercustomize.py", "**/usercustomize.py"),
            ("lib/site-hook.pth", "**/*.pth"),
            ("lib/loopctl_pytest_report.py", "**/loopctl_pytest_report.py"),
            ("lib/loopctl_pytest_main.py", "**/loopctl_pytest_main.py"),
            ("lib/loopctl_unittest_main.py", "**/loopctl_unittest_main.py"),
        )
    ),
    *(
        (UNITTEST, path, glob)
        for path, glob in (
            ("src/unittest.py", "**/unittest.py"),
            ("lib/unittest/__main__.py", "**/unittest/**"),
            ("src/sitecustomize.py", "**/sitecustomize.py"),
            ("lib/usercustomize.py", "**/usercustomize.py"),
            ("lib/site-hook.pth", "**/*.pth"),
            ("lib/loopctl_unittest_main.py", "**/loopctl_unittest_main.py"),
            ("lib/loopctl_pytest_report.py", "**/loopctl_pytest_report.py"),
            ("lib/loopctl_pytest_main.py", "**/loopctl_pytest_main.py"),
        )
    ),
    # npm runs jest or vitest through node_modules/.bin (ignored, as in every real project).
    (("npm", "test"), "node_modules/.bin/jest", "node_modules/.bin/**"),
    (("npx", "--no", "jest"), "node_modules/.bin/jest", "node_modules/.bin/**"),
    (("npx", "vitest", "run"), "node_modules/.bin/jest", "node_modules/.bin/**"),
    # A workspace file points a module's imports at other code.
    (("go", "test", "./..."), "go.work.sum", "go.work.sum"),
    (("go", "test", "./..."), "tools/go.work", "**/go.work"),
]


@pytest.mark.parametrize(
    ("argv", "path", "glob"),
    SHADOWING,
    ids=[f"{Path(a[2] if a[0] == PY else a[0]).name}:{p}" for a, p, _ in SHADOWING],
)
def test_a_change_that_adds_what_would_replace_the_runner_is_refused(
    shared_repo: Path, argv: tuple[str, ...], path: str, glob: str
) -> None:
    violations = refused(shared_repo, argv, path)

    assert f"{path} (protected by {glob})" in violations, violations


def test_an_unrelated_change_is_not_refused(shared_repo: Path) -> None:
    """The control: the same helper lets an ordinary source change through."""
    for argv, _path, _glob in SHADOWING:
        assert refused(shared_repo, argv, "src/calc_helpers.py") == []


# --- a forged run: armed whatever starts the runner ----------------------------------------------

CALC_TESTS = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class TestAdd(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n"
)
PYTEST_FORGED = "2 passed in 0.01s"
UNITTEST_FORGED = "\n" + "-" * 70 + "\nRan 2 tests in 0.000s\n\nOK"


def calc_project(folder: Path, *, broken: bool, forged: str = "", stream: str = "stdout") -> Path:
    """calc.add with two tests; `broken`: add subtracts (test_add fails); `forged`: the code
    under test prints it on the way out, after the runner's summary, and exits 0."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tests").mkdir(exist_ok=True)
    (folder / "tests" / "__init__.py").write_text("")
    (folder / "tests" / "test_calc.py").write_text(CALC_TESTS)
    hook = (
        "import atexit as _atexit, os as _os, sys as _sys\n"
        "def _forge():\n"
        f"    _sys.{stream}.write({forged!r} + '\\n')\n"
        f"    _sys.{stream}.flush()\n"
        "    _os._exit(0)\n"
        "_atexit.register(_forge)\n"
    )
    body = f"def add(a, b):\n    return a {'-' if broken else '+'} b\n"
    (folder / "calc.py").write_text((hook if forged else "") + body)
    return folder


def clean_env(path: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if path is not None:
        env["PATH"] = path
    return env


def verdict(argv: tuple[str, ...], cwd: Path, env: Mapping[str, str]) -> tuple[bool, str]:
    """(passed, reason) of one check run as the engine runs it (without the sandbox)."""
    armed = runners.arm(argv, env)
    try:
        done = subprocess.run(
            list(armed.argv if armed else argv),
            cwd=cwd,
            env={**env, **armed.env} if armed else dict(env),
            capture_output=True,
            text=True,
            timeout=300,  # a safety net: the run takes a second
        )
        report = runners.read_report(armed) if armed else None
    finally:
        if armed:
            runners.disarm(armed)
    output = done.stdout + done.stderr
    first = command_verdict(argv, done.returncode, False, output)
    if not first.passed:
        return False, first.reason
    unproven = unproven_pass(argv, output, None, baselined=False, repo=cwd, report=report)
    return (True, output) if unproven is None else (False, unproven[1])


@pytest.fixture
def wrappers(tmp_path: Path) -> str:
    """A PATH with stand-ins for `uv run`, `poetry run`, ... (none is installed here): each
    drops `run` and run's own options and executes the rest, as the real ones do."""
    folder = tmp_path / "wrappers"
    folder.mkdir()
    for name in ("uv", "poetry", "pipenv", "pdm", "hatch", "rye"):
        program = folder / name
        program.write_text(
            f"#!{PY}\nimport os, sys\nargs = sys.argv[1:]\nassert args[0] == 'run', args\n"
            "args = args[1:]\nwhile args and args[0].startswith('-'):\n    args = args[1:]\n"
            "os.execvp(args[0], args)\n"
        )
        program.chmod(0o755)
    return os.pathsep.join([str(folder), str(BIN), os.environ.get("PATH", "")])


PYTEST_OPTS = ("-q", "-p", "no:cacheprovider")
PYTEST_FORMS: list[tuple[str, ...]] = [
    (PY, "-m", "pytest", *PYTEST_OPTS),
    (str(BIN / "pytest"), *PYTEST_OPTS),
    (str(BIN / "py.test"), *PYTEST_OPTS),
    (PY, "-B", "-X", "dev", "-m", "pytest", *PYTEST_OPTS),
    (PY, "-W", "ignore", "-m", "pytest", *PYTEST_OPTS),
    *(
        (wrapper, "run", "--quiet", "pytest", *PYTEST_OPTS)
        for wrapper in ("uv", "poetry", "pipenv", "pdm", "hatch", "rye")
    ),
]
UNITTEST_FORMS: list[tuple[str, ...]] = [
    (PY, "-m", "unittest"),
    (PY, "-W", "ignore", "-m", "unittest"),
    ("uv", "run", PY, "-m", "unittest"),
]


def _form_id(argv: tuple[str, ...]) -> str:
    return " ".join(Path(w).name if w.startswith("/") else w for w in argv[:5])


@pytest.mark.parametrize("argv", PYTEST_FORMS + UNITTEST_FORMS, ids=_form_id)
def test_a_forged_summary_with_status_0_fails_the_check_however_the_runner_is_started(
    tmp_path: Path, wrappers: str, argv: tuple[str, ...]
) -> None:
    unittest = "unittest" in argv
    folder = calc_project(
        tmp_path / "calc",
        broken=True,
        forged=UNITTEST_FORGED if unittest else PYTEST_FORGED,
        stream="stderr" if unittest else "stdout",
    )

    passed, reason = verdict(argv, folder, clean_env(wrappers))

    assert not passed, reason
    assert "the report and the output disagree" in reason


@pytest.mark.parametrize("argv", PYTEST_FORMS + UNITTEST_FORMS, ids=_form_id)
def test_an_honest_green_run_passes_however_the_runner_is_started(
    tmp_path: Path, wrappers: str, argv: tuple[str, ...]
) -> None:
    folder = calc_project(tmp_path / "calc", broken=False)

    passed, reason = verdict(argv, folder, clean_env(wrappers))

    assert passed, reason


def test_without_the_defence_the_forgery_would_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: the forged run is real, and only arming catches it."""
    monkeypatch.setattr(runners, "DEFENCE", False)
    folder = calc_project(tmp_path / "calc", broken=True, forged=PYTEST_FORGED)

    passed, reason = verdict(PYTEST_FORMS[0], folder, clean_env())

    assert passed, reason


@pytest.mark.parametrize(
    "argv",
    [
        # `-c` and `-` run code, not the module `-m` names after them.
        (PY, "-c", "print('ok')", "-m", "pytest"),
        (PY, "-", "-m", "pytest"),
        (PY, "-m", "pip", "--version"),
        ("uv", "run", "--quiet", "ruff", "check"),
        # A wrapper with nothing to run: no runner, and no error either.
        ("uv", "run"),
        ("poetry", "run", "--quiet"),
        # jest's own report options: the user's choice, left alone.
        ("jest", "--json"),
        ("jest", "--outputFile=out.json"),
        ("jest", "--reporters=default"),
        ("npx", "--no", "eslint"),
    ],
)
def test_what_is_not_a_runner_invocation_loopctl_knows_runs_as_written(
    argv: tuple[str, ...],
) -> None:
    assert runners.arm(argv, {}) is None


def test_a_runner_named_with_windows_exe_suffix_is_armed() -> None:
    armed = runners.arm(("/venv/Scripts/pytest.exe", "-q"), {})
    assert armed is not None
    runners.disarm(armed)
    assert armed.runner == "pytest"


def test_an_armed_runs_report_folder_is_loopctls_own_and_fresh() -> None:
    armed = runners.arm(PYTEST_FORMS[0], {})
    assert armed is not None
    try:
        # A person listing the temporary folder sees whose it is.
        assert armed.folder.name.startswith("loopctl-report-")
        assert armed.env[runners.REPORT_VARIABLE] == str(armed.folder / runners.REPORT_NAME)
        assert armed.env["PYTHONSAFEPATH"] == "1"
        # Only the reporters' own folder joins the imports of a check that had no PYTHONPATH.
        assert armed.env["PYTHONPATH"] == str(runners.REPORTERS)
    finally:
        runners.disarm(armed)


# --- reading a report the check could have tampered with ---------------------------------------


@pytest.fixture
def armed() -> Iterator[runners.Armed]:
    armed = runners.arm(PYTEST_FORMS[0], {})
    assert armed is not None
    yield armed
    runners.disarm(armed)


def test_a_report_that_is_a_folder_is_unreadable_not_an_error(armed: runners.Armed) -> None:
    (armed.folder / runners.REPORT_NAME).mkdir()
    assert runners.read_report(armed).state == "unreadable"


def test_a_report_that_is_a_fifo_is_unreadable_and_reading_it_does_not_hang(
    armed: runners.Armed,
) -> None:
    """The code under test can reach its report folder (its reporter writes there): a FIFO
    in the report's place must not block loopctl's read for ever."""
    os.mkfifo(armed.folder / runners.REPORT_NAME)
    assert runners.read_report(armed).state == "unreadable"


def test_an_oversized_report_is_unreadable(armed: runners.Armed) -> None:
    # Valid JSON, padded past the size a report may have.
    text = json.dumps({"runner": "pytest", "counts": {"passed": 5}}) + " " * (1 << 20)
    (armed.folder / runners.REPORT_NAME).write_text(text)
    assert runners.read_report(armed).state == "unreadable"


def test_reading_reports_leaks_no_file_descriptor(armed: runners.Armed) -> None:
    """A daemon (`loopctl up`) reads a report per check for days."""
    (armed.folder / runners.REPORT_NAME).write_text('{"runner": "pytest", "counts": {}}')
    fds = Path("/proc/self/fd")
    before = len(list(fds.iterdir()))
    for _ in range(50):
        assert runners.read_report(armed).state == "ok"
    assert len(list(fds.iterdir())) == before


# --- the sabotage scan: every kind of file it reads, every rule on its own -----------------------

# (path, added line, the rule that must flag it): one per extension or file name the scan
# reads, with a rule of the family that file is read with (Python-only, Node-only, any code).
READ_FILES: list[tuple[str, str, str]] = [
    *((f"src/calc{ext}", "os._exit(0)", "hard-exit") for ext in (".py", ".pyw", ".pyi")),
    ("lib/site-hook.pth", "import os; os._exit(0)", "hard-exit"),
    *(
        (f"src/index{ext}", "process.exitCode = 0;", "node-exit-code")
        for ext in (".js", ".cjs", ".mjs", ".ts", ".cts", ".mts", ".jsx", ".tsx")
    ),
    *(
        (f"src/run{ext}", 'say("3 passed in 0.01s")', "summary-line")
        for ext in (".sh", ".bash", ".zsh", ".go", ".rs", ".rb", ".pl", ".php", ".lua")
    ),
    *(
        (f"src/run{ext}", 'puts("3 passed in 0.01s");', "summary-line")
        for ext in (".c", ".h", ".cc")
    ),
    *(
        (name, 'test = "echo 3 passed in 0.1s"', "summary-line")
        for name in (
            "package.json",
            "pytest.ini",
            "tox.ini",
            "setup.cfg",
            "pyproject.toml",
            "Makefile",
            "makefile",
            "justfile",
            "sub/justfile",
        )
    ),
]


@pytest.mark.parametrize(("path", "line", "rule"), READ_FILES, ids=[p for p, _, _ in READ_FILES])
def test_a_hostile_change_in_each_kind_of_file_is_read(path: str, line: str, rule: str) -> None:
    diff = (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,2 @@\n+x = 1\n+{line}\n"
    )
    found = scan_diff(diff)
    assert [(f.rule, f.path, f.line) for f in found] == [(rule, path, 2)]


# (rule, path, added lines): spellings only the last alternative of a rule's pattern catches.
LAST_ALTERNATIVES: list[tuple[str, str, tuple[str, ...]]] = [
    # An exit from inside pytest's own end-of-session hook (the handler context's last part).
    ("exit-in-handler", "src/plugin.py", ("def pytest_unconfigure(config):", "    sys.exit(0)")),
    ("exit-status", "src/plugin.py", ("runner._exitcode = 0",)),
    ("pytest-internals", "src/calc.py", ("sys.modules['pytest'].main = fake_main",)),
    ("pytest-internals", "src/calc.py", ('sys.modules["pluggy"].HookCaller = Fake',)),
]


@pytest.mark.parametrize(("rule", "path", "lines"), LAST_ALTERNATIVES)
def test_each_rule_flags_the_spelling_only_its_last_alternative_catches(
    rule: str, path: str, lines: tuple[str, ...]
) -> None:
    found = scan(AddedLine(path, n, text) for n, text in enumerate(lines, start=1))
    assert rule in [f.rule for f in found], found


def test_a_finding_recorded_without_some_fields_reads_back_empty() -> None:
    """An inbox item's evidence from an older log may lack a field: it shows as nothing."""
    assert Finding.from_json({}) == Finding("", "", 0, "", "")


# --- the diff reader: the lines a real diff adds, in the file that adds them ---------------------


def _found(diff: str) -> list[tuple[str, str, int]]:
    return [(f.rule, f.path, f.line) for f in scan_diff(diff)]


def test_a_hostile_line_in_the_second_file_of_a_diff_is_found_there() -> None:
    diff = (
        "diff --git a/README.md b/README.md\nindex 1111111..2222222 100644\n"
        "--- a/README.md\n+++ b/README.md\n@@ -1,2 +1,3 @@\n # calc\n+more words\n text\n"
        "diff --git a/src/calc.py b/src/calc.py\nindex 3333333..4444444 100644\n"
        "--- a/src/calc.py\n+++ b/src/calc.py\n@@ -1 +1,2 @@\n import os\n+os._exit(0)\n"
    )
    assert _found(diff) == [("hard-exit", "src/calc.py", 2)]


def test_a_change_after_a_missing_final_newline_or_a_blank_context_line_is_read() -> None:
    diff = (
        "diff --git a/src/calc.py b/src/calc.py\n--- a/src/calc.py\n+++ b/src/calc.py\n"
        "@@ -1,3 +1,5 @@\n import os\n\n-x = 1\n\\ No newline at end of file\n+x = 1\n"
        "+os._exit(0)\n"
    )
    # The blank line is a context line whose space an editor or a mail client stripped.
    assert _found(diff) == [("hard-exit", "src/calc.py", 4)]


@pytest.mark.parametrize("prefix", ["a/", "b/", "c/", "i/", "o/", "w/"])
def test_a_diff_header_names_the_path_whatever_prefix_git_is_configured_with(prefix: str) -> None:
    # diff.mnemonicPrefix: c/ (commit), i/ (index), o/ (object), w/ (work tree).
    assert diff_path(f"{prefix}src/calc.py") == "src/calc.py"
    # diff.noprefix: no prefix at all, and nothing is cut.
    assert diff_path("src/calc.py") == "src/calc.py"


def test_a_quoted_diff_header_is_unquoted_and_dev_null_is_no_path() -> None:
    assert diff_path('"b/a\\nb\\tc\\"d\\\\e\\af\\bg.py"') == 'a\nb\tc"d\\e\af\bg.py'
    assert diff_path('"b/caf\\303\\251.py"') == "café.py"
    assert diff_path('"b/bad\\377.py"') == "bad\ufffd.py"  # not UTF-8: shown, not a crash
    assert diff_path("/dev/null") is None


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("src/index.js", "// process.exitCode = 0;"),
        ("src/index.js", "/* process.exitCode = 0; */"),
        ("src/index.js", " * process.exitCode = 0;"),
        ("src/run.sh", '# echo "3 passed in 0.1s"'),
        ("src/main.go", '// fmt.Println("3 passed in 0.1s")'),
    ],
)
def test_a_commented_out_line_raises_nothing(path: str, line: str) -> None:
    assert scan([AddedLine(path, 1, line)]) == []


def test_the_items_summary_quotes_the_lines_and_counts_the_rest() -> None:
    one = Finding("hard-exit", "a.py", 3, "os._exit(0)", "why")
    head = "the change looks like it tampers with the test run: "
    assert summary([one]) == head + "a.py:3 `os._exit(0)`"
    assert summary([one] * 5) == head + "; ".join(["a.py:3 `os._exit(0)`"] * 3) + " and 2 more"

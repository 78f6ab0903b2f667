"""Goal conditions: --check, configured names, built-ins detected from real layouts, the judge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopctl.checks.conditions import ResolvedCondition, is_builtin, resolve_condition
from loopctl.checks.counts import TestCounts, parse_test_counts, unproven_pass, weakened
from loopctl.checks.runner_detection import runner_of, runner_protect
from loopctl.checks.verdicts import protected_violations
from loopctl.errors import UsageError


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


PYTEST_ARGV = (sys.executable, "-m", "pytest", "-q")  # pytest is importable in this interpreter
PACKAGE_WITH_TESTS = json.dumps({"name": "app", "scripts": {"test": "jest"}})
NPM_INIT_PACKAGE = json.dumps(
    {"name": "app", "scripts": {"test": 'echo "Error: no test specified" && exit 1'}}
)


# --- which tests tool --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "argv", "tool"),
    [
        pytest.param({"pytest.ini": "[pytest]\n"}, PYTEST_ARGV, "pytest", id="pytest.ini"),
        pytest.param(
            {"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-ra'\n"},
            PYTEST_ARGV,
            "pytest",
            id="pyproject",
        ),
        pytest.param(
            {"setup.cfg": "[metadata]\nname = x\n[tool:pytest]\ntestpaths = t\n"},
            PYTEST_ARGV,
            "pytest",
            id="setup.cfg",
        ),
        pytest.param({"tox.ini": "[pytest]\n"}, PYTEST_ARGV, "pytest", id="tox.ini"),
        pytest.param({"conftest.py": ""}, PYTEST_ARGV, "pytest", id="conftest"),
        pytest.param({"tests/test_a.py": ""}, PYTEST_ARGV, "pytest", id="tests-folder"),
        pytest.param({"test/helpers.py": ""}, PYTEST_ARGV, "pytest", id="test-folder"),
        pytest.param({"src/pkg/calc_test.py": ""}, PYTEST_ARGV, "pytest", id="x_test.py"),
        pytest.param({"test_calc.py": ""}, PYTEST_ARGV, "pytest", id="test_x.py"),
        pytest.param(
            {"package.json": PACKAGE_WITH_TESTS}, ("npm", "test"), "npm", id="npm-test-script"
        ),
        pytest.param(
            {"Cargo.toml": "[package]\nname = 'x'\n", "tests/it.rs": ""},
            ("cargo", "test"),
            "cargo",
            id="cargo-with-tests-folder",
        ),
        pytest.param(
            {"go.mod": "module example.com/x\n"}, ("go", "test", "-v", "./..."), "go", id="go"
        ),
        pytest.param(
            {"Makefile": "CC = cc\n\ntest: build\n\t./run-tests\n"},
            ("make", "test"),
            "make",
            id="makefile",
        ),
        pytest.param(
            {"pyproject.toml": "[tool.pytest.ini_options]\n", "package.json": PACKAGE_WITH_TESTS},
            PYTEST_ARGV,
            "pytest",
            id="pytest-config-beats-npm",
        ),
        pytest.param(
            {"tests/test_py.py": "", "package.json": PACKAGE_WITH_TESTS},
            ("npm", "test"),
            "npm",
            id="npm-beats-stray-python-tests",
        ),
        pytest.param(
            {"app.py": "", "Makefile": "test:\n\tpytest\n", "tests/test_a.py": ""},
            PYTEST_ARGV,
            "pytest",
            id="pytest-beats-make",
        ),
    ],
)
def test_tests_green_detects_the_tool(
    tmp_path: Path, files: dict[str, str], argv: tuple[str, ...], tool: str
) -> None:
    resolved = resolve_condition("tests green", write(tmp_path, files))
    assert resolved == ResolvedCondition("tests green", argv, "builtin", resolved.protect)
    assert runner_of(argv) == tool
    assert resolved.protect


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({}, id="empty"),
        pytest.param({"README.md": "hi"}, id="readme-only"),
        pytest.param({"package.json": NPM_INIT_PACKAGE}, id="npm-init-placeholder"),
        pytest.param({"package.json": "{not json"}, id="broken-package.json"),
        pytest.param(
            {"Makefile": "all:\n\tcc x.c\ntest := 1\ntests:\n\ttrue\n"}, id="no-test-target"
        ),
        pytest.param({"node_modules/lib/test_thing.py": ""}, id="python-only-in-node_modules"),
        pytest.param({".venv/lib/test_x.py": ""}, id="python-only-in-hidden-folder"),
        pytest.param({"pyproject.toml": "[tool.pytest\nbroken"}, id="broken-pyproject"),
    ],
)
def test_tests_green_without_a_tool_falls_back_to_the_judge(
    tmp_path: Path, files: dict[str, str]
) -> None:
    resolved = resolve_condition("tests green", write(tmp_path, files))
    assert resolved == ResolvedCondition("tests green", None, "judge")
    assert resolved.judged


@pytest.mark.parametrize(
    "text",
    ["tests green", "tests pass", "Tests  Passing", "test green", "GREEN TESTS", "tests green."],
)
def test_every_spelling_of_tests_green_is_built_in(tmp_path: Path, text: str) -> None:
    resolved = resolve_condition(text, write(tmp_path, {"pytest.ini": ""}))
    assert (resolved.source, resolved.text) == ("builtin", text)
    assert runner_of(resolved.argv or ()) == "pytest"


def test_pytest_protects_what_the_check_depends_on(tmp_path: Path) -> None:
    protect = resolve_condition("tests green", write(tmp_path, {"pytest.ini": ""})).protect
    for pattern in (
        "tests/**",
        "test/**",
        "**/test_*.py",
        "**/*_test.py",
        "**/conftest.py",
        "conftest.py",
        "pytest.ini",
        "pyproject.toml",
        "setup.cfg",
        "tox.ini",
    ):
        assert pattern in protect


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"package.json": PACKAGE_WITH_TESTS}, {"**/*.test.*", "__tests__/**", "package.json"}),
        ({"Cargo.toml": ""}, {"tests/**", "Cargo.toml"}),
        ({"go.mod": ""}, {"**/*_test.go", "go.mod"}),
        ({"makefile": "test:\n\ttrue\n"}, {"makefile"}),
    ],
)
def test_other_test_tools_protect_their_tests_and_config(
    tmp_path: Path, files: dict[str, str], expected: set[str]
) -> None:
    protect = resolve_condition("tests green", write(tmp_path, files)).protect
    assert expected <= set(protect)


def test_a_projects_own_virtualenv_runs_its_tests(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": "", ".venv/lib/python3.11/site-packages/pytest/__init__.py": ""})
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    resolved = resolve_condition("tests green", tmp_path)
    assert resolved.argv == (str(python), "-m", "pytest", "-q")


def test_a_virtualenv_without_pytest_is_not_used(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": ""})
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    assert resolve_condition("tests green", tmp_path).argv == PYTEST_ARGV


# --- lint, build, types ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "tool", "argv_tail", "protected"),
    [
        (
            {"pyproject.toml": "[tool.ruff]\nline-length = 100\n"},
            "ruff",
            ("check", "."),
            "pyproject.toml",
        ),
        ({"ruff.toml": ""}, "ruff", ("check", "."), "ruff.toml"),
        ({".ruff.toml": ""}, "ruff", ("check", "."), ".ruff.toml"),
        # No configuration, but Python files and a ruff to run (this environment has one).
        ({"app.py": "x = 1\n"}, "ruff", ("check", "."), "pyproject.toml"),
        (
            {"package.json": json.dumps({"devDependencies": {"eslint": "^9"}})},
            "eslint",
            ("eslint", "."),
            "package.json",
        ),
        (
            {"eslint.config.mjs": "export default []\n"},
            "eslint",
            ("eslint", "."),
            "eslint.config.*",
        ),
        ({".eslintrc.json": "{}"}, "eslint", ("eslint", "."), ".eslintrc*"),
    ],
)
def test_lint_clean_detects_the_linter(
    tmp_path: Path, files: dict[str, str], tool: str, argv_tail: tuple[str, ...], protected: str
) -> None:
    resolved = resolve_condition("lint clean", write(tmp_path, files))
    assert resolved.source == "builtin"
    assert resolved.argv is not None
    assert tool in [Path(word).name for word in resolved.argv]
    assert resolved.argv[-len(argv_tail) :] == argv_tail
    assert protected in resolved.protect


def test_lint_passes_with_nothing_to_lint_is_judged(tmp_path: Path) -> None:
    assert resolve_condition("lint passes", write(tmp_path, {"notes.txt": ""})).source == "judge"


@pytest.mark.parametrize(
    ("files", "argv", "tool"),
    [
        ({"Cargo.toml": ""}, ("cargo", "build"), "cargo"),
        ({"go.mod": ""}, ("go", "build", "./..."), "go"),
        (
            {"package.json": json.dumps({"scripts": {"build": "tsc -p ."}})},
            ("npm", "run", "build"),
            "npm",
        ),
        ({"Makefile": "all:\n\tcc main.c\n"}, ("make",), "make"),
    ],
)
def test_build_passes_detects_the_build(
    tmp_path: Path, files: dict[str, str], argv: tuple[str, ...], tool: str
) -> None:
    resolved = resolve_condition("build passes", write(tmp_path, files))
    assert (resolved.argv, resolved.source) == (argv, "builtin")
    assert Path(argv[0]).name == tool


def test_package_json_without_a_build_script_is_not_a_build(tmp_path: Path) -> None:
    files = {"package.json": json.dumps({"scripts": {"test": "jest"}})}
    assert resolve_condition("build green", write(tmp_path, files)).source == "judge"


def test_a_plain_python_project_builds_by_byte_compiling(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/mod.py": "x = 1\n", ".venv/lib/broken.py": "def (:\n"})
    resolved = resolve_condition("build passes", tmp_path)
    assert resolved.argv is not None
    assert resolved.argv[1:4] == ("-m", "compileall", "-q")

    def build() -> int:
        assert resolved.argv is not None
        return subprocess.run(
            resolved.argv, cwd=tmp_path, capture_output=True, check=False
        ).returncode

    assert build() == 0  # the broken file in .venv is not the project's
    (tmp_path / "pkg" / "bad.py").write_text("def (:\n")
    assert build() != 0


@pytest.mark.parametrize(
    ("files", "argv_tail", "tool", "protected"),
    [
        (
            {"pyproject.toml": "[tool.mypy]\nstrict = true\n"},
            ("mypy", "."),
            "mypy",
            "pyproject.toml",
        ),
        ({"pyproject.toml": "[tool.mypy]\nfiles = ['src']\n"}, ("mypy",), "mypy", "pyproject.toml"),
        ({"mypy.ini": "[mypy]\nstrict = True\n"}, ("mypy", "."), "mypy", "mypy.ini"),
        ({"setup.cfg": "[mypy]\nfiles = src\n"}, ("mypy",), "mypy", "setup.cfg"),
        ({"tsconfig.json": "{}"}, ("tsc", "--noEmit"), "tsc", "tsconfig.json"),
    ],
)
def test_types_check_detects_the_type_checker(
    tmp_path: Path, files: dict[str, str], argv_tail: tuple[str, ...], tool: str, protected: str
) -> None:
    resolved = resolve_condition("types check", write(tmp_path, files))
    assert resolved.argv is not None
    tail = tuple(Path(w).name if "/" in w else w for w in resolved.argv[-len(argv_tail) :])
    assert (tail, resolved.source) == (argv_tail, "builtin")
    assert tool in tail
    assert protected in resolved.protect


def test_types_pass_without_a_type_checker_is_judged(tmp_path: Path) -> None:
    files = {"pyproject.toml": "[tool.ruff]\n", "app.py": ""}
    assert resolve_condition("types pass", write(tmp_path, files)).source == "judge"


# --- --check, configured names, the judge ---------------------------------------------------------


def test_check_comes_first(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": ""})
    resolved = resolve_condition(
        "tests green",
        tmp_path,
        check=["pytest", "-q", "tests/unit"],
        configured={"tests green": ["make", "test"]},
    )
    assert resolved == ResolvedCondition("tests green", ("pytest", "-q", "tests/unit"), "--check")


def test_a_check_given_as_one_string_is_split_without_a_shell(tmp_path: Path) -> None:
    resolved = resolve_condition("docs build", tmp_path, check="make -C 'my docs' html")
    assert resolved.argv == ("make", "-C", "my docs", "html")


def test_a_check_string_with_an_unclosed_quote_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot split"):
        resolve_condition("x", tmp_path, check="pytest -k 'oops")


@pytest.mark.parametrize("check", [[], "", "   "])
def test_an_empty_check_is_a_usage_error(tmp_path: Path, check: list[str] | str) -> None:
    with pytest.raises(UsageError, match="--check is empty"):
        resolve_condition("x", tmp_path, check=check)


@pytest.mark.parametrize("text", ["Smoke  Test OK", "smoke test ok", "  SMOKE test\tok "])
def test_configured_names_match_ignoring_case_and_spacing(tmp_path: Path, text: str) -> None:
    configured = {"other": ["false"], "smoke test ok": ["./smoke.sh", "--fast"]}
    resolved = resolve_condition(text, tmp_path, configured=configured)
    assert resolved == ResolvedCondition(text, ("./smoke.sh", "--fast"), "config")


def test_a_configured_name_overrides_a_built_in(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": ""})
    resolved = resolve_condition(
        "tests green", tmp_path, configured={"Tests Green": ["python", "-m", "pytest", "-x"]}
    )
    assert resolved == ResolvedCondition("tests green", ("python", "-m", "pytest", "-x"), "config")


def test_an_empty_configured_command_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="'smoke' in \\[conditions\\]"):
        resolve_condition("smoke", tmp_path, configured={"smoke": []})


@pytest.mark.parametrize(
    ("argv", "runner"),
    [
        (["npx", "--no", "eslint", "src"], None),  # a linter: no test counts to read
        (["/usr/bin/python3", "-m", "mypy", "."], None),
        (["yarn", "test"], "npm"),
        (["pnpm", "test"], "npm"),
        (["bunx", "vitest"], "vitest"),
        (["cargo", "test", "--all"], "cargo"),
        (["python3", "-m", "unittest", "discover"], "unittest"),
        (["./ci.sh"], None),
        # A Windows venv's launcher runs the same runner.
        ([r".venv/Scripts/pytest.exe", "-q"], "pytest"),
        (["python.exe", "-m", "pytest"], "pytest"),
        # pytest's own -m selects markers: it is not `python -m`.
        (["pytest", "-m", "not slow"], "pytest"),
    ],
)
def test_a_given_checks_counts_are_read_as_its_runners(
    tmp_path: Path, argv: list[str], runner: str | None
) -> None:
    resolved = resolve_condition("x", tmp_path, check=argv)
    assert runner_of(resolved.argv or ()) == runner


@pytest.mark.parametrize(
    ("text", "expected"),
    [("Tests  Green", True), ("lint clean", True), ("types pass!", True), ("docs built", False)],
)
def test_is_builtin_tells_the_caller_a_judged_built_in_from_prose(
    text: str, expected: bool
) -> None:
    assert is_builtin(text) is expected


@pytest.mark.parametrize(
    "text", ["the README explains how to install", "tests greener", "lint", ""]
)
def test_anything_else_is_judged(tmp_path: Path, text: str) -> None:
    write(tmp_path, {"pytest.ini": "", "ruff.toml": ""})
    assert resolve_condition(text, tmp_path, configured={"docs": ["mkdocs"]}) == ResolvedCondition(
        text, None, "judge"
    )


# --- test counts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "output", "expected"),
    [
        pytest.param(
            "pytest",
            "tests/test_a.py ..F\n===== 3 failed, 10 passed, 2 skipped, 1 error in 0.50s =====\n",
            TestCounts(passed=10, failed=3, skipped=2, errors=1),
            id="pytest",
        ),
        pytest.param(
            "pytest",
            "..F\nFAILED tests/t.py::a - x\n3 failed, 10 passed in 0.12s\n",
            TestCounts(10, 3, 0, 0),
            id="pytest-q",
        ),
        pytest.param(
            "pytest",
            "\x1b[31m\x1b[1m1 failed\x1b[0m, \x1b[32m1 passed\x1b[0m, "
            "\x1b[33m1 skipped\x1b[0m\x1b[31m in 0.10s\x1b[0m\n",
            TestCounts(1, 1, 1, 0),
            id="pytest-colour",
        ),
        pytest.param(
            "pytest",
            "== 4 passed, 1 xfailed, 1 xpassed, 2 deselected, 3 warnings in 75.12s (0:01:15) ==\n",
            TestCounts(passed=5, failed=0, skipped=1, errors=0),
            id="pytest-xfail-is-skipped",
        ),
        pytest.param(
            "pytest",
            "== 2 errors in 1.02 seconds ==\n",
            TestCounts(0, 0, 0, 2),
            id="pytest-old-seconds",
        ),
        pytest.param(
            "pytest",
            "============================ no tests ran in 0.01s =============================\n",
            TestCounts(0, 0, 0, 0),
            id="pytest-no-tests-ran",
        ),
        pytest.param(
            "pytest",
            "== 1 passed in 0.1s ==\nlater noise\n== 2 failed, 3 passed in 0.2s ==\n",
            TestCounts(3, 2, 0, 0),
            id="pytest-last-summary-wins",
        ),
        pytest.param(
            "cargo",
            "test result: FAILED. 1 passed; 2 failed; 1 ignored; 0 measured; 0 filtered out;"
            " finished in 0.17s\n"
            "test result: ok. 4 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out;"
            " finished in 0.01s\n"
            "test result: ok. 1 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out;"
            " finished in 0.30s\n",
            TestCounts(6, 2, 3, 0),
            id="cargo-sums-binaries",
        ),
        pytest.param(
            "go",
            "=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n=== RUN   TestB/x\n"
            "    --- FAIL: TestB/x (0.00s)\n--- FAIL: TestB (0.00s)\n=== RUN   TestC\n"
            "    c_test.go:3: not on CI\n--- SKIP: TestC (0.00s)\nFAIL\n"
            "FAIL\texample.com/x\t0.01s\n",
            TestCounts(1, 2, 1, 0),
            id="go-verbose",
        ),
        pytest.param(
            "jest",
            "Test Suites: 1 failed, 1 passed, 2 total\n"
            "Tests:       1 failed, 1 skipped, 1 todo, 4 passed, 7 total\n",
            TestCounts(4, 1, 2, 0),
            id="jest",
        ),
        pytest.param(
            "npm",
            "> app@1.0.0 test\n> jest\n\nTests:       5 passed, 5 total\nTime: 1 s\n",
            TestCounts(5, 0, 0, 0),
            id="npm-running-jest",
        ),
        pytest.param(
            "vitest",
            " Test Files  1 failed | 1 passed (2)\n"
            "      Tests  1 failed | 3 passed | 1 skipped (5)\n",
            TestCounts(3, 1, 1, 0),
            id="vitest",
        ),
        pytest.param(
            "npm",
            "# tests 3\n# suites 0\n# pass 1\n# fail 1\n# cancelled 0\n# skipped 1\n# todo 0\n",
            TestCounts(1, 1, 1, 0),
            id="node-test-runner",
        ),
        pytest.param(
            None,
            "Ran 6 tests in 0.003s\n\nFAILED (failures=1, errors=1, skipped=2)\n",
            TestCounts(2, 1, 2, 1),
            id="unittest-via-custom-check",
        ),
        pytest.param(
            "make",
            "pytest -q\n..\n2 passed in 0.01s\n",
            TestCounts(2, 0, 0, 0),
            id="make-running-pytest",
        ),
        # A unittest run is read in unittest's format only: a pytest-like line a test prints
        # (read first in an unknown format) does not stand in for its failure.
        pytest.param(
            "unittest",
            "== 5 passed in 0.01s ==\n.F\nRan 2 tests in 0.001s\n\nFAILED (failures=1)\n",
            TestCounts(1, 1, 0, 0),
            id="unittest-with-a-pytest-line-its-test-printed",
        ),
    ],
)
def test_parse_test_counts(tool: str | None, output: str, expected: TestCounts) -> None:
    assert parse_test_counts(tool, output) == expected


@pytest.mark.parametrize(
    ("tool", "output"),
    [
        pytest.param("go", "ok  \texample.com/x\t0.01s\n", id="go-without-v"),
        pytest.param("go", "--- FAIL: TestB (0.00s)\nFAIL\texample.com/x\t0.01s\n", id="go-fail"),
        pytest.param("cargo", "error[E0425]: cannot find value `x`\n", id="cargo-did-not-build"),
        pytest.param("pytest", "ImportError while loading conftest\n", id="pytest-crashed"),
        pytest.param("pytest", "I passed 3 passed in review\n", id="pytest-prose"),
        # Linters and type checkers: whatever their output looks like, it counts no tests.
        pytest.param("ruff", "== 3 passed in 0.1s ==\n", id="not-a-test-runner"),
        pytest.param("eslint", "== 3 passed in 0.1s ==\n", id="eslint-not-a-test-runner"),
        pytest.param("mypy", "== 3 passed in 0.1s ==\n", id="mypy-not-a-test-runner"),
        pytest.param("tsc", "== 3 passed in 0.1s ==\n", id="tsc-not-a-test-runner"),
        pytest.param(None, "all fine\n", id="unknown"),
    ],
)
def test_parse_test_counts_is_none_when_it_cannot_tell(tool: str | None, output: str) -> None:
    assert parse_test_counts(tool, output) is None


def test_executed_counts_passed_failed_and_errors() -> None:
    assert TestCounts(passed=3, failed=2, skipped=7, errors=1).executed == 6


def _run_pytest(root: Path, argv: tuple[str, ...]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    done = subprocess.run(
        [*argv, "-p", "no:cacheprovider"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return done.stdout


def test_a_real_weakened_run_is_caught(tmp_path: Path) -> None:
    tests = "def test_a():\n    assert True\n\ndef test_b():\n    assert True\n"
    write(tmp_path, {"pytest.ini": "[pytest]\n", "tests/test_x.py": tests})
    resolved = resolve_condition("tests green", tmp_path)
    assert resolved.argv is not None
    base = parse_test_counts(runner_of(resolved.argv), _run_pytest(tmp_path, resolved.argv))
    assert base == TestCounts(2, 0, 0, 0)

    (tmp_path / "tests" / "test_x.py").write_text(
        "import pytest\n\ndef test_a():\n    assert True\n\n"
        "@pytest.mark.skip\ndef test_b():\n    assert False\n"
    )
    now = parse_test_counts(runner_of(resolved.argv), _run_pytest(tmp_path, resolved.argv))
    assert now == TestCounts(1, 0, 1, 0)
    assert weakened(base, now) == (
        "the check ran 1 test, 2 on the base commit; the check skipped 1 test, 0 on the base commit"
    )


# --- weakened ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "now", "reason"),
    [
        (
            TestCounts(10, 0, 0, 0),
            TestCounts(8, 0, 0, 0),
            "the check ran 8 tests, 10 on the base commit",
        ),
        (
            TestCounts(9, 1, 1, 0),
            TestCounts(9, 0, 3, 0),
            "the check ran 9 tests, 10 on the base commit; "
            "the check skipped 3 tests, 1 on the base commit",
        ),
        (
            TestCounts(10, 0, 1, 0),
            TestCounts(10, 0, 3, 0),
            "the check skipped 3 tests, 1 on the base commit",
        ),
        (TestCounts(5, 5, 0, 0), TestCounts(10, 0, 0, 0), None),  # fixed tests, same number run
        (TestCounts(5, 0, 2, 0), TestCounts(8, 0, 0, 0), None),  # more run, fewer skipped
        (TestCounts(4, 0, 0, 1), TestCounts(4, 1, 0, 0), None),  # an error became a failure
        (None, TestCounts(1, 0, 0, 0), None),
        (TestCounts(1, 0, 0, 0), None, None),
        (None, None, None),
    ],
)
def test_weakened(base: TestCounts | None, now: TestCounts | None, reason: str | None) -> None:
    assert weakened(base, now) == reason


# --- test runners: what a run depends on, and what its output proves ---------------------------


@pytest.mark.parametrize(
    ("argv", "runner"),
    [
        (["pytest", "-q"], "pytest"),
        (["/usr/bin/python3.11", "-B", "-m", "pytest"], "pytest"),
        (["uv", "run", "--frozen", "pytest", "tests"], "pytest"),
        (["python", "-m", "unittest", "discover"], "unittest"),
        (["npm", "test"], "npm"),
        (["npm", "run", "test:unit"], "npm"),
        (["yarn", "vitest", "run"], "vitest"),
        (["npx", "--no", "jest", "--ci"], "jest"),
        (["cargo", "+nightly", "test", "--all"], "cargo"),
        (["go", "test", "-v", "./..."], "go"),
        (["make", "-C", "sub", "check"], "make"),
        (["cargo", "build"], None),
        (["npm", "run", "build"], None),
        (["python", "-m", "mypy", "."], None),
        (["./ci.sh"], None),
    ],
)
def test_runner_of_names_the_runner_a_command_runs(argv: list[str], runner: str | None) -> None:
    assert runner_of(argv) == runner


def test_pytest_protects_every_file_it_reads_configuration_from(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pyproject.toml": '[tool.pytest.ini_options]\naddopts = "-p myproj.testing.hooks"\n',
            "src/pkg/tests/test_x.py": "",
        },
    )
    protect = set(
        runner_protect(
            ("pytest", "-p", "helpers", "-c", "ci/pytest.cfg", "src/pkg/tests"), tmp_path
        )
    )
    assert {
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "**/.pytest.ini",
        "**/conftest.py",
    } <= protect
    # Plugins from the command and from addopts: the module, and the packages it is inside.
    assert {"**/helpers.py", "**/helpers/**"} <= protect
    expected = {
        "**/myproj/testing/hooks.py",
        "**/myproj/__init__.py",
        "**/myproj/testing/__init__.py",
    }
    assert expected <= protect
    assert "ci/pytest.cfg" in protect
    # pytest looks for its configuration in the test path's folders before the root's.
    assert {"src/pkg/tests/**", "src/pkg/pyproject.toml", "src/setup.cfg"} <= protect


def test_a_make_test_protects_the_runner_its_recipe_calls(tmp_path: Path) -> None:
    write(tmp_path, {"Makefile": "test:\n\tpython -m pytest -q\n", "inc/rules.mk": ""})
    protect = resolve_condition("tests green", tmp_path).protect
    assert {"Makefile", "**/*.mk", "**/conftest.py", ".pytest.ini"} <= set(protect)


def test_a_checker_command_that_runs_no_test_runner_protects_nothing(tmp_path: Path) -> None:
    assert runner_protect(("ruff", "check", "."), tmp_path) == ()


PYTEST_Q = ("pytest", "-q")


@pytest.mark.parametrize(
    ("argv", "output", "base", "baselined", "expected"),
    [
        pytest.param(PYTEST_Q, "1 passed in 0.01s\n", None, False, None, id="pytest-passed"),
        pytest.param(
            PYTEST_Q,
            "F\n1 failed in 0.02s\n",
            None,
            False,
            ("counts", "check `pytest -q` exited 0, yet its summary reports 1 failed test"),
            id="pytest-failed-exit-0",
        ),
        pytest.param(
            PYTEST_Q,
            "",
            None,
            False,
            ("counts", "check `pytest -q` exited 0 but printed no test summary"),
            id="pytest-no-summary",
        ),
        # -qq drops the summary line: without a base run that printed one, nothing is expected.
        pytest.param(("pytest", "-qq"), "", None, False, None, id="pytest-qq"),
        pytest.param(
            ("pytest", "-qq"),
            "",
            TestCounts(1, 0, 0, 0),
            True,
            (
                "counts",
                "check `pytest -qq` exited 0 but printed no test summary"
                " (the base commit's run printed one)",
            ),
            id="pytest-qq-base-printed-one",
        ),
        pytest.param(
            PYTEST_Q,
            "1 passed in 0.01s\n",
            TestCounts(1, 1, 0, 0),
            True,
            ("weakened", "the check ran 1 test, 2 on the base commit"),
            id="pytest-fewer",
        ),
        pytest.param(
            ("npx", "jest"),
            "Tests:       1 failed, 1 passed, 2 total\n",
            None,
            False,
            ("counts", "check `npx jest` exited 0, yet its summary reports 1 failed test"),
            id="jest",
        ),
        pytest.param(
            ("vitest", "run"),
            "      Tests  1 failed | 3 passed (4)\n",
            None,
            False,
            ("counts", "check `vitest run` exited 0, yet its summary reports 1 failed test"),
            id="vitest",
        ),
        pytest.param(
            ("npm", "test"),
            "# tests 2\n# pass 1\n# fail 1\n",
            TestCounts(1, 1, 0, 0),
            True,
            ("counts", "check `npm test` exited 0, yet its summary reports 1 failed test"),
            id="npm-node-test",
        ),
        # npm wraps any runner: with no counts on the base either, the exit code decides.
        pytest.param(("npm", "test"), "done\n", None, True, None, id="npm-no-counts"),
        pytest.param(
            ("cargo", "test"),
            "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n",
            TestCounts(0, 1, 0, 0),
            True,
            ("weakened", "the check ran 0 tests, 1 on the base commit"),
            id="cargo-binary-cut-short",
        ),
        pytest.param(
            ("cargo", "test"),
            "",
            None,
            False,
            ("counts", "check `cargo test` exited 0 but printed no test summary"),
            id="cargo-no-summary",
        ),
        pytest.param(
            ("go", "test", "-v", "./..."),
            "=== RUN   TestAdd\n--- FAIL: TestAdd (0.00s)\n",
            None,
            False,
            ("counts", "check `go test -v ./...` exited 0, yet its summary reports 1 failed test"),
            id="go-v",
        ),
        pytest.param(("go", "test", "./..."), "ok  \tcalc\t0.01s\n", None, False, None, id="go"),
        pytest.param(
            ("make", "test"),
            "python -m pytest -q\n.E\n1 passed, 1 error in 0.03s\n",
            TestCounts(1, 1, 0, 0),
            True,
            ("counts", "check `make test` exited 0, yet its summary reports 1 error"),
            id="make-wrapping-pytest",
        ),
        pytest.param(("./ci.sh",), "1 failed in 0.1s\n", None, False, None, id="unknown"),
    ],
)
def test_unproven_pass(
    tmp_path: Path,
    argv: tuple[str, ...],
    output: str,
    base: TestCounts | None,
    baselined: bool,
    expected: tuple[str, str] | None,
) -> None:
    assert unproven_pass(argv, output, base, baselined=baselined, repo=tmp_path) == expected


def test_unproven_pass_reads_quiet_flags_from_addopts(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": "[pytest]\naddopts = -qq\n"})
    assert unproven_pass(("pytest",), "", None, baselined=False, repo=tmp_path) is None


def test_nested_package_json_is_protected_only_in_a_workspace(tmp_path: Path) -> None:
    write(tmp_path, {"package.json": json.dumps({"scripts": {"test": "jest"}})})
    assert "**/package.json" not in runner_protect(("npm", "test"), tmp_path)
    write(tmp_path, {"package.json": json.dumps({"workspaces": ["packages/*"]})})
    assert "**/package.json" in runner_protect(("npm", "test"), tmp_path)


@pytest.mark.parametrize(
    ("condition", "files", "weakening"),
    [
        # ruff reads the nearest configuration to each file: one added in a sub-folder wins.
        (
            "lint clean",
            {"ruff.toml": ""},
            ["ruff.toml", ".ruff.toml", "pyproject.toml", "pkg/ruff.toml", "pkg/sub/.ruff.toml"],
        ),
        (
            "lint clean",
            {"eslint.config.mjs": "export default []\n"},
            [
                "eslint.config.js",
                "eslint.config.mjs",
                ".eslintrc.json",
                "src/.eslintrc.yml",
                ".eslintignore",
                "package.json",
            ],
        ),
        # A workspace member's manifest, the build script.
        ("build passes", {"Cargo.toml": ""}, ["Cargo.toml", "crates/a/Cargo.toml", "build.rs"]),
        ("build passes", {"go.mod": ""}, ["go.mod"]),
        ("build passes", {"package.json": '{"scripts": {"build": "tsc"}}'}, ["package.json"]),
        ("build green", {"GNUmakefile": "all:\n\ttrue\n"}, ["GNUmakefile"]),
        # pytest takes the config file nearest the tests, and every conftest.py on the way.
        (
            "tests green",
            {"pytest.ini": "[pytest]\n"},
            [
                "pytest.ini",
                "pkg/pytest.ini",
                "pkg/.pytest.ini",
                "sub/pytest.toml",
                "sub/.pytest.toml",
                "conftest.py",
                "pkg/conftest.py",
                "tests/test_add.py",
            ],
        ),
        (
            "types check",
            {"mypy.ini": "[mypy]\nstrict = True\n"},
            ["mypy.ini", ".mypy.ini", "setup.cfg", "pyproject.toml"],
        ),
        (
            "types check",
            {"tsconfig.json": "{}"},
            [
                "tsconfig.json",
                "tsconfig.build.json",
                "packages/a/tsconfig.json",
                "packages/a/tsconfig.base.json",
            ],
        ),
    ],
)
def test_a_maker_cannot_weaken_a_built_in_check_through_any_file_its_tool_reads(
    tmp_path: Path, condition: str, files: dict[str, str], weakening: list[str]
) -> None:
    resolved = resolve_condition(condition, write(tmp_path, files))
    changed = [*weakening, "pkg/app.py", "src/index.ts"]

    refused = protected_violations(changed, protected=resolved.protect, scope=())

    assert [line.split(" (")[0] for line in refused] == weakening


@pytest.mark.parametrize(
    "config",
    [
        # ESLint 9's flat configs, then the legacy ones ESLint 8 still reads.
        *(f"eslint.config.{ext}" for ext in ("js", "mjs", "cjs", "ts", "mts", "cts")),
        *(f".eslintrc{ext}" for ext in ("", ".js", ".cjs", ".json", ".yml", ".yaml")),
    ],
)
def test_lint_clean_runs_eslint_for_any_config_file_it_reads(tmp_path: Path, config: str) -> None:
    resolved = resolve_condition("lint clean", write(tmp_path, {config: "{}\n"}))
    assert resolved.argv == ("npx", "--no", "eslint", ".")


@pytest.mark.parametrize(
    ("condition", "files"),
    [
        ("lint clean", {"eslint.config.js": "export default []\n"}),
        ("types check", {"tsconfig.json": "{}"}),
    ],
)
def test_npx_never_downloads_the_tool_a_built_in_check_runs(
    tmp_path: Path, condition: str, files: dict[str, str]
) -> None:
    """`--no`: a project without the tool installed fails the check visibly; npx would
    otherwise fetch whatever package has the name from the registry and run it."""
    resolved = resolve_condition(condition, write(tmp_path, files))
    assert resolved.argv is not None
    assert resolved.argv[:2] == ("npx", "--no")


@pytest.mark.parametrize(
    ("text", "files"),
    [
        *((text, {"ruff.toml": ""}) for text in ("lint clean", "Lint Passes")),
        *((text, {"go.mod": ""}) for text in ("build passes", "build green")),
        *(
            (text, {"tsconfig.json": "{}"})
            for text in ("types check", "type check passes", "types pass")
        ),
    ],
)
def test_every_spelling_of_the_other_built_ins_is_built_in(
    tmp_path: Path, text: str, files: dict[str, str]
) -> None:
    assert resolve_condition(text, write(tmp_path, files)).source == "builtin"
    assert is_builtin(text)

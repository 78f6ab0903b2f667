"""checks.test_runners: the table of test runners and the modules that consult it agree.

Every entry says how it is recognised, what its run depends on and how its counts are read;
each command an entry gives as an example is recognised as that entry; no other module of
`checks/` branches on a runner's name; and a runner added to the table at run time is picked up
by detection, protection, counting and arming without a change anywhere else.
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from loopctl.checks import runners, test_runners
from loopctl.checks.conditions import resolve_condition
from loopctl.checks.counts import TestCounts, parse_test_counts, unproven_pass
from loopctl.checks.runner_detection import detect_tests, prints_summary, runner_of, runner_protect
from loopctl.checks.test_runners import RUNNERS, Reporter, TestRunner
from loopctl.checks.verdicts import protected_violations

CHECKS = Path(test_runners.__file__).parent
ENTRIES = {runner.name: runner for runner in RUNNERS}


def test_each_runner_has_one_entry_that_says_how_it_is_detected_protected_and_counted() -> None:
    assert len(ENTRIES) == len(RUNNERS), "two entries share a name"
    for runner in RUNNERS:
        # Recognised from a command (with examples), or a summary format only.
        assert runner.matches is not None or runner.parse is not None, runner.name
        if runner.matches is not None:
            assert runner.examples, f"{runner.name}: give the commands `matches` recognises"
            assert runner.protect(runner.examples[0], CHECKS) is not None
        # No parser: its output is read in every format (it runs some other runner).
        assert runner.parse is not None or runner.matches is not None, runner.name
        if runner.reporter is not None:
            assert runner.matches is not None, f"{runner.name}: armed but never recognised"
    # The runners the built-in "tests green" can choose, and the formats read when in doubt.
    assert {r.name for r in RUNNERS if r.detect or r.guess} >= {"pytest", "cargo", "go", "npm"}
    assert len(test_runners.summary_parsers()) >= 6


@pytest.mark.parametrize(
    ("runner", "example"),
    [(runner.name, example) for runner in RUNNERS for example in runner.examples],
)
def test_each_example_command_is_recognised_as_its_entry(
    runner: str, example: tuple[str, ...]
) -> None:
    assert runner_of(example) == runner
    # What the run depends on is its entry's, plus what would replace the runner.
    entry = ENTRIES[runner]
    protect = runner_protect(example, CHECKS)
    assert set(entry.protect(example, CHECKS)) <= set(protect)
    assert set(entry.shadows) <= set(protect)
    assert isinstance(prints_summary(runner, example, CHECKS), bool)


def test_a_runner_without_a_parser_is_read_in_every_format() -> None:
    cargo = "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured\n"
    for runner in RUNNERS:
        if runner.parse is None:
            assert parse_test_counts(runner.name, cargo) == TestCounts(2, 0, 0, 0)


# --- no runner name outside the table ------------------------------------------------------------


def _strings(node: ast.AST) -> Iterator[str]:
    """String constants of an expression, inside tuples, lists and sets too."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for item in node.elts:
            yield from _strings(item)


def runner_branches(source: str, names: Sequence[str]) -> list[str]:
    """Where `source` compares with, looks up or matches on a runner's name: `== "pytest"`,
    `in ("jest", "vitest")`, a dict keyed by runner names, `case "go":`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            words = [word for operand in operands for word in _strings(operand)]
        elif isinstance(node, ast.Dict):
            words = [word for key in node.keys if key is not None for word in _strings(key)]
        elif isinstance(node, ast.MatchValue):
            words = list(_strings(node.value))
        else:
            continue
        found += (f"line {node.lineno}: {word!r}" for word in words if word in names)
    return found


def test_the_branch_finder_finds_each_kind_of_branch() -> None:
    source = (
        'if tool == "pytest": pass\n'
        'if tool in ("jest", "x"): pass\n'
        'PARSERS = {"cargo": 1}\n'
        'match tool:\n    case "go": pass\n'
        'argv = ("cargo", "build")\n'  # naming a program is not a branch
        'if tool == "pytest-internals": pass\n'
    )
    names = ("pytest", "jest", "cargo", "go")
    assert sorted(runner_branches(source, names)) == [
        "line 1: 'pytest'",
        "line 2: 'jest'",
        "line 3: 'cargo'",
        "line 5: 'go'",
    ]


def test_no_module_of_checks_branches_on_a_runner_name_but_the_table() -> None:
    names = tuple(ENTRIES)
    branches = {
        path.name: runner_branches(path.read_text(encoding="utf-8"), names)
        for path in sorted(CHECKS.glob("*.py"))
        if path.name != "test_runners.py"
    }
    assert "counts.py" in branches, "the scan did not read the package"
    assert {name: found for name, found in branches.items() if found} == {}


# --- a runner added at run time ----------------------------------------------------------------

_FAKE_LINE = "fake: {passed} ok, {failed} bad, {skipped} skipped"


def _parse_fake(text: str) -> TestCounts | None:
    for line in reversed(text.splitlines()):
        words = line.replace(",", "").split()
        if len(words) == 7 and words[0] == "fake:":
            return TestCounts(int(words[1]), int(words[3]), int(words[5]), 0)
    return None


def _fake_report(value: object) -> dict[str, int] | None:
    return dict(value["counts"]) if isinstance(value, dict) else None


FAKE = TestRunner(
    name="faketest",
    matches=lambda words: words[0] == "faketest",
    examples=(("faketest", "--all"),),
    detect=lambda repo, protect_of: (
        (("faketest",), protect_of(("faketest",), repo)) if (repo / "fake.toml").is_file() else None
    ),
    protect=lambda argv, repo: ("fake.toml", "fakes/**"),
    recipe=(r"\bfaketest\b", ("faketest",)),
    shadows=("**/fake_plugins/**",),
    reporter=Reporter(
        locate=lambda argv, names, start: (start, False) if names[start] == "faketest" else None,
        argv=lambda words, index, as_module, report: [*words, f"--report={report}"],
        python=False,
        read=_fake_report,
    ),
    parse=_parse_fake,
    prints_summary=lambda argv, repo: True,
)


@pytest.fixture
def fake_runner(monkeypatch: pytest.MonkeyPatch) -> TestRunner:
    monkeypatch.setattr(test_runners, "RUNNERS", (*RUNNERS, FAKE))
    return FAKE


def test_a_runner_added_to_the_table_is_detected_and_protected(
    fake_runner: TestRunner, tmp_path: Path
) -> None:
    assert runner_of(("faketest", "--all")) == "faketest"
    assert runner_of(("uv", "run", "faketest")) == "faketest"
    protect = ("fake.toml", "fakes/**", "**/fake_plugins/**")
    assert runner_protect(("faketest",), tmp_path) == protect

    (tmp_path / "fake.toml").write_text("")
    assert detect_tests(tmp_path) == (("faketest",), protect)
    assert resolve_condition("tests green", tmp_path).argv == ("faketest",)
    # A Makefile whose recipe runs it protects what it depends on.
    (tmp_path / "Makefile").write_text("test:\n\tfaketest --all\n")
    assert "fakes/**" in runner_protect(("make", "test"), tmp_path)


def test_a_runner_added_to_the_table_is_counted_and_armed(
    fake_runner: TestRunner, tmp_path: Path
) -> None:
    output = _FAKE_LINE.format(passed=3, failed=1, skipped=2) + "\n"
    assert parse_test_counts("faketest", output) == TestCounts(3, 1, 2, 0)
    assert parse_test_counts("make", output) == TestCounts(3, 1, 2, 0)  # read in every format
    assert prints_summary("faketest", ("faketest",), tmp_path)
    problem = unproven_pass(("faketest",), output, None, baselined=False, repo=tmp_path)
    assert problem == ("counts", "check `faketest` exited 0, yet its summary reports 1 failed test")
    assert unproven_pass(("faketest",), "", None, baselined=False, repo=tmp_path) == (
        "counts",
        "check `faketest` exited 0 but printed no test summary",
    )

    armed = runners.arm(("faketest", "-x"), {})
    assert armed is not None
    try:
        assert armed.runner == "faketest"
        assert armed.argv == ("faketest", "-x", f"--report={armed.folder / runners.REPORT_NAME}")
        assert armed.env == {}
        report_file = armed.folder / runners.REPORT_NAME
        report_file.write_text(json.dumps({"counts": {"passed": 2}}))
        assert runners.read_report(armed) == runners.Report("ok", {"passed": 2})
    finally:
        runners.disarm(armed)


@pytest.mark.parametrize("data", ["[]", "1", "null", '"ok"'])
def test_a_report_that_is_no_json_object_is_unreadable(data: str) -> None:
    """The code under test can overwrite its report with any JSON: never an error (it was an
    AttributeError for loopctl's own reporters' format)."""
    for argv in ((sys.executable, "-m", "pytest"), ("jest",)):
        armed = runners.arm(argv, {})
        assert armed is not None
        try:
            (armed.folder / runners.REPORT_NAME).write_text(data)
            assert runners.read_report(armed) == runners.Report("unreadable", {})
        finally:
            runners.disarm(armed)


@pytest.mark.parametrize(
    ("argv", "runner"),
    [
        # Every environment manager's `run` runs the command after it (its own options first).
        *(
            ((wrapper, "run", "pytest", "-q"), "pytest")
            for wrapper in ("poetry", "pipenv", "pdm", "hatch")
        ),
        (("rye", "run", "pytest"), "pytest"),
        (("uv", "run", "--frozen", "pytest"), "pytest"),
        (("poetry", "run", "python", "-m", "pytest"), "pytest"),
        (("python3.12", "-X", "dev", "-m", "pytest"), "pytest"),
        (("py.test", "-q"), "pytest"),  # pytest's older name, still installed with it
        # A node package manager's scripts and the packages it executes.
        (("bun", "run", "test"), "npm"),
        (("npm", "run-script", "test"), "npm"),
        (("npm", "run", "test:unit"), "npm"),
        (("npm", "t"), "npm"),  # npm's own aliases of `npm test`
        (("npm", "tst"), "npm"),
        (("pnpm", "dlx", "vitest", "run"), "vitest"),
        (("yarn", "dlx", "jest"), "jest"),
        (("yarn", "exec", "jest"), "jest"),
        (("pnpm", "exec", "jest"), "jest"),
        (("bunx", "jest"), "jest"),
        # `-m` of a program that is not Python names no module.
        (("./ci.sh", "-m", "pytest"), None),
    ],
)
def test_a_runner_is_recognised_however_the_project_starts_it(
    argv: tuple[str, ...], runner: str | None
) -> None:
    """A check whose runner goes unrecognised has its counts unread: a run that forces exit 0
    over failed tests would pass. So every usual way of starting one is named here."""
    assert runner_of(argv) == runner


@pytest.mark.parametrize(
    ("argv", "weakening", "source"),
    [
        (
            ("npm", "test"),
            [
                *("src/add.test.js", "src/add.spec.ts", "__tests__/a.js", "src/__tests__/b.js"),
                *("test/x.js", "tests/y.js", "package.json", ".npmrc", ".yarnrc", ".yarnrc.yml"),
                *(".pnpmfile.cjs", "bunfig.toml", "jest.config.js", "pkg/jest.config.ts"),
                *("jest.setup.js", "vitest.config.ts", "pkg/vitest.config.mts"),
                *("vitest.workspace.ts", "vitest.setup.ts", "vite.config.ts", "babel.config.js"),
                *(".babelrc", ".babelrc.json", ".swcrc", "setupTests.js", "src/setupTests.ts"),
                *(".mocharc.yml", "node_modules/.bin/jest"),
            ],
            "src/add.js",
        ),
        (
            ("python3", "-m", "unittest", "discover"),
            ["tests/test_a.py", "test/helpers.py", "pkg/test_b.py", "pkg/tests.py"],
            "pkg/add.py",
        ),
        (
            ("cargo", "test"),
            [
                *("tests/it.rs", "crates/a/tests/it.rs", "Cargo.toml", "crates/a/Cargo.toml"),
                *("build.rs", "crates/a/build.rs", ".cargo/config.toml"),
                *("crates/a/.cargo/config.toml", "rust-toolchain", "rust-toolchain.toml"),
            ],
            "src/lib.rs",
        ),
        (
            ("go", "test", "./..."),
            [
                *("add_test.go", "pkg/add_test.go", "testdata/x.json", "pkg/testdata/y.json"),
                *("go.mod", "pkg/go.mod", "go.work", "vendor/github.com/x/y/assert.go"),
            ],
            "pkg/add.go",
        ),
    ],
)
def test_a_maker_cannot_weaken_a_test_run_through_any_file_its_runner_reads(
    tmp_path: Path, argv: tuple[str, ...], weakening: list[str], source: str
) -> None:
    """The tests, the runner's configuration and what replaces the runner, for each runner
    loopctl counts: a change to any of them is refused, a change to the code is not."""
    protect = runner_protect(argv, tmp_path)
    refused = protected_violations([*weakening, source], protected=protect, scope=())
    assert [line.split(" (")[0] for line in refused] == weakening

"""The sabotage scan: each rule on hostile lines (several spellings, Python and Node), benign
lines that must not trip it, and the diff reader's paths and line numbers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from loopctl.checks.sabotage import (
    RULES,
    AddedLine,
    Finding,
    added_lines,
    languages,
    lines_of_files,
    rule_table,
    scan,
    scan_diff,
    summary,
)


def rules_hit(path: str, *lines: str) -> list[str]:
    """The rule each flagged line matched, for `lines` added to `path`."""
    found = scan(AddedLine(path, n, text) for n, text in enumerate(lines, start=1))
    return [f.rule for f in found]


HOSTILE: list[tuple[str, str, tuple[str, ...]]] = [
    # (rule, path, added lines): the rule must flag at least one of the lines.
    ("exit-handler", "src/calc.py", ("import atexit", "atexit.register(lambda: print('hi'))")),
    ("exit-handler", "src/calc.py", ("@atexit.register", "def _bye(): pass")),
    ("exit-handler", "src/calc.py", ("from atexit import register as _r", "_r(print)")),
    ("exit-handler", "pkg/__init__.py", ("import weakref", "weakref.finalize(obj, done)")),
    ("exit-handler", "src/calc.py", ("atexit . register(_f)",)),
    ("hard-exit", "src/calc.py", ("os._exit(0)",)),
    ("exit-status", "src/calc.py", ("session._exitcode = 0",)),
    (
        "exit-in-handler",
        "src/calc.py",
        ("def pytest_unconfigure(config):", "    raise SystemExit(0)"),
    ),
    ("pytest-internals", "src/calc.py", ('sys.modules["pluggy"] = fake',)),
    ("pytest-internals", "src/calc.py", ("hooks.pytest_runtest_makereport = f",)),
    ("exit-handler", "src/calc.py", ("__import__('atexit').register(f)",)),
    ("exit-handler", "src/calc.py", ('importlib.import_module("atexit").register(f)',)),
    ("hard-exit", "src/calc.py", ("getattr(os, '_exit')(0)",)),
    ("exit-in-handler", "src/calc.py", ("signal.signal(2, lambda *a: getattr(sys, 'exit')(0))",)),
    (
        "exit-in-handler",
        "src/calc.py",
        (
            "def __del__(self):",
            "    raise SystemExit",
        ),
    ),
    ("pytest-internals", "src/calc.py", ("pytest.exit('done', returncode=0)",)),
    ("pytest-in-code", "src/calc.py", ("import pytest",)),
    ("pytest-in-code", "pkg/hooks.py", ("from pytest import hookimpl",)),
    ("pytest-in-code", "src/calc.py", ("pytest_plugins = ['calc_plugin']",)),
    ("report-path", "src/calc.py", ("os.environ.pop('LOOPCTL_TEST_REPORT', None)",)),
    ("report-path", "src/calc.py", ("import loopctl_pytest_report",)),
    ("report-path", "src/index.js", ("args.push('--test-reporter-destination=x')",)),
    ("output-rewrite", "src/calc.py", ("sys.stdout = Rewriter(sys.stdout)",)),
    ("output-rewrite", "src/calc.py", ("sys.__stderr__.write = w",)),
    ("output-rewrite", "src/calc.py", ("builtins.print = lambda *a, **k: None",)),
    ("output-rewrite", "src/calc.py", ("with contextlib.redirect_stdout(buf):",)),
    ("output-rewrite", "src/calc.py", ("text = text.replace('1 failed', '1 passed')",)),
    (
        "output-rewrite",
        "src/index.js",
        ("process.stdout.write = (s) => orig(s.replace(/failed/g, 'passed'));",),
    ),
    ("output-rewrite", "src/index.js", ("console.log = () => {};",)),
    ("node-exit", "src/index.js", ("setTimeout(() => process.exit(0), 10);",)),
    ("summary-word", "src/calc.py", ("print(str(n) + ' passed in 0.01s')",)),
    ("summary-word", "src/calc.py", ("print(n, 'passed')",)),
    ("hard-exit", "src/calc.py", ("    os._exit(int(not failed) - 1)",)),
    ("hard-exit", "src/calc.py", ("from os import _exit", "_exit(0)")),
    (
        "exit-in-handler",
        "src/calc.py",
        ("class Guard:", "    def __del__(self):", "        sys.exit(0)"),
    ),
    (
        "exit-in-handler",
        "src/calc.py",
        ("signal.signal(signal.SIGTERM, h)", "    raise SystemExit(0)"),
    ),
    ("exit-in-handler", "src/calc.py", ("signal.signal(15, h)", "    exit(0)")),
    ("session-end-hook", "src/plugin.py", ("def pytest_sessionfinish(session, exitstatus):",)),
    ("session-end-hook", "src/plugin.py", ("def pytest_unconfigure(config):",)),
    ("session-end-hook", "src/plugin.py", ("def pytest_terminal_summary(terminalreporter):",)),
    ("exit-status", "src/plugin.py", ("    session.exitstatus = 0",)),
    ("exit-status", "src/plugin.py", ("session.testsfailed = 0",)),
    ("exit-status", "src/plugin.py", ("return ExitCode.OK",)),
    ("exit-status", "src/plugin.py", ("setattr(session, 'exitstatus', 0)",)),
    ("pytest-internals", "src/calc.py", ("import _pytest.terminal",)),
    ("pytest-internals", "src/calc.py", ("from _pytest.main import Session",)),
    ("pytest-internals", "src/calc.py", ("pytest.main(['-q'])",)),
    ("pytest-internals", "src/calc.py", ("sys.modules['_pytest'].x = 1",)),
    ("pytest-internals", "src/calc.py", ("TerminalReporter.summary_stats = lambda s: None",)),
    ("unittest-internals", "src/calc.py", ("unittest.TestResult.wasSuccessful = lambda s: True",)),
    ("unittest-internals", "src/calc.py", ("unittest.TextTestRunner.run = fake_run",)),
    ("unittest-internals", "src/calc.py", ("from unittest import runner", "runner.x = 1")),
    (
        "unittest-internals",
        "src/calc.py",
        ("TextTestResult.addFailure = TextTestResult.addSuccess",),
    ),
    ("unittest-internals", "src/calc.py", ("sys.modules['unittest'].main = main",)),
    ("report-path", "src/calc.py", ("if '--junitxml' in a:",)),
    ("report-path", "src/calc.py", ("path = opts.junitxml",)),
    ("report-path", "src/index.js", ("const i = args.indexOf('--outputFile');",)),
    ("report-path", "package.json", ('"test": "jest --json --outputFile=r.json"',)),
    ("report-path", "vitest.config.ts", ("  outputFile: 'r.json',",)),
    ("argv-scan", "src/calc.py", ("xml = [a for a in sys.argv if a.endswith('.xml')]",)),
    ("argv-scan", "src/index.js", ("const out = process.argv.find(a => a.includes('json'));",)),
    ("node-exit-handler", "src/index.js", ("process.on('exit', () => console.log('x'));",)),
    ("node-exit-handler", "src/index.ts", ('process.once("beforeExit", fake);',)),
    ("node-exit", "test/setup.js", ("process.exit(0);",)),
    ("node-exit", "jest.setup.js", ("process.reallyExit(0)",)),
    ("node-exit", "src/index.js", ("process.on('exit', f)", "function f() { process.exit(0) }")),
    # A command-line entry point may exit, but not from an exit handler it registers.
    ("node-exit", "bin/cli.js", ("process.on('exit', f)", "function f() { process.exit(0) }")),
    ("node-exit-code", "src/index.js", ("process.exitCode = 0;",)),
    ("node-exit-code", "src/index.mjs", ("process['exitCode'] = 0",)),
    ("test-globals", "src/index.js", ("global.test = (name, fn) => {};",)),
    ("test-globals", "src/index.js", ("globalThis.expect = () => ({ toBe() {} });",)),
    ("test-globals", "src/index.js", ("globalThis['it'] = noop;",)),
    ("test-globals", "src/index.js", ("expect = () => ok;",)),
    ("test-globals", "src/index.js", ("expect.extend = noop;",)),
    ("runner-internals-node", "src/index.js", ("const c = require('jest-circus');",)),
    ("runner-internals-node", "src/index.ts", ("import { VitestRunner } from 'vitest/runners';",)),
    ("runner-internals-node", "src/index.js", ("jest.spyOn(process, 'exit')",)),
    ("summary-line", "src/calc.py", ("print('1 passed in 0.01s')",)),
    (
        "summary-line",
        "src/calc.py",
        ('sys.stdout.write("===== 3 passed, 1 warning in 0.2s =====\\n")',),
    ),
    ("summary-line", "src/calc.py", ('print(f"{n} passed in {t:.2f}s")',)),
    ("summary-line", "src/calc.py", ("print('%d passed' % n)",)),
    ("summary-line", "src/calc.py", ("os.write(1, b'2 passed in 0.1s')",)),
    ("summary-line", "src/calc.py", ("print('Ran 4 tests in 0.001s')",)),
    ("summary-line", "src/calc.py", ("print('{} failed'.format(0))",)),
    ("summary-line", "src/index.js", ("console.log('Tests:       5 passed, 5 total');",)),
    ("summary-line", "src/index.js", ("console.log(`Tests  ${n} passed (${n})`);",)),
    (
        "summary-line",
        "src/index.js",
        ("process.stdout.write('Test Suites: 1 passed, 1 total\\n')",),
    ),
    ("summary-line", "main.go", ('fmt.Println("ok  \\texample.com/pkg\\t0.01s")',)),
    ("summary-line", "src/lib.rs", ('println!("test result: ok. 3 passed; 0 failed");',)),
    ("summary-line", "src/index.js", ("console.log('# pass 3')",)),
    ("summary-word", "src/calc.py", ("print('OK')",)),
    ("summary-word", "src/calc.py", ("sys.stderr.write('\\nOK\\n')",)),
    ("summary-word", "src/calc.py", ("print('OK (skipped=1)')",)),
    ("summary-word", "main.go", ('fmt.Println("PASS")',)),
]


@pytest.mark.parametrize(("rule", "path", "lines"), HOSTILE)
def test_each_rule_flags_its_hostile_lines(rule: str, path: str, lines: tuple[str, ...]) -> None:
    assert rule in rules_hit(path, *lines), (rule, path, lines)


def test_every_rule_has_a_hostile_case_and_a_reason() -> None:
    assert {rule for rule, _, _ in HOSTILE} == {rule.name for rule in RULES}
    assert all(reason and "\n" not in reason for _, reason in rule_table())
    assert len({name for name, _ in rule_table()}) == len(RULES)


BENIGN: list[tuple[str, tuple[str, ...]]] = [
    ("src/cli.py", ("import sys", "def main():", "    return 0", "sys.exit(main())")),
    ("src/cli.py", ("if __name__ == '__main__':", "    raise SystemExit(main())")),
    ("src/calc.py", ("def add(a, b):", "    return a + b")),
    ("src/calc.py", ("print(f'{n} items processed')", "log.info('%d files passed the filter', n)")),
    ("src/calc.py", ("return 'OK'", "status = 'PASS' if ok else 'FAIL'")),
    ("src/calc.py", ("# atexit.register(cleanup) is not needed here",)),
    ("src/calc.py", ("self.passed = passed", "failed = [t for t in tasks if t.failed]")),
    ("src/http.py", ("reason = 'OK'", "return Response(200, 'OK')")),
    ("src/index.js", ("const { expect } = require('chai');",)),
    ("test/a.test.js", ("const expect = require('chai').expect;", "expect(x).toBe(1);")),
    ("src/index.js", ("if (x === expect) {}", "module.exports = { add };")),
    ("bin/cli.js", ("process.exit(main(process.argv.slice(2)));",)),
    ("src/index.ts", ("const outputFile = path.join(dir, 'out.js');",)),
    ("bin/tool.js", ("if (argv.help) process.exit(0);",)),  # a command's entry point
    (
        "src/cli.py",
        (
            "def main():",
            "    try:",
            "        run()",
            "    except KeyboardInterrupt:",
            "        sys.exit(130)",
        ),
    ),
    ("tests/test_calc.py", ("import pytest", "@pytest.mark.parametrize('a', [1])")),
    ("conftest.py", ("import pytest",)),
    ("src/calc.py", ("result = {'status': 'passed'}", "if state == 'failed':")),
    ("src/calc.py", ("name = name.replace('-', '_')",)),
    ("README.md", ("Run it: `1 passed in 0.01s`, then atexit.register(...)", "os._exit(0)")),
    ("docs/guide.rst", ("    session.exitstatus = 0",)),
]


@pytest.mark.parametrize(("path", "lines"), BENIGN)
def test_benign_lines_raise_nothing(path: str, lines: tuple[str, ...]) -> None:
    assert rules_hit(path, *lines) == []


def test_languages_follow_the_file_name() -> None:
    assert "python" in languages("a/b.py")
    assert "node" in languages("x.test.mjs")
    assert languages("README.md") == frozenset()
    assert languages("package.json") == frozenset({"code"})


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def test_a_real_git_diff_names_the_new_path_and_line(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "src").mkdir()
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n\n\nx = 1\n")
    (repo / "old name.py").write_text("a = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    (repo / "src" / "calc.py").write_text(
        "import atexit\ndef add(a, b):\n    return a + b\n\n\nx = 1\n"
        "atexit.register(lambda: print('1 passed in 0.01s'))\n"
    )
    git(repo, "mv", "old name.py", "new näme.py")
    (repo / "new näme.py").write_text("a = 1\nos._exit(0)\n")
    git(repo, "add", "-A")
    diff = git(repo, "diff", "--cached", "HEAD")
    added = added_lines(diff)
    assert AddedLine("src/calc.py", 1, "import atexit") in added
    assert AddedLine("src/calc.py", 3, "    return a + b") in added
    found = scan_diff(diff)
    assert [(f.path, f.line, f.rule) for f in found] == [
        ("new näme.py", 2, "hard-exit"),
        ("src/calc.py", 7, "exit-handler"),
    ]
    assert (
        found[1]
        .describe()
        .startswith(
            "src/calc.py:7: `atexit.register(lambda: print('1 passed in 0.01s'))` (exit-handler:"
        )
    )
    line = summary(found)
    assert line.startswith("the change looks like it tampers with the test run: new näme.py:2")
    assert "src/calc.py:7 `atexit.register(" in line


def committed(tmp_path: Path, files: dict[str, bytes]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for name, content in files.items():
        (repo / name).write_bytes(content)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base")
    return repo


def test_lines_added_after_a_file_that_had_no_final_newline_are_read(tmp_path: Path) -> None:
    """git marks the old last line `\\ No newline at end of file` between the lines it takes
    away and those it adds: the reader goes on past the mark, to the hostile line."""
    repo = committed(tmp_path, {"calc.py": b"x = 1"})
    (repo / "calc.py").write_bytes(b"x = 2\nos._exit(0)\n")

    diff = git(repo, "diff", "HEAD")

    assert "\\ No newline at end of file\n+x = 2" in diff
    assert [(f.path, f.line, f.rule) for f in scan_diff(diff)] == [("calc.py", 2, "hard-exit")]


def test_a_file_whose_name_is_not_text_is_read_not_a_crash(tmp_path: Path) -> None:
    """git quotes a name's bytes in octal; one that is not UTF-8 is read with its bad bytes
    replaced, and its hostile line is still found."""
    repo = committed(tmp_path, {"calc.py": b"x = 1\n"})
    (repo / "calc.py").write_bytes(b"x = 2\n")
    with open(bytes(repo) + b"/bad\xff.py", "wb") as planted:
        planted.write(b"os._exit(0)\n")
    git(repo, "add", "-A")

    diff = git(repo, "diff", "--cached", "HEAD")

    assert '"b/bad\\377.py"' in diff
    assert [(f.path, f.rule) for f in scan_diff(diff)] == [("bad\ufffd.py", "hard-exit")]


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("src/index.js", "// args.push('--test-reporter-destination=x')"),
        ("src/index.js", "/* args.push('--test-reporter-destination=x') */"),
        ("src/index.js", " * args.push('--test-reporter-destination=x')"),
        ("run.sh", "# unset LOOPCTL_TEST_REPORT"),
        ("main.go", '// os.Unsetenv("LOOPCTL_TEST_REPORT")'),
    ],
)
def test_a_comment_in_each_language_is_not_code(path: str, line: str) -> None:
    """The same text uncommented is flagged: the comment is what spares it."""
    uncommented = line.lstrip(" /*#").rstrip(" */")

    assert rules_hit(path, line) == []
    assert rules_hit(path, uncommented) == ["report-path"]


def test_a_summary_names_three_findings_and_counts_the_rest() -> None:
    found = [Finding("hard-exit", "a.py", n, "os._exit(0)", "why") for n in range(1, 6)]

    assert summary(found[:3]).endswith("a.py:3 `os._exit(0)`")
    assert summary(found).endswith("a.py:3 `os._exit(0)` and 2 more")


def test_deleted_lines_and_deleted_files_are_not_scanned() -> None:
    diff = (
        "diff --git a/x.py b/x.py\n--- a/x.py\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-os._exit(0)\n"
        "diff --git a/y.py b/y.py\n--- a/y.py\n+++ b/y.py\n@@ -1,2 +1,1 @@\n-os._exit(0)\n a = 1\n"
    )
    assert scan_diff(diff) == []


def test_findings_round_trip_through_json() -> None:
    finding = Finding("hard-exit", "a.py", 3, "os._exit(0)", "why")
    assert Finding.from_json(finding.to_json()) == finding
    assert Finding.from_json({}) == Finding("", "", 0, "", "")  # a record with no fields


def test_a_context_line_stripped_to_nothing_still_counts() -> None:
    """A diff passed through a tool that strips trailing blanks has "" for an empty context
    line: it is a line of the file, and the line numbers after it stay right."""
    diff = (
        "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n"
        "@@ -1,2 +1,3 @@\n a = 1\n\n+os._exit(0)\n"
    )

    assert [(f.line, f.rule) for f in scan_diff(diff)] == [(3, "hard-exit")]


def test_a_file_whose_name_holds_a_tab_is_read_by_its_name(tmp_path: Path) -> None:
    repo = committed(tmp_path, {"calc.py": b"x = 1\n"})
    (repo / "a\tb.py").write_bytes(b"os._exit(0)\n")
    git(repo, "add", "-A")

    diff = git(repo, "diff", "--cached", "HEAD")

    assert '"b/a\\tb.py"' in diff
    assert [(f.path, f.rule) for f in scan_diff(diff)] == [("a\tb.py", "hard-exit")]


def test_a_whole_file_scanned_names_the_line_as_an_editor_counts_it() -> None:
    (found,) = scan(lines_of_files({"src/a.py": "import os\n\nos._exit(0)\n"}))
    assert found.where() == "src/a.py:3"


def test_a_long_line_is_quoted_cut() -> None:
    long = "os._exit(0)  # " + "x" * 500
    (found,) = scan(lines_of_files({"a.py": long}))
    assert len(found.text) <= 160
    assert found.text.endswith("…")


def test_the_guide_lists_every_rule_with_its_reason() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "checks.md").read_text()
    for name, reason in rule_table():
        assert f"| `{name}` | {reason}" in readme, name

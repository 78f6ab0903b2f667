"""Fingerprints: the same failure twice is the same fingerprint; a different failure is not."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from string import Template

import pytest

from loopctl.checks.fingerprint import (
    Fingerprint,
    error_lines,
    failing_tests,
    fingerprint,
    normalise_line,
)


def _rule(text: str, char: str = "=", width: int = 80) -> str:
    """pytest's section title: text centred in a line of `char` as wide as the terminal."""
    return f" {text} ".center(width, char)


# --- realistic outputs, with everything that varies between two runs as a parameter ------------

PYTEST = Template(
    """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0
rootdir: $root
configfile: pyproject.toml
collected 3 items

tests/test_fizz.py F.F                                                   [100%]

=================================== FAILURES ===================================
$title

    def $test():
>       assert fizzbuzz(15) == "FizzBuzz"
E       $message
E        +  where 'Fizz' = fizzbuzz(15)

tests/test_fizz.py:5: AssertionError
_________________________________ test_config __________________________________

tmp_path = PosixPath('$pytest_tmp/test_config0')

    def test_config(tmp_path):
        cfg = tmp_path / "cfg.json"
        cfg.write_text("{}")
>       assert load(cfg).owner is not None
E       AssertionError: assert None is not None
E        +  where None = <Config object at $addr>.owner
E        +    where <Config object at $addr> = load(PosixPath('$pytest_tmp/test_config0/cfg.json'))

tests/test_fizz.py:14: AssertionError
----------------------------- Captured stderr call -----------------------------
$stamp WARNING fizz: pid $pid read $pytest_tmp/test_config0/cfg.json in ${ms}ms
=========================== short test summary info ============================
FAILED tests/test_fizz.py::$test - $message
FAILED tests/test_fizz.py::test_config - AssertionError: assert None is not None
$summary
"""
)


def pytest_output(
    run: int,
    *,
    test: str = "test_fizz",
    message: str = "AssertionError: assert 'Fizz' == 'FizzBuzz'",
) -> str:
    return PYTEST.substitute(
        root=f"/tmp/loopctl-wt-{run}abc/repo",
        title=_rule(test, "_"),
        test=test,
        message=message,
        pytest_tmp=f"/tmp/pytest-of-root/pytest-{run}",
        addr=f"0x7f{run:02d}c590c5ca0",
        stamp=f"2024-05-0{run}T1{run}:02:03.{run}41Z",
        pid=4000 + run * 37,
        ms=run * 7,
        summary=_rule(f"2 failed, 1 passed in {run * 3.17:.2f}s"),
    )


GO = Template(
    """\
=== RUN   TestParse
=== RUN   TestParse/empty
    parse_test.go:21: open $gotmp/001/in.txt: no such file or directory
=== RUN   TestParse/ok
--- FAIL: TestParse (${dur}s)
    --- FAIL: TestParse/empty (0.00s)
    --- PASS: TestParse/ok (0.00s)
=== RUN   $test
    calc_test.go:9: $message
--- FAIL: $test (0.00s)
=== RUN   TestDiv
--- FAIL: TestDiv (0.00s)
panic: runtime error: integer divide by zero [recovered]
\tpanic: runtime error: integer divide by zero

goroutine $goroutine [running]:
testing.tRunner.func1.2({$addr, 0x5e9f30})
\t/usr/local/go/src/testing/testing.go:1631 +0x24a
example.com/calc.Div(...)
\t$root/calc.go:12
FAIL\texample.com/calc\t${dur}s
FAIL
"""
)


def go_output(run: int, *, test: str = "TestAdd", message: str = "Add(2, 2) = 5, want 4") -> str:
    return GO.substitute(
        gotmp=f"/tmp/TestParseempty{2849305723 + run * 1111}",
        dur=f"0.0{run}",
        test=test,
        message=message,
        goroutine=6 + run,
        addr=f"0x5172a{run}",
        root=f"/home/dev/.cache/loopctl/wt-{run}/calc",
    )


CARGO = Template(
    """\
   Compiling calc v0.1.0 ($root)
    Finished `test` profile [unoptimized + debuginfo] target(s) in ${dur}s
     Running unittests src/lib.rs (target/debug/deps/calc-$hash)

running 3 tests
test tests::it_works ... ok
test $test ... FAILED
test tests::slow ... ignored

failures:

---- $test stdout ----

thread '$test' ($tid) panicked at src/lib.rs:14:18:
assertion `left == right` failed: names differ
  left: $left
 right: "bar"
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    $test

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in ${dur}s

error: test failed, to rerun pass `--lib`
"""
)


def cargo_output(run: int, *, test: str = "tests::names", left: str = '"foo"') -> str:
    return CARGO.substitute(
        root=f"/tmp/.tmp{run}Xy9z/calc",
        dur=f"{run}.{run}7",
        hash=f"a35a48c092d3f7{run:02d}",
        test=test,
        tid=4147 + run,
        left=left,
    )


JEST = Template(
    """\
 FAIL  src/sum.test.js ($slow s)
  sum
    ✕ $test ($ms ms)
    ✓ adds 0 (1 ms)

  ● sum › $test

    expect(received).toBe(expected) // Object.is equality

    Expected: $expected
    Received: "tree"

      1 | const sum = require('./sum');
      2 | test('adds 1 + 2 to equal 3', () => {
    > 3 |   expect(sum(1, 2)).toBe(3);
        |                     ^
      4 | });

      at Object.toBe ($root/src/sum.test.js:3:21)

 PASS  src/other.test.js

Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 3 passed, 4 total
Snapshots:   0 total
Time:        $slow s, estimated 1 s
Ran all test suites.
"""
)


def jest_output(run: int, *, test: str = "adds 1 + 2", expected: str = '"three"') -> str:
    return JEST.substitute(
        slow=f"{run}.{run}12", ms=run * 3, test=test, expected=expected, root=f"/srv/w{run}"
    )


MYPY = Template(
    """\
$root/src/calc.py:12: error: $message  [return-value]
$root/src/calc.py:30: note: Revealed type is "builtins.int"
Found 1 error in 1 file (checked 4 source files)
"""
)


def mypy_output(
    run: int,
    *,
    message: str = 'Incompatible return value type (got "str", expected "int")',
) -> str:
    return MYPY.substitute(
        root=f"/tmp/loopctl/worktrees/calc-{run}f3a/loop/goal/t{run}", message=message
    )


RUFF = Template(
    """\
$root/calc.py:1:8: $code [*] `os` imported but unused
$root/calc.py:$line:1: E501 Line too long (104 > 100)
Found 2 errors.
[*] 1 fixable with the `--fix` option.
"""
)


def ruff_output(run: int, *, code: str = "F401") -> str:
    return RUFF.substitute(root=f"/tmp/wt{run}", code=code, line=40 + run)


UNITTEST = Template(
    """\
.F.E
======================================================================
ERROR: test_load (tests.test_io.LoadTest.test_load)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "$root/tests/test_io.py", line 12, in test_load
    data = load(self.path)
           ^^^^^^^^^^^^^^^
  File "$root/calc/io.py", line 40, in load
    raise BadHeader(path)
calc.io.BadHeader: bad header in $tmp/data.bin

======================================================================
FAIL: $test (tests.test_calc.CalcTest.$test)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "$root/tests/test_calc.py", line 8, in $test
    self.assertEqual(add(2, 2), 4)
AssertionError: 5 != 4

----------------------------------------------------------------------
Ran 4 tests in ${dur}s

FAILED (failures=1, errors=1)
"""
)


def unittest_output(run: int, *, test: str = "test_add") -> str:
    return UNITTEST.substitute(
        root=f"/home/u/.cache/loopctl/w{run}",
        tmp=f"/tmp/tmpk3j_{run}x9a",
        dur=f"0.00{run}",
        test=test,
    )


OUTPUTS: dict[str, Callable[[int], str]] = {
    "pytest": pytest_output,
    "go": go_output,
    "cargo": cargo_output,
    "jest": jest_output,
    "mypy": mypy_output,
    "ruff": ruff_output,
    "unittest": unittest_output,
}


# --- the key property ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(OUTPUTS))
def test_the_same_failure_in_another_run_has_the_same_digest(kind: str) -> None:
    make = OUTPUTS[kind]
    first, second = make(1), make(2)
    assert first != second  # the runs really differ in paths, times, addresses, pids
    assert fingerprint(1, first) == fingerprint(1, second)


@pytest.mark.parametrize("kind", sorted(OUTPUTS))
def test_a_different_exit_code_is_a_different_failure(kind: str) -> None:
    output = OUTPUTS[kind](1)
    assert fingerprint(1, output).digest != fingerprint(2, output).digest
    assert fingerprint(1, output).digest != fingerprint(None, output).digest


@pytest.mark.parametrize(
    ("kind", "base", "changed"),
    [
        ("pytest", pytest_output(1), pytest_output(2, test="test_buzz")),
        (
            "pytest",
            pytest_output(1),
            pytest_output(2, message="AssertionError: assert 'Buzz' == 'FizzBuzz'"),
        ),
        ("go", go_output(1), go_output(2, test="TestSub")),
        ("go", go_output(1), go_output(2, message="Add(2, 2) returned an error: overflow")),
        ("cargo", cargo_output(1), cargo_output(2, test="tests::other")),
        ("cargo", cargo_output(1), cargo_output(2, left='"baz"')),
        ("jest", jest_output(1), jest_output(2, test="adds 2 + 2")),
        ("jest", jest_output(1), jest_output(2, expected='"four"')),
        ("mypy", mypy_output(1), mypy_output(2, message='Name "x" is not defined')),
        ("ruff", ruff_output(1), ruff_output(2, code="F811")),
        ("unittest", unittest_output(1), unittest_output(2, test="test_sub")),
    ],
)
def test_a_different_test_or_message_is_a_different_failure(
    kind: str, base: str, changed: str
) -> None:
    assert fingerprint(1, base).digest != fingerprint(1, changed).digest, kind


def _run_pytest(project: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    # Its own base temp beside the project: a nested pytest left to the shared temp root
    # prunes other runs' numbered folders at start and exit, which can take minutes on a busy
    # machine (it did, in CI).
    basetemp = project.parent / f"{project.name}-basetemp"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    done = subprocess.run(
        [*argv, f"--basetemp={basetemp}"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    return done.returncode, done.stdout + done.stderr


def _write_project(root: Path, expected: str) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "tests" / "test_obj.py").write_text(
        "import os\n\n"
        "def test_obj(tmp_path):\n"
        "    target = tmp_path / f'out-{os.getpid()}.txt'\n"
        "    target.write_text('x')\n"
        f"    assert (object(), str(target)) == {expected!r}\n\n"
        "def test_ok():\n"
        "    assert True\n"
    )
    return root


def test_real_pytest_runs_in_two_folders_give_one_digest_and_a_changed_test_another(
    tmp_path: Path,
) -> None:
    # Two real runs: other folders, other pids, other object addresses, other durations.
    first = _run_pytest(_write_project(tmp_path / "one", "expected"))
    second = _run_pytest(_write_project(tmp_path / "elsewhere" / "two", "expected"))
    assert first[0] == second[0] == 1
    assert first[1] != second[1]
    assert fingerprint(*first) == fingerprint(*second)
    assert fingerprint(*first).failing_tests == ("tests/test_obj.py::test_obj",)

    changed = _run_pytest(_write_project(tmp_path / "three", "something else"))
    assert fingerprint(*changed).digest != fingerprint(*first).digest


# --- failing_tests -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        pytest.param(
            "FAILED tests/test_x.py::test_a - AssertionError: boom\n"
            "FAILED tests/test_x.py::TestK::test_b[1-2] - assert 1 == 2\n"
            "ERROR tests/test_y.py::test_c - fixture 'db' not found\n"
            "ERROR tests/test_broken.py - ModuleNotFoundError: No module named 'x'\n",
            (
                "tests/test_broken.py",
                "tests/test_x.py::TestK::test_b[1-2]",
                "tests/test_x.py::test_a",
                "tests/test_y.py::test_c",
            ),
            id="pytest-summary",
        ),
        pytest.param(
            "tests/test_x.py::test_a FAILED                                      [ 25%]\n"
            "tests/test_x.py::test_ok PASSED                                     [ 50%]\n"
            "tests/test_x.py::test_e ERROR                                       [ 75%]\n"
            "FAILED tests/test_x.py::test_a - assert 1 == 2\n",
            ("tests/test_x.py::test_a", "tests/test_x.py::test_e"),
            id="pytest-verbose",
        ),
        pytest.param(
            "[gw1] [ 50%] FAILED tests/test_x.py::test_a \n",
            ("tests/test_x.py::test_a",),
            id="pytest-xdist",
        ),
        pytest.param(
            "\x1b[31mFAILED\x1b[0m tests/test_calc.py::\x1b[1mtest_add\x1b[0m - assert 4 == 3\n",
            ("tests/test_calc.py::test_add",),
            id="pytest-colour",
        ),
        pytest.param(
            "FAIL: test_a (pkg.test_mod.Case.test_a)\nERROR: test_b (pkg.test_mod.Case)\n",
            ("pkg.test_mod.Case.test_a", "pkg.test_mod.Case.test_b"),
            id="unittest",
        ),
        pytest.param(
            go_output(1),
            ("TestAdd", "TestDiv", "TestParse", "TestParse/empty", "example.com/calc"),
            id="go",
        ),
        pytest.param(
            "--- FAIL: TestX (0.00s)\nFAIL\nFAIL\texample.com/pkg [build failed]\n",
            ("TestX", "example.com/pkg"),
            id="go-build-failed",
        ),
        pytest.param(cargo_output(1), ("tests::names",), id="cargo"),
        pytest.param(
            "test src/lib.rs - add (line 5) ... FAILED\ntest a::b ... ok\n",
            ("src/lib.rs - add (line 5)",),
            id="cargo-doctest",
        ),
        pytest.param(jest_output(1), ("adds 1 + 2", "src/sum.test.js"), id="jest"),
        pytest.param(
            " FAIL  src/basic.test.ts > Squared > squared 3ms\n   × adds 2ms\n",
            ("adds", "src/basic.test.ts > Squared > squared"),
            id="vitest",
        ),
        pytest.param(
            "TAP version 13\nnot ok 1 - adds\nok 2 - fine\nnot ok 3 - later # TODO\n",
            ("adds", "later"),
            id="node-tap",
        ),
        pytest.param("all good\n3 passed in 0.1s\n", (), id="nothing"),
    ],
)
def test_failing_tests_are_found_in_each_runners_output(
    output: str, expected: tuple[str, ...]
) -> None:
    assert failing_tests(output) == expected


def test_failing_tests_are_sorted_and_deduplicated() -> None:
    output = "--- FAIL: TestZ (0.00s)\n--- FAIL: TestA (0.01s)\n--- FAIL: TestZ (0.00s)\n"
    assert failing_tests(output) == ("TestA", "TestZ")


# --- normalise_line ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("\x1b[1m\x1b[31mE       assert 4 == 3\x1b[0m", "E assert N == N"),
        ("<object object at 0x7fcc590c5ca0>", "<object object at <addr>>"),
        ("run 123e4567-e89b-12d3-a456-426614174000 failed", "run <uuid> failed"),
        ("2024-05-01T12:03:04.123Z started", "<time> started"),
        ("2024-05-01 12:03:04,551 ERROR db", "<time> ERROR db"),
        ("[12:03:04] retry", "[<time>] retry"),
        ("finished in 0.53s", "finished in <dur>"),
        ("in 1.23 seconds", "in <dur>"),
        ("took 12ms", "took <dur>"),
        ("✓ adds (5 ms)", "✓ adds (<dur>)"),
        ("timeout after 1m2.5s", "timeout after <dur>"),
        ("/tmp/pytest-of-root/pytest-3/x/calc.py", "calc.py"),
        ("tests/test_x.py::test_a", "test_x.py::test_a"),
        ("./src/app.ts(3,7): error TS2322: bad", "app.ts(N,N): error TS2322: bad"),
        ("C:\\Users\\me\\calc.py:3: error", "calc.py:N: error"),
        ("calc.py:12:5: F401 unused", "calc.py:N:N: F401 unused"),
        ('File "x.py", line 12, in f', 'File "x.py", line N, in f'),
        ("error[E0308]: mismatched types", "error[E0308]: mismatched types"),
        ("cannot open tmpk3j_2x9a/cfg", "cannot open cfg"),
        ("cannot open tmpk3j_2x9a", "cannot open <tmp>"),
        ("mkdir /tmp/TestParse2849305723", "mkdir TestParseN"),
        ("worker pid 48213 exited", "worker pid N exited"),
        ("listening on 127.0.0.1:54321", "listening on N:N"),
        ("commit 59807616e1fa2540724bfbac14d7976d7e4a3860", "commit <hex>"),
        (
            "========= 3 failed, 2 passed, 1 skipped in 0.12s =========",
            "=== 3 failed, 2 passed, 1 skipped in <dur> ===",
        ),
        ("Ran 4 tests in 0.003s", "Ran 4 tests in <dur>"),
        ("  too   much\t space  ", "too much space"),
    ],
)
def test_normalise_line(line: str, expected: str) -> None:
    assert normalise_line(line) == expected


def test_normalise_line_hides_the_pytest_rule_width() -> None:
    # pytest pads the summary to the terminal width, so a longer duration shortens the padding.
    assert normalise_line(_rule("1 failed in 0.05s")) == normalise_line(_rule("1 failed in 10.5s"))


def test_normalise_line_is_quick_on_a_huge_pathological_line() -> None:
    line = "a//" * 100_000 + " Error"
    assert normalise_line(line) == "a//" * 666 + "a/"


def test_normalise_line_keeps_counts_apart() -> None:
    assert normalise_line("== 3 failed in 0.1s ==") != normalise_line("== 2 failed in 0.1s ==")


# --- error_lines -----------------------------------------------------------------------------


def test_error_lines_picks_the_lines_that_look_like_errors() -> None:
    output = (
        "collecting ...\n"
        "tests/test_a.py ..F.                                         [ 40%]\n"
        "E       AssertionError: boom\n"
        "just some log line\n"
        "src/lib.rs:3:5: mismatched types\n"
        "thread 'main' panicked at src/main.rs:2:5:\n"
        "   0: core::panicking::assert_failed_inner\n"
        "      at Object.<anonymous> (/srv/app/a.test.js:3:9)\n"
        "F401 [*] `os` imported but unused\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/app/x.py", line 3, in <module>\n'
        "    main()\n"
        "mypkg.Boom: kaboom\n"
    )
    assert error_lines(output) == (
        "E AssertionError: boom",
        "lib.rs:N:N: mismatched types",
        "thread 'main' panicked at main.rs:N:N:",
        "F401 [*] `os` imported but unused",
        "mypkg.Boom: kaboom",
    )


def test_error_lines_deduplicates_in_order_and_respects_the_limit() -> None:
    output = "".join(f"ValueError: bad value at /tmp/x/{i}.py:{i}\n" for i in range(5))
    output += "TypeError: one\nKeyError: two\nTypeError: one\n"
    assert error_lines(output) == (
        "ValueError: bad value at N.py:N",
        "TypeError: one",
        "KeyError: two",
    )
    many = "".join(f"Error: case {chr(ord('a') + i)}\n" for i in range(26))
    assert len(error_lines(many)) == 20
    assert error_lines(many, limit=3) == ("Error: case a", "Error: case b", "Error: case c")


def test_error_lines_of_clean_output_is_empty() -> None:
    assert error_lines("ok  \texample.com/calc\t0.01s\n\n") == ()


# --- the Fingerprint value ----------------------------------------------------------------------


def test_fingerprint_fields_and_digest_shape() -> None:
    fp = fingerprint(1, pytest_output(1))
    assert fp.exit_code == 1
    assert fp.failing_tests == ("tests/test_fizz.py::test_config", "tests/test_fizz.py::test_fizz")
    assert "E AssertionError: assert 'Fizz' == 'FizzBuzz'" in fp.error_lines
    assert re.fullmatch(r"[0-9a-f]{12}", fp.digest)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fp.digest = "x"  # type: ignore[misc]


def test_short_names_the_digest_exit_code_and_first_failure() -> None:
    assert (
        fingerprint(1, pytest_output(1))
        .short()
        .endswith(" exit 1: failing tests/test_fizz.py::test_config (+1 more)")
    )
    fp = fingerprint(None, "ValueError: " + "x" * 200)
    assert fp.short().startswith(f"{fp.digest} no exit code: ValueError: x")
    assert fp.short().endswith("…")
    assert Fingerprint(0, (), (), "abc").short() == "abc exit 0: no error lines"


# --- edges mutation testing found unchecked (issue 18) ------------------------------------------

STABLE_OUTPUT = (
    "tests/test_x.py:3: AssertionError: größer\nFAILED tests/test_x.py::test_a - assert 1 == 2\n"
)


def test_digests_are_stable_across_versions() -> None:
    # Digests are stored in the log and compared with later runs' (the identical-failure rule,
    # a run resumed by a newer loopctl): the canonical form behind them must never drift.
    assert fingerprint(1, STABLE_OUTPUT).digest == "94d1737d591d"
    assert fingerprint(None, "").digest == "bd85f5481c7e"


def test_a_traceback_frame_indented_by_one_space_is_not_its_final_line() -> None:
    output = (
        "Traceback (most recent call last):\n"
        ' File "x.py", line 1, in <module>\n'
        "  raise RuntimeError\n"
        "RuntimeError: boom\n"
    )
    assert error_lines(output) == ("raise RuntimeError", "RuntimeError: boom")


@pytest.mark.parametrize(("length", "shown"), [(80, 80), (81, 80)])
def test_a_long_error_line_is_cut_to_80_characters_in_the_short_form(
    length: int, shown: int
) -> None:
    line = "error: " + "x" * (length - len("error: "))
    found = fingerprint(1, line)
    assert len(found.error_lines[0]) == length
    what = found.short().split(": ", 1)[1]
    assert len(what) == shown
    assert what.endswith("…") is (length > 80)
    assert what.startswith("error: xxx")


def test_progress_lines_are_never_error_lines_even_when_they_say_failed() -> None:
    output = (
        "tests/test_a.py::test_x FAILED                                   [ 50%]\n"
        "tests/test_a.py::test_y PASSED  [100%]\n"
        " 45%|#### | error downloading\n"
        "E   AssertionError: boom\n"
    )
    assert error_lines(output) == ("E AssertionError: boom",)


def test_an_empty_pytest_e_line_does_not_end_the_scan() -> None:
    output = "E\nE   \nE   ValueError: first\nsomething: error: second\n"
    assert error_lines(output) == ("E ValueError: first", "something: error: second")


def test_only_the_last_line_of_a_traceback_is_its_final_line() -> None:
    output = (
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "E\n"
        "ValueError: boom\n"
        "collected 3 items\n"
        "Ran the rest\n"
    )
    # "E" (pytest's empty marker) is never an error line itself; what follows the traceback is
    # ordinary output again, kept only where it looks like an error.
    assert error_lines(output) == ("ValueError: boom",)


def test_the_short_form_names_the_first_error_line() -> None:
    found = fingerprint(2, "error: first thing\nerror: second thing\n")
    assert found.error_lines == ("error: first thing", "error: second thing")
    assert found.short() == f"{found.digest} exit 2: error: first thing"


def test_a_line_number_before_a_count_word_is_still_a_place_not_a_count() -> None:
    """A diagnostic that names its line just before a word that also counts ("line 3 error:
    ..."): the failure moved down a line is the same failure. Kills the line-word pattern
    changed (the number would then stay, read as a count)."""
    before = fingerprint(1, "config.toml: line 3 error: expected '='\n")
    after = fingerprint(1, "config.toml: line 4 error: expected '='\n")
    assert before.error_lines == ("config.toml: line N error: expected '='",)
    assert before.digest == after.digest


def test_a_traceback_that_is_not_pythons_usual_one_is_an_error_line() -> None:
    """faulthandler's dump (a hung test killed, a crash) opens with "Traceback (most recent
    call first):", not the usual header: the line itself says an error happened. Kills the
    error-word pattern changed at its end (`Traceback`)."""
    output = 'Traceback (most recent call first):\n  File "/srv/app/x.py", line 3 in main\n'
    assert error_lines(output) == ("Traceback (most recent call first):",)


def test_short_names_a_single_failing_test_alone() -> None:
    """Kills the "(+N more)" suffix's empty alternative changed: one failing test is named
    with nothing after it."""
    fp = Fingerprint(1, ("tests/test_a.py::test_x",), (), "abc")
    assert fp.short() == "abc exit 1: failing tests/test_a.py::test_x"


def test_pytests_explanation_lines_are_error_lines_without_an_error_word() -> None:
    # Two failures of one assertion differ only in pytest's `E` diff lines: they are told apart.
    failed = "E       AssertionError: assert 'Fizz' == 'FizzBuzz'\nE         - FizzBuzz\n"
    fizz = failed + "E         + Fizz\n"
    buzz = failed + "E         + Buzz\n"
    assert error_lines(fizz) == (
        "E AssertionError: assert 'Fizz' == 'FizzBuzz'",
        "E - FizzBuzz",
        "E + Fizz",
    )
    assert error_lines(buzz) != error_lines(fizz)
    # An indented line of other output with no error word is not one.
    assert error_lines("    - FizzBuzz\n") == ()

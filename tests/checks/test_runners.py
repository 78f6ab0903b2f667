"""checks.runners: which commands are armed and how, what a report says, and how it is read.

Real runs of the reporters (pytest, `python -m unittest`) in a real folder: the report's counts
match the printed summary for an honest run, a pytest.py in the working folder does not replace
the runner, and a report folder whose file is a link is not followed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from loopctl.checks import runners
from loopctl.checks.counts import TestCounts, parse_test_counts, report_counts, unproven_pass
from loopctl.checks.runner_detection import runner_protect

PY = sys.executable


@pytest.mark.parametrize(
    ("argv", "runner", "armed_prefix"),
    [
        ((PY, "-m", "pytest", "-q"), "pytest", (PY, "-m", "loopctl_pytest_main", "-p")),
        ((PY, "-B", "-X", "dev", "-m", "pytest"), "pytest", (PY, "-B", "-X", "dev", "-m")),
        (("pytest", "-q"), "pytest", ("pytest", "-p", "loopctl_pytest_report", "-q")),
        (("uv", "run", "pytest"), "pytest", ("uv", "run", "pytest", "-p")),
        ((PY, "-m", "unittest", "discover"), "unittest", (PY, "-m", "loopctl_unittest_main")),
        (("npx", "--no", "jest"), "jest", ("npx", "--no", "jest", "--", "--json")),
        (("jest", "--ci"), "jest", ("jest", "--ci", "--json")),
    ],
)
def test_a_known_runner_invocation_is_armed(
    argv: tuple[str, ...], runner: str, armed_prefix: tuple[str, ...]
) -> None:
    armed = runners.arm(argv, {"PYTHONPATH": "/somewhere"})
    assert armed is not None
    try:
        assert armed.runner == runner
        assert armed.argv[: len(armed_prefix)] == armed_prefix
        assert armed.folder.is_dir()
        assert not any(armed.folder.iterdir())
        if runner != "jest":
            assert armed.env["PYTHONPATH"] == f"{runners.REPORTERS}{os.pathsep}/somewhere"
            assert armed.env[runners.REPORT_VARIABLE] == str(armed.folder / "report.json")
            # Only `-m` puts the working folder first: only then is PYTHONSAFEPATH needed.
            assert ("PYTHONSAFEPATH" in armed.env) == ("-m" in argv)
        else:
            # jest writes its own report (the path is on its argv): the check's environment
            # stays the user's, PYTHONPATH as set, for any Python program its tests start.
            assert armed.env == {}
    finally:
        runners.disarm(armed)
    assert not armed.folder.exists()


@pytest.mark.parametrize(
    "argv",
    [
        (PY, "-c", "import pytest"),
        (PY, "tools/run_tests.py"),
        ("make", "test"),
        ("npm", "test"),  # what the script runs is the project's: left as written
        ("npx", "--no", "jest", "--json"),  # the user's own report
        ("go", "test", "./..."),
        ("cargo", "test"),
    ],
)
def test_other_commands_run_as_written(argv: tuple[str, ...]) -> None:
    assert runners.arm(argv, {}) is None


def test_with_the_defence_off_nothing_is_armed_or_protected(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert "**/pytest.py" in runner_protect((PY, "-m", "pytest"), tmp_path)
    monkeypatch.setattr(runners, "DEFENCE", False)
    assert runners.arm((PY, "-m", "pytest"), {}) is None
    assert "**/pytest.py" not in runner_protect((PY, "-m", "pytest"), tmp_path)


@pytest.mark.parametrize(
    ("runner", "names"),
    [
        ("pytest", ("**/pytest.py", "**/_pytest/**", "**/pluggy/**", "**/sitecustomize.py")),
        ("unittest", ("**/unittest.py", "**/usercustomize.py", "**/*.pth")),
        ("npm", ("package.json", "node_modules/.bin/**")),
        ("cargo", ("build.rs", ".cargo/**")),
        ("go", ("go.work", "go.mod")),
    ],
)
def test_each_runner_has_one_table_of_what_would_replace_it(
    runner: str, names: tuple[str, ...]
) -> None:
    assert set(names) <= set(runners.shadow_protect(runner))


def project(folder: Path) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (folder / "tests" / "__init__.py").write_text("")
    (folder / "tests" / "test_calc.py").write_text(
        "import unittest\n\nfrom calc import add\n\n\n"
        "class TestAdd(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
        "    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n\n"
        "    @unittest.skip('later')\n    def test_later(self):\n        pass\n"
    )
    return folder


def armed_run(argv: tuple[str, ...], cwd: Path) -> tuple[str, runners.Report]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    armed = runners.arm(argv, env)
    assert armed is not None
    try:
        done = subprocess.run(
            armed.argv, cwd=cwd, env={**env, **armed.env}, capture_output=True, text=True
        )
        return done.stdout + done.stderr, runners.read_report(armed)
    finally:
        runners.disarm(armed)


@pytest.mark.parametrize(
    ("argv", "runner"),
    [
        ((PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"), "pytest"),
        ((PY, "-m", "unittest"), "unittest"),
    ],
)
def test_an_honest_runs_report_matches_its_summary(
    tmp_path: Path, argv: tuple[str, ...], runner: str
) -> None:
    output, report = armed_run(argv, project(tmp_path))

    assert report.state == "ok", output
    printed = parse_test_counts(runner, output)
    assert report_counts(report) == printed == TestCounts(1, 1, 1, 0)
    # The path was the reporter's alone: no test saw it in its environment.
    assert runners.REPORT_VARIABLE not in output


def test_a_pytest_module_in_the_working_folder_does_not_replace_the_runner(
    tmp_path: Path,
) -> None:
    folder = project(tmp_path)
    (folder / "pytest.py").write_text("print('1 passed in 0.01s')\n")

    output, report = armed_run((PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"), folder)

    assert report.state == "ok"
    assert report_counts(report) == TestCounts(1, 1, 1, 0)
    assert "1 failed, 1 passed, 1 skipped" in output


@pytest.mark.parametrize("depth", ["", "tests/"])
def test_a_reporter_of_the_same_name_in_the_working_folder_writes_nothing(
    tmp_path: Path, depth: str
) -> None:
    """`python -m pytest` puts the working folder first on sys.path once pytest is in; the
    reporter `-p` names is imported before that, so a look-alike there never runs (and its
    name is protected at any depth, as it would run from an import root)."""
    folder = project(tmp_path)
    forged = '{"passed": 2, "failed": 0, "skipped": 0, "errors": 0}'
    (folder / depth / "loopctl_pytest_report.py").write_text(
        "import os\n"
        "path = os.environ.pop('LOOPCTL_TEST_REPORT', '')\n"
        f"if path:\n    open(path, 'w').write({forged!r})\n"
        "print('THE LOOK-ALIKE RAN')\n"
    )

    output, report = armed_run((PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"), folder)

    assert "THE LOOK-ALIKE RAN" not in output
    assert report.state == "ok"
    assert report_counts(report) == TestCounts(1, 1, 1, 0)
    assert "**/loopctl_pytest_report.py" in runners.shadow_protect("pytest")


def test_a_report_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    armed = runners.arm((PY, "-m", "pytest"), {})
    assert armed is not None
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"runner": "pytest", "counts": {"passed": 9}}))
    try:
        (armed.folder / "report.json").symlink_to(target)
        assert runners.read_report(armed).state == "unreadable"
    finally:
        runners.disarm(armed)
    assert target.is_file()  # removing the folder removed the link, not what it names


def test_a_link_planted_at_the_report_folder_itself_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the sandbox off a check runs as the user, in the host's temporary folder, where
    its report folder lies: a test of the project moves that folder away and leaves a link in
    its place to a folder of its own with a forged report. loopctl reads the report from the
    folder it made, never through that link: unreadable, not the forged counts."""
    temp = tmp_path / "temp"  # where loopctl makes the report folder: the check's /tmp
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    folder = project(tmp_path / "project")
    (folder / "tests" / "test_plant.py").write_text(
        "import glob, json, os\n\n\n"
        "def test_plant():\n"
        f"    (report,) = glob.glob({str(temp)!r} + '/loopctl-report-*')\n"
        f"    forged = {str(tmp_path / 'forged')!r}\n"
        "    os.mkdir(forged)\n"
        "    with open(os.path.join(forged, 'report.json'), 'w') as out:\n"
        "        json.dump({'runner': 'pytest', 'counts': {'passed': 7}}, out)\n"
        "    os.rename(report, report + '-moved')\n"
        "    os.symlink(forged, report)\n"
    )

    output, report = armed_run((PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"), folder)

    assert "1 failed, 2 passed, 1 skipped" in output  # the planting test ran and passed
    assert report.state == "unreadable", report
    # Disarming removed the link, not the folder it names.
    assert (tmp_path / "forged" / "report.json").is_file()
    (left,) = temp.iterdir()  # the folder it moved away, which held the honest report
    assert left.name.endswith("-moved")


@pytest.mark.parametrize(
    ("content", "state"),
    [
        (None, "missing"),
        (b"", "unfinished"),
        (b"not json", "unreadable"),
        (b'{"runner": "unittest", "counts": {}}', "unreadable"),
        (b'{"runner": "pytest", "counts": {"passed": 2}}', "ok"),
    ],
)
def test_what_a_report_file_says(content: bytes | None, state: str) -> None:
    armed = runners.arm((PY, "-m", "pytest"), {})
    assert armed is not None
    try:
        if content is not None:
            (armed.folder / "report.json").write_bytes(content)
        assert runners.read_report(armed).state == state
    finally:
        runners.disarm(armed)


ARGV = (PY, "-m", "pytest", "-q")


@pytest.mark.parametrize(
    ("output", "report", "reason"),
    [
        # A forged line after the real one: the report says otherwise.
        (
            "1 failed in 0.1s\n1 passed in 0.01s\n",
            runners.Report("ok", {"failed": 1}),
            "the report and the output disagree",
        ),
        ("1 passed in 0.01s\n", runners.Report("unfinished", {}), "ended before it finished"),
        ("1 passed in 0.01s\n", runners.Report("missing", {}), "it wrote no report"),
        ("", runners.Report("ok", {"failed": 1}), "exited 0 but printed no test summary"),
        ("1 passed in 0.01s\n", runners.Report("ok", {"passed": 1}), None),
    ],
)
def test_the_report_decides_with_the_printed_summary(
    tmp_path: Path, output: str, report: runners.Report, reason: str | None
) -> None:
    found = unproven_pass(ARGV, output, None, baselined=False, repo=tmp_path, report=report)
    if reason is None:
        assert found is None
    else:
        assert found is not None
        # The verdict's source in the log: what the counts showed, not a weakened run.
        assert found[0] == "counts"
        assert reason in found[1]


def test_a_forged_summary_is_quoted_beside_what_the_report_counts(tmp_path: Path) -> None:
    # The code under test printed a green line after pytest's own; the report has the truth.
    output = "1 failed, 1 error in 0.1s\n1 passed in 0.01s\n"
    report = runners.Report("ok", {"failed": 1, "error": 1})

    found = unproven_pass(ARGV, output, None, baselined=False, repo=tmp_path, report=report)

    assert found is not None
    assert found[1].endswith(
        "printed a summary of 1 passed, 0 failed, 0 skipped, 0 errors, but loopctl's report of"
        " the run counts 0 passed, 1 failed, 0 skipped, 1 error"
    ), found


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        # unittest's counters: errors and expected failures count, not only failures.
        (
            {"run": 6, "failures": 1, "errors": 1, "skipped": 1, "expected failures": 1},
            TestCounts(passed=2, failed=1, skipped=2, errors=1),
        ),
        # pytest's words: an xfailed test proves nothing, it counts as skipped.
        ({"passed": 1, "xfailed": 2, "skipped": 1}, TestCounts(1, 0, 3, 0)),
        # jest's words: a `test.todo` ran nothing either.
        ({"passed": 1, "todo": 2, "failed": 1}, TestCounts(1, 1, 2, 0)),
    ],
)
def test_what_a_finished_report_counts(counts: dict[str, int], expected: TestCounts) -> None:
    assert report_counts(runners.Report("ok", counts)) == expected
    assert report_counts(runners.Report("unfinished", counts)) is None

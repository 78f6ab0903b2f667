"""`-v` streams the agent's output while it works; `-q` prints only the outcome.

Real `loopctl` processes with stderr to a file (not a terminal: plain lines): a maker that talks
and then blocks proves the lines arrive while it runs; the fake `codex` CLI proves its JSON event
stream is rendered as readable lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.backends import install_fake_clis
from support.cli import assert_clean_exit, run_loopctl
from support.processes import Proc, running_procs, spawn, wait_for
from support.repos import FAST_CHECK, commit_all, make_project, toml_value, write_config, write_loop

TASK = "tests-green"


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    yield from running_procs()


def test_verbose_goal_shows_the_agents_lines_while_it_still_runs(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    release = tmp_path / "release"
    make_project(repo, "talks_then_waits.py", release)
    goal = spawn(procs, repo, tmp_path, "goal", "tests green", "-v")

    seen = wait_for(
        lambda: "reading calc.py" in goal.stderr_path.read_text() and goal.stderr_path.read_text(),
        "the agent's first line while it is blocked",
    )
    assert goal.popen.poll() is None  # the agent is still waiting: this is live, not replayed
    release.touch()
    assert goal.wait() == 0, goal.output

    assert f"  {TASK} maker| reading calc.py" in seen
    assert f"  {TASK} maker| a warning on stderr" in seen
    err = goal.stderr_path.read_text()
    # Every line of the turn is shown before the view reports the turn's end.
    assert err.index(f"{TASK} maker| fixed add") < err.index("maker maker finished")
    assert f"{TASK}: done after 1 attempt(s)" in goal.stdout_path.read_text()


def test_verbose_renders_a_cli_json_stream_and_up_prefixes_the_loop(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    make_project(repo)
    (repo / "agents" / "codex-maker.toml").write_text(
        'description = "codex"\nbackend = "codex"\n\n[sandbox]\nwrite = ["~/.fake-cli"]\n'
    )
    write_config(
        repo,
        'version = 1\n\n[defaults]\nmaker = "codex-maker"\n\n'
        f'[conditions]\n"tests green" = {toml_value(FAST_CHECK)}\n',
    )
    write_loop(repo, "fixit", 'goal = "tests green"\nprompt = "Fix add() in calc.py"\n')
    commit_all(repo, "codex maker")

    done = run_loopctl(repo, "run", "fixit", "--once", "--verbose")

    assert_clean_exit(done, 0)
    assert "  main maker| edit update calc.py" in done.stderr, done.stderr
    assert "  main maker| turn done (" in done.stderr
    assert '{"type"' not in done.stderr  # rendered, never the raw events


def test_quiet_prints_only_the_outcome_and_both_flags_are_refused(repo: Path) -> None:
    make_project(repo, "fixer.py")

    quiet = run_loopctl(repo, "goal", "tests green", "-q")
    both = run_loopctl(repo, "goal", "tests green", "-q", "-v")

    assert_clean_exit(quiet, 0)
    assert quiet.stderr == ""
    assert f"{TASK}: done after 1 attempt(s)" in quiet.stdout
    assert_clean_exit(both, 2)
    assert both.stderr.strip() == "loopctl: give -v/--verbose or -q/--quiet, not both"

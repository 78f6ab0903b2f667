"""A FIFO the agent leaves where loopctl, unconfined and after the turn, reads a file.

open(2) of a FIFO waits for a writer, and none ever comes: a plain read held the whole loop, the
run, its lock and every task behind it, for ever, unattended. The hostile maker
(agents/plants_fifo.py) fixes the bug and replaces the files its arguments name with FIFOs. The
run must end, with the verdict it earned, in the time a run takes (the subprocess's timeout is
only there to turn a hang into a failure).
"""

from __future__ import annotations

import stat
from pathlib import Path

from support.cli import run_loopctl
from support.journal import events
from support.repos import git, make_project, make_repo


def project(repo: Path, *planted: str) -> Path:
    make_project(make_repo(repo), "plants_fifo.py", *planted, check=["/bin/false"])
    (repo / "notes.txt").write_text("the human's notes\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "notes")
    return repo


def test_in_place_a_fifo_over_a_tracked_file_ends_the_run_on_its_checks(tmp_path: Path) -> None:
    """In place, what changed since the run began is hashed before each verdict (to tell the
    maker's edits from the human's): the FIFO over notes.txt held loopctl there."""
    planted = "notes.txt"
    repo = project(tmp_path / "repo", planted)

    done = run_loopctl(repo, "goal", "tests green", "--in-place", "--max-iterations", "2")

    assert done.returncode == 1, done.stdout + done.stderr
    assert "check `/bin/false` exited 1" in done.stdout + done.stderr  # judged, both times
    assert len(events(repo, "attempt_started", "tests-green")) == 2
    assert stat.S_ISFIFO((repo / planted).lstat().st_mode)  # the agent's, left as it is


def test_in_a_worktree_a_fifo_over_a_protected_test_fails_the_attempt_with_why(
    tmp_path: Path,
) -> None:
    """In a worktree the snapshot meets it first: git refuses to add it, and the attempt
    fails saying so, instead of waiting."""
    repo = project(tmp_path / "repo", "tests/test_calc.py")

    done = run_loopctl(repo, "goal", "tests green", "--max-iterations", "1")

    assert done.returncode == 1, done.stdout + done.stderr
    assert "can only add regular files" in done.stdout + done.stderr

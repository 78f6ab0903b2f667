"""A CLI that reads like `gh`: help panels and examples, one notation, completion, colours,
`log` refusing unknown loops, `worktrees` naming interrupted tasks, `init` claiming only writes.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events
from support.processes import Proc, read_pid, running_procs, spawn, wait_for
from support.repos import PY, commit_all, make_project, write_loop
from typer.testing import CliRunner

from loopctl.cli.app import app
from loopctl.cli.help_format import EXAMPLES, PANELS, all_paths
from loopctl.cli.render import outcome_style

LOOP = 'goal = "tests green"\nprompt = "Fix add() in calc.py"\n'
COLOUR = re.compile(r"\x1b\[(?:\d+;)*(?:3[0-8]|9[0-7])(?:;\d+)*m")  # foreground colours


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    yield from running_procs()


def _click_app() -> object:
    import typer

    return typer.main.get_command(app)


def test_top_level_help_groups_commands_in_panels(tmp_path: Path) -> None:
    done = subprocess.run(
        [PY, "-m", "loopctl", "--help"], capture_output=True, text=True, cwd=tmp_path, check=False
    )

    assert done.returncode == 0, done.stderr
    headings = [line[:-1] for line in done.stdout.splitlines() if re.fullmatch(r"[A-Z]\w+:", line)]
    assert headings == ["Options", *PANELS, "Examples"]
    listed = re.findall(r"^  ([a-z][a-z-]*)  ", done.stdout, re.M)
    assert sorted(listed) == sorted(name for names in PANELS.values() for name in names)


@pytest.mark.parametrize("path", all_paths(_click_app()))
def test_every_command_has_examples_and_one_argument_notation(path: str) -> None:
    result = CliRunner().invoke(app, [*path.split(), "--help"])

    assert result.exit_code == 0, result.output
    text = result.stdout
    usage = text.splitlines()[0]
    assert "{" not in usage
    assert "<" not in text  # no `<str>` / `<float range>` metavars
    for piece in usage.split("[OPTIONS]", 1)[1].split():
        assert piece == piece.upper(), usage  # NAME, [NAME], NAME|RUN, COMMAND [ARGS]...
    examples = text.split("Examples:\n", 1)[1].splitlines()
    assert examples, text
    assert list(EXAMPLES[path]) == [line.strip() for line in examples if line.strip()]
    assert all(line.strip().startswith(f"loopctl {path}".strip()) for line in examples if line)


def _complete(repo: Path, words: str) -> list[str]:
    env = {
        **os.environ,
        "_LOOPCTL_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
    }
    done = subprocess.run(
        [PY, "-m", "loopctl"], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout.split()


def test_completion_offers_loops_runs_inbox_ids_and_agents(repo: Path, tmp_path: Path) -> None:
    make_project(repo, "never_fixes.py")
    write_loop(repo, "nightly", LOOP)
    write_loop(repo, "docs", LOOP)
    commit_all(repo, "loops")
    failed = run_loopctl(repo, "run", "nightly", "--once")
    assert_clean_exit(failed, 1)
    (run,) = {e.run for e in events(repo, "tick_started")}
    (item,) = [e.data["id"] for e in events(repo, "inbox_opened")]

    assert _complete(repo, "loopctl run n") == ["nightly"]
    assert _complete(repo, "loopctl log ") == ["docs", "nightly"]
    assert _complete(repo, "loopctl stop ") == ["docs", "nightly", str(run)]
    assert _complete(repo, "loopctl replay 2") == [str(run)]
    assert _complete(repo, "loopctl inbox show ") == [item]
    assert _complete(repo, "loopctl agents test m") == ["maker"]
    assert _complete(repo, "loopctl goal x --agent ") == ["maker"]
    assert _complete(tmp_path, "loopctl run ") == []  # outside a repository: nothing, no error


def test_log_refuses_an_unknown_loop_with_a_suggestion(repo: Path) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "nightly", LOOP)
    write_loop(repo, "gone", LOOP)
    commit_all(repo, "loops")
    assert_clean_exit(run_loopctl(repo, "run", "gone", "--once"), 0)
    (repo / ".loop" / "loops" / "gone.toml").unlink()

    typo = run_loopctl(repo, "log", "nightyl")
    deleted = run_loopctl(repo, "log", "gone")
    known = run_loopctl(repo, "log", "nightly")

    assert_clean_exit(typo, 2)
    assert typo.stderr.splitlines() == [
        "loopctl: no loop 'nightyl' (loops: gone, nightly); did you mean 'nightly'?"
    ]
    assert typo.stdout == ""
    assert_clean_exit(deleted, 0)  # its history is still readable
    assert "gone/" in deleted.stdout
    assert_clean_exit(known, 0)


def _on_a_terminal(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run loopctl with stdout on a pseudo-terminal; what it printed there."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [PY, "-m", "loopctl", *args],
        cwd=repo,
        stdout=follower,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            proc.kill()
            pytest.fail("no output from loopctl on the terminal")
        try:
            data = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process is done
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode("utf-8", "replace")


def test_an_interrupted_task_shows_as_interrupted_with_its_resume_command_in_colour(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    marker, release = tmp_path / "maker-started", tmp_path / "release"
    make_project(repo, "slow_fixer.py", marker, release)
    write_loop(repo, "slow", LOOP)
    commit_all(repo, "loop")
    runner = spawn(procs, repo, tmp_path, "run", "slow", "--once")
    wait_for(lambda: read_pid(marker), "the maker to start")
    assert runner.signal(signal.SIGTERM) == 130

    listed = run_loopctl(repo, "worktrees")
    as_json = json.loads(run_loopctl(repo, "worktrees", "--json").stdout)["worktrees"]
    coloured = _on_a_terminal(repo, "worktrees")
    plain = _on_a_terminal(repo, "worktrees", env={"NO_COLOR": "1"})

    assert_clean_exit(listed, 0)
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith("slow ")]
    assert row.split()[3] == "interrupted"
    assert "slow/main was interrupted; resume it with: loopctl run slow --once" in listed.stdout
    assert as_json[0]["task_status"] == "interrupted"
    assert as_json[0]["resume"] == "loopctl run slow --once"
    assert "\x1b[33minterrupted" in coloured  # yellow: neither passed nor failed
    assert "interrupted" in plain
    assert COLOUR.search(coloured)
    assert not COLOUR.search(plain)  # NO_COLOR: bold headers may stay, colours go

    release.touch()
    resumed = run_loopctl(repo, *as_json[0]["resume"].split()[1:])  # the command it printed
    assert_clean_exit(resumed, 0)
    assert len(events(repo, "run_resumed")) == 1
    listed_after = json.loads(run_loopctl(repo, "worktrees", "--json").stdout)["worktrees"]
    # Done: its worktree is gone (keep = on_failure: parked in the pool) or listed as done.
    after = [r for r in listed_after if r["kind"] == "task"]
    assert all(r["task_status"] == "done" and r["resume"] is None for r in after)
    assert [r["kind"] for r in listed_after] == ["pooled"]
    assert "interrupted" not in run_loopctl(repo, "worktrees").stdout


@pytest.mark.parametrize(
    ("header", "cell", "style"),
    [
        ("TASK STATE", "done", "green"),
        ("STATE", "failed", "red"),
        ("LAST RUN", "failed (2 tasks)", "red"),
        ("TASK STATE", "interrupted", "yellow"),
        ("STATUS", "running", "yellow"),
        ("SUMMARY", "failed to build", None),  # not an outcome column
        ("STATE", "idle", None),
    ],
)
def test_outcome_colours(header: str, cell: str, style: str | None) -> None:
    assert outcome_style(header, cell) == style


def test_init_never_claims_a_file_it_skipped(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": f"{empty}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    mine = repo / "agents" / "claude-maker.toml"
    mine.parent.mkdir()
    mine.write_text('description = "mine"\nbackend = "claude"\n')
    (repo / ".loop").mkdir()
    (repo / ".loop" / "config.toml").write_text('version = 1\n[defaults]\nmaker = "mine"\n')

    first = subprocess.run(
        [PY, "-m", "loopctl", "init"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    second = subprocess.run(
        [PY, "-m", "loopctl", "init"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert_clean_exit(first, 0)
    assert "skipped  .loop/config.toml (already exists)" in first.stdout
    assert "default maker" not in first.stdout
    assert mine.read_text() == 'description = "mine"\nbackend = "claude"\n'
    assert_clean_exit(second, 0)
    assert "created" not in second.stdout
    assert "nothing written: every file init would write already exists" in second.stdout

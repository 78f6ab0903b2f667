"""`loopctl new`: a loop file written with tomli-w, loaded by loopctl's own loader, then run."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.journal import events
from support.repos import make_project


def loops(repo: Path) -> list[str]:
    folder = repo / ".loop" / "loops"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_new_writes_a_loop_that_loads_and_runs(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(repo, "fixer.py")

    result = invoke(monkeypatch, repo, "new", "ci", "--every", "5m", "--goal", "tests green")

    assert result.exit_code == 0, result.output
    written = tomllib.loads((repo / ".loop" / "loops" / "ci.toml").read_text())
    assert written == {"goal": "tests green", "every": "5m"}
    assert "created .loop/loops/ci.toml" in result.stdout
    assert "loopctl run ci --once" in result.stdout
    assert "every 5m" in result.stdout
    listed = invoke(monkeypatch, repo, "validate")
    assert listed.exit_code == 0, listed.output
    # The loop it wrote is a real one: a tick runs the maker until the goal holds.
    done = run_loopctl(repo, "run", "ci", "--once")
    assert_clean_exit(done, 0)
    finished = events(repo, "agent_finished")
    assert [e.loop for e in finished] == ["ci"]


def test_new_writes_cron_prompt_and_agent(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(repo, "fixer.py", agent="fixer")
    args = ["--cron", "0 * * * *", "--prompt", 'Fix "add"\nplease', "--agent", "fixer"]

    result = invoke(monkeypatch, repo, "new", "hourly", *args)

    assert result.exit_code == 0, result.output
    written = tomllib.loads((repo / ".loop" / "loops" / "hourly.toml").read_text())
    assert written == {
        "prompt": 'Fix "add"\nplease',
        "cron": "0 * * * *",
        "maker": {"agent": "fixer"},
    }
    assert "cron 0 * * * *" in result.stdout


def test_new_refuses_to_overwrite(repo: Path) -> None:
    make_project(repo, "fixer.py")
    existing = repo / ".loop" / "loops" / "ci.toml"
    existing.parent.mkdir(parents=True, exist_ok=True)
    existing.write_text('prompt = "mine"\n')

    done = run_loopctl(repo, "new", "ci", "--goal", "tests green")

    assert_clean_exit(done, 1)
    assert done.stderr.strip().splitlines() == [
        "loopctl: .loop/loops/ci.toml already exists: edit it, or pick another name"
    ]
    assert existing.read_text() == 'prompt = "mine"\n'


@pytest.mark.parametrize("name", ["bad name", "../escape", "-x", "goal", "a" * 65, "x.y"])
def test_a_bad_name_is_refused_before_anything_is_written(
    repo: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    make_project(repo, "fixer.py")

    result = invoke(monkeypatch, repo, "new", name, "--goal", "tests green")

    assert result.exit_code == 2, result.output
    assert loops(repo) == []
    assert not (repo / ".loop" / "escape.toml").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--every", "5q", "--goal", "g"], "--every: invalid duration"),
        (["--cron", "* *", "--goal", "g"], "--cron: cron expression"),
        (["--every", "5m", "--cron", "0 * * * *", "--goal", "g"], "not both"),
        (["--every", "5m"], "needs work to do"),
    ],
)
def test_bad_options_are_refused_before_anything_is_written(
    repo: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], says: str
) -> None:
    make_project(repo, "fixer.py")

    result = invoke(monkeypatch, repo, "new", "ci", *args)

    assert result.exit_code == 2, result.output
    assert says in result.stderr
    assert loops(repo) == []


def test_a_loop_the_loader_refuses_is_not_left_behind(repo: Path) -> None:
    make_project(repo, "fixer.py")

    done = run_loopctl(repo, "new", "ci", "--goal", "tests green", "--agent", "fixer")

    assert_clean_exit(done, 2)
    assert "unknown agent 'fixer'" in done.stderr
    assert "ci.toml was not kept" in done.stderr
    assert loops(repo) == []

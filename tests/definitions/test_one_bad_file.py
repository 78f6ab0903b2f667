"""One bad definition file must not stop everything (issue 14).

A loop, agent or skill file with errors is left out with a one-line warning naming it; every
other loop, and `loopctl goal`, still runs; `status` lists an invalid loop as invalid, and
`validate` still exits 2. A project's own files in `agents/` are not agent definitions, and a
skill without `name` is named after its folder, as Claude Code does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.journal import events, wait_event
from support.processes import running_procs, spawn
from support.repos import commit_all, make_project, write_loop

BAD_LOOP = ".loop/loops/broken.toml"


def _project(repo: Path) -> Path:
    make_project(repo, "fixer.py")
    write_loop(repo, "tidy", 'goal = "tests green"\nprompt = "Fix add() in calc.py."\n')
    # A typo in an unrelated loop: `evrey` for `every`.
    write_loop(repo, "broken", 'prompt = "Nightly clean-up."\nevrey = "1d"\n')
    commit_all(repo, "two loops, one with a typo")
    return repo


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: loop 'broken'")]


def test_a_typo_in_one_loop_file_blocks_neither_goal_nor_the_other_loops(repo: Path) -> None:
    _project(repo)

    goal = run_loopctl(repo, "goal", "tests green")
    assert_clean_exit(goal, 0)
    (warning,) = _warnings(goal.stderr)
    assert f"{BAD_LOOP}:2: unknown key 'evrey' (did you mean 'every'?)" in warning

    other = run_loopctl(repo, "run", "tidy", "--once")
    assert_clean_exit(other, 0)
    assert len(_warnings(other.stderr)) == 1
    assert [e.loop for e in events(repo, "tick_started")] == ["goal", "tidy"]

    # The broken loop itself still refuses to run, with its error.
    itself = run_loopctl(repo, "run", "broken", "--once")
    assert_clean_exit(itself, 2)
    assert f"{BAD_LOOP}:2: unknown key 'evrey'" in itself.stderr
    assert [e.loop for e in events(repo, "tick_started")] == ["goal", "tidy"]

    validate = run_loopctl(repo, "validate")
    assert_clean_exit(validate, 2)
    assert f"{BAD_LOOP}:2: unknown key 'evrey'" in validate.stdout


def test_status_lists_an_invalid_loop_as_invalid(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(repo)
    (repo / ".loop" / "loops" / "tidy.toml").unlink()

    shown = invoke(monkeypatch, repo, "status")
    assert shown.exit_code == 0, shown.output
    assert "no loops yet" not in shown.stdout
    (row,) = [line for line in shown.stdout.splitlines() if line.startswith("broken")]
    assert f"INVALID: {BAD_LOOP}:2: unknown key 'evrey'" in row

    as_json = invoke(monkeypatch, repo, "status", "--json")
    (entry,) = json.loads(as_json.stdout)["status"]
    assert entry["loop"] == "broken"
    assert entry["invalid"] == {
        "path": BAD_LOOP,
        "line": 2,
        "message": "unknown key 'evrey' (did you mean 'every'?)",
        "errors": 1,
    }
    assert entry["spend"]["tokens"] == 0  # the same shape as every other row


def test_a_loop_using_an_invalid_agent_is_invalid_and_goal_still_runs(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    (repo / "agents" / "reviewer.toml").write_text('backend = "claude"\nmax_turns = 0\n')
    write_loop(repo, "review", 'prompt = "Review."\n[maker]\nagent = "reviewer"\n')
    commit_all(repo, "an agent with a mistake")

    goal = invoke(monkeypatch, repo, "goal", "tests green")
    assert goal.exit_code == 0, goal.output
    assert "warning: agent 'reviewer' is invalid and skipped: agents/reviewer.toml:2:" in (
        goal.stderr
    )
    review = invoke(monkeypatch, repo, "run", "review", "--once")
    assert review.exit_code == 2
    assert (
        ".loop/loops/review.toml:3: agent 'reviewer' is invalid (see agents/reviewer.toml;"
        " `loopctl validate`)"
    ) in review.stderr
    listed = invoke(monkeypatch, repo, "agents", "--json")
    assert listed.exit_code == 0, listed.output
    assert [a["name"] for a in json.loads(listed.stdout)["agents"]] == ["maker"]


def test_a_projects_own_file_in_agents_is_ignored_with_a_warning(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    (repo / "agents" / "settings.toml").write_text('theme = "dark"\n\n[editor]\ntab_width = 4\n')
    commit_all(repo, "the project's own settings")

    for args in (["agents"], ["goal", "tests green"]):
        result = invoke(monkeypatch, repo, *args)
        assert result.exit_code == 0, (args, result.output)
    validate = invoke(monkeypatch, repo, "validate")
    assert validate.exit_code == 0, validate.output
    assert (
        "agents/settings.toml: warning: not an agent definition (it has none of backend, argv,"
        " name, description, developer_instructions, instructions); ignored"
    ) in validate.stdout

    # A misspelt agent key is still a mistake in an agent, not a file to ignore.
    (repo / "agents" / "settings.toml").write_text('backnd = "claude"\n')
    typo = invoke(monkeypatch, repo, "validate")
    assert typo.exit_code == 2
    assert "agents/settings.toml:1: missing 'backend'" in typo.stdout


def test_a_skill_without_name_is_named_after_its_folder_as_claude_code_does(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    skill = repo / ".claude" / "skills" / "fix-ci" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\ndescription: Fix a failing CI job.\n---\nReproduce first.\n")
    write_loop(repo, "ci", 'prompt = "Fix CI."\n[maker]\nskills = ["fix-ci"]\n')
    commit_all(repo, "a Claude Code skill")

    validate = invoke(monkeypatch, repo, "validate")
    assert validate.exit_code == 0, validate.output
    assert (
        ".claude/skills/fix-ci/SKILL.md:1: warning: no 'name': named 'fix-ci' after its folder,"
        " as Claude Code does; other agents need `name: fix-ci` in the front matter"
    ) in validate.stdout
    shown = invoke(monkeypatch, repo, "skills", "show", "fix-ci", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["skill"]["instructions"] == "Reproduce first."


def test_up_schedules_the_valid_loops_and_puts_the_invalid_one_in_the_inbox(
    repo: Path, tmp_path: Path
) -> None:
    _project(repo)
    (repo / ".loop" / "loops" / "tidy.toml").write_text(
        'every = "1h"\ngoal = "tests green"\nprompt = "Fix add() in calc.py."\n'
    )
    commit_all(repo, "an hourly loop")

    for procs in running_procs():
        spawn(procs, repo, tmp_path, "up")
        (started,) = wait_event(repo, "scheduler_started", what="up to start")
        (opened,) = wait_event(repo, "inbox_opened", what="the invalid loop's inbox item")
        assert_clean_exit(run_loopctl(repo, "down"), 0)

    assert started.data["loops"] == {"tidy": "every 1h"}
    assert opened.loop == "broken"
    assert opened.data["summary"] == (
        f"loop broken is invalid and not scheduled: {BAD_LOOP}:2: unknown key 'evrey'"
        " (did you mean 'every'?)"
    )

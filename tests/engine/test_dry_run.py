"""`goal --dry-run` and `run NAME --dry-run`: what the maker would get, with nothing run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.repos import AGENTS, FAST_CHECK, PY, loop_worktrees, make_project, write_loop

from loopctl.paths import ProjectPaths


def nothing_happened(repo: Path, record: Path) -> None:
    """No agent ran, no worktree exists, no event was appended."""
    assert not record.exists()
    assert loop_worktrees(repo) == []
    assert events(repo) == []
    assert not ProjectPaths(repo).events_file.exists()


def dry_run_json(monkeypatch: pytest.MonkeyPatch, repo: Path, *args: str) -> dict[str, object]:
    result = invoke(monkeypatch, repo, *args, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["version"] == 1
    preview: dict[str, object] = payload["dry_run"]
    return preview


def test_goal_dry_run_shows_the_exact_first_prompt_and_runs_nothing(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "seen" / "prompts.txt"
    make_project(repo, "records_prompt.py", record, agent_extra='env.allow = ["MY_API_TOKEN"]\n')
    monkeypatch.setenv("MY_API_TOKEN", "s3cret-value-123")
    monkeypatch.setenv("OTHER_SECRET", "other-value-456")

    preview = dry_run_json(monkeypatch, repo, "goal", "tests green")
    nothing_happened(repo, record)
    assert preview["loop"] == "goal"
    assert preview["checks"] == [list(FAST_CHECK)]
    (task,) = preview["tasks"]  # type: ignore[misc]
    assert task["argv"] == [PY, str(AGENTS / "records_prompt.py"), str(record)]
    assert task["prompt_on_stdin"] is True
    names = task["env"]
    assert {"LOOPCTL_LOOP", "LOOPCTL_TASK", "LOOPCTL_ATTEMPT", "LOOPCTL_WORKTREE"} <= set(names)
    assert "MY_API_TOKEN" in names  # allowed by name
    assert "OTHER_SECRET" not in names  # withheld (invariant 5)
    sandbox = task["sandbox"]
    assert sandbox["mechanism"] == "bwrap"
    assert task["worktree"] in sandbox["writable"]
    assert str(record.parent) in sandbox["writable"]

    text = invoke(monkeypatch, repo, "goal", "tests green", "--dry-run")
    assert text.exit_code == 0, text.output
    for shown in ("Argv:", "Env:", "Sandbox:", "Checks:", "Prompt (attempt 1):", "MY_API_TOKEN"):
        assert shown in text.stdout
    for output in (text.stdout, json.dumps(preview)):
        assert "s3cret-value-123" not in output  # names, never values
        assert "other-value-456" not in output
    nothing_happened(repo, record)

    # The real run's maker gets exactly the previewed prompt.
    ran = invoke(monkeypatch, repo, "goal", "tests green")
    assert ran.exit_code == 0, ran.output
    first = record.read_text().split("\n=====\n")[0]
    assert first == task["prompt"]


def test_run_dry_run_previews_each_task_of_a_loop(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "seen" / "prompts.txt"
    make_project(repo, "records_prompt.py", record)
    tasks = [{"n": 1, "t": "fix add"}, {"n": 2, "t": "document add"}]
    write_loop(
        repo,
        "issues",
        'goal = "tests green"\n\n[tasks]\n'
        f"command = {json.dumps([PY, '-c', f'print({json.dumps(json.dumps(tasks))})'])}\n"
        'id = "issue-{n}"\nprompt = "Do issue {n}: {t}"\n',
    )
    preview = dry_run_json(monkeypatch, repo, "run", "issues")
    nothing_happened(repo, record)
    assert [t["task"] for t in preview["tasks"]] == ["issue-1", "issue-2"]  # type: ignore[attr-defined]
    first = preview["tasks"][0]  # type: ignore[index]
    assert "Do issue 1: fix add" in first["prompt"]
    assert first["branch"] == "loop/issues/issue-1"
    text = invoke(monkeypatch, repo, "run", "issues", "--dry-run")
    assert text.exit_code == 0, text.output
    assert "== Task issue-2 ==" in text.stdout
    assert "Do issue 2: document add" in text.stdout
    nothing_happened(repo, record)


def test_a_missing_agent_program_is_a_warning_in_the_preview(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    (repo / "agents" / "maker.toml").write_text(
        'backend = "command"\nargv = ["no-such-agent-program", "{prompt_file}"]\n'
    )
    preview = dry_run_json(monkeypatch, repo, "goal", "tests green")
    assert any("no-such-agent-program" in p for p in preview["problems"])  # type: ignore[attr-defined]
    (task,) = preview["tasks"]  # type: ignore[misc]
    assert task["argv"][0] == "no-such-agent-program"
    assert task["argv"][1].endswith("/attempt-1/maker-prompt.md")
    assert events(repo) == []
    assert loop_worktrees(repo) == []

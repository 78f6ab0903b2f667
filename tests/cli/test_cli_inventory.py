"""Inventory commands (agents, skills), the entry point, and loopctl's own definitions."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.repos import commit_all
from typer.testing import CliRunner, Result

from loopctl._version import __version__
from loopctl.cli.app import app
from loopctl.paths import TEMPLATES

CHECKOUT = Path(__file__).parents[2]
VALID = Path(__file__).parents[1] / "fixtures" / "definitions" / "valid"


def invoke(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def run_module(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopctl", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def defined(repo: Path) -> Path:
    """A repository holding the golden definition set (agents in all three formats)."""
    shutil.copytree(VALID, repo, dirs_exist_ok=True)
    commit_all(repo, "the golden set")  # the scripts its command agents run are committed
    return repo


# --- loopctl's own definitions -------------------------------------------------------------------


def test_the_repository_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(CHECKOUT, monkeypatch, "validate")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("ok: ")
    # The command agent is an example: the script it names is the user's to write.
    assert [line for line in lines if ": warning: " in line] == [
        "agents/command-maker.toml: warning: argv names tools/my_agent.py, which does not exist"
        " in the repository (not in HEAD): it will not be in the task's worktree, nor on another"
        " machine; commit it",
    ]


@pytest.mark.parametrize("kind", ["agents", "skills"])
def test_repository_definitions_are_what_init_ships(kind: str) -> None:
    shipped = {
        str(p.relative_to(TEMPLATES / kind)): p.read_bytes()
        for p in sorted((TEMPLATES / kind).rglob("*"))
        if p.is_file()
    }
    ours = {
        str(p.relative_to(CHECKOUT / kind)): p.read_bytes()
        for p in sorted((CHECKOUT / kind).rglob("*"))
        if p.is_file()
    }
    assert shipped, f"no templates under {TEMPLATES / kind}"
    assert sorted(ours) == sorted(shipped)
    for name, content in shipped.items():
        assert ours[name] == content, f"{kind}/{name} differs from its template"


# --- agents -------------------------------------------------------------------------------------


def test_agents_table(defined: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(defined, monkeypatch, "agents")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "BACKEND", "MODEL", "FILE", "DESCRIPTION"]
    rows = [line.split()[:4] for line in lines[1:]]
    assert rows == [
        ["api-judge", "openai", "gpt-4.1-mini", "agents/api.toml"],
        ["argv-only", "command", "-", "agents/argv-only.toml"],
        ["implementer", "claude", "sonnet", "agents/implementer.toml"],
        ["reviewer", "codex", "gpt-5.4", ".codex/agents/reviewer.toml"],
        ["scripted", "command", "-", "agents/scripted.toml"],
        ["verifier", "claude", "-", ".claude/agents/verifier.md"],
    ]


def test_agents_json(defined: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(defined, monkeypatch, "agents", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert sorted(document) == ["agents", "version"]
    assert document["version"] == 1
    assert [a["name"] for a in document["agents"]] == [
        "api-judge",
        "argv-only",
        "implementer",
        "reviewer",
        "scripted",
        "verifier",
    ]
    implementer = document["agents"][2]
    assert implementer == {
        "name": "implementer",
        "backend": "claude",
        "model": "sonnet",
        "description": "Implements the task inside the worktree",
        "path": "agents/implementer.toml",
        "timeout_s": 1200.0,
        "max_turns": 40,
        "env_allow": ["ANTHROPIC_API_KEY"],
    }


def test_agents_when_none_are_defined(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(repo, monkeypatch, "agents")
    assert result.exit_code == 0
    assert "no agents defined" in result.stdout
    as_json = invoke(repo, monkeypatch, "agents", "--json")
    assert json.loads(as_json.stdout) == {"version": 1, "agents": []}


# --- skills -------------------------------------------------------------------------------------


def test_skills_table(defined: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(defined, monkeypatch, "skills")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "FILE", "DESCRIPTION"]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["fix-ci", "skills/fix-ci/SKILL.md"],
        ["review-diff", ".claude/skills/review-diff/SKILL.md"],
        ["triage-issue", ".agents/skills/triage-issue/SKILL.md"],
    ]


def test_skills_json(defined: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(defined, monkeypatch, "skills", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document == {
        "version": 1,
        "skills": [
            {
                "name": "fix-ci",
                "description": "Diagnose and fix a failing CI job. Use when tests fail.",
                "path": "skills/fix-ci/SKILL.md",
                "license": "MIT",
            },
            {
                "name": "review-diff",
                "description": "Review a diff before delivery.",
                "path": ".claude/skills/review-diff/SKILL.md",
                "license": None,
            },
            {
                "name": "triage-issue",
                "description": "Triage an issue into a scoped task.",
                "path": ".agents/skills/triage-issue/SKILL.md",
                "license": "Apache-2.0",
            },
        ],
    }


def test_skills_when_none_are_defined(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(repo, monkeypatch, "skills")
    assert result.exit_code == 0
    assert "no skills found" in result.stdout


def test_skills_show(defined: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(defined, monkeypatch, "skills", "show", "fix-ci")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "fix-ci — skills/fix-ci/SKILL.md\n"
        "Diagnose and fix a failing CI job. Use when tests fail.\n"
        "\n"
        "# Fix CI\n\nReproduce first.\n"
    )


def test_skills_show_json(defined: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(defined, monkeypatch, "skills", "show", "fix-ci", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "version": 1,
        "skill": {
            "name": "fix-ci",
            "description": "Diagnose and fix a failing CI job. Use when tests fail.",
            "path": "skills/fix-ci/SKILL.md",
            "license": "MIT",
            "compatibility": "Needs git and a Python toolchain",
            "allowed_tools": ["Bash(git:*)", "Read"],
            "metadata": {"author": "example-org", "version": "1.0"},
            "instructions": "# Fix CI\n\nReproduce first.",
        },
    }


def test_skills_show_unknown_name(defined: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(defined, monkeypatch, "skills", "show", "fix-cj")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "loopctl: no skill named 'fix-cj' (did you mean 'fix-ci'?)"
        " (skills found: fix-ci, review-diff, triage-issue)\n"
    )


def test_validate_json_when_valid(defined: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = invoke(defined, monkeypatch, "validate", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "version": 1,
        "validation": {
            "ok": True,
            "loops": ["babysit", "docs-watch", "nightly"],
            "agents": ["api-judge", "argv-only", "implementer", "reviewer", "scripted", "verifier"],
            "skills": ["fix-ci", "review-diff", "triage-issue"],
            "problems": [],
        },
    }


def test_inventory_outside_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not any((folder / ".git").exists() for folder in (tmp_path, *tmp_path.parents))
    for args in (["agents"], ["skills"], ["validate"]):
        result = invoke(tmp_path, monkeypatch, *args)
        assert result.exit_code == 1, args
        assert result.stderr.startswith("loopctl: not a git repository"), args


# --- the entry point, as a real process ----------------------------------------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str, tmp_path: Path) -> None:
    done = run_module(flag, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"loopctl {__version__}\n"
    assert done.stderr == ""


def test_help_lists_the_commands(tmp_path: Path) -> None:
    done = run_module("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    commands = done.stdout.split("\nRun:", 1)[1].split()  # the first panel; see test_cli_gh
    for name in ("init", "validate", "agents", "skills"):
        assert name in commands
    assert "Traceback" not in done.stderr


def test_unknown_command_is_a_usage_error(tmp_path: Path) -> None:
    done = run_module("frobnicate", cwd=tmp_path)
    assert done.returncode == 2
    assert "frobnicate" in done.stderr
    assert "Traceback" not in done.stderr


def test_skills_in_a_real_process(defined: Path) -> None:
    done = run_module("skills", "show", "nope", cwd=defined)
    assert done.returncode == 2
    assert done.stderr.startswith("loopctl: no skill named 'nope'")
    assert "Traceback" not in done.stderr


def test_validate_outside_a_repository_in_a_real_process(tmp_path: Path) -> None:
    assert not any((folder / ".git").exists() for folder in (tmp_path, *tmp_path.parents))
    for args in (["validate"], ["validate", "--json"], ["agents"]):
        done = run_module(*args, cwd=tmp_path)
        assert done.returncode == 1, args
        assert done.stdout == "", args
        assert done.stderr.startswith("loopctl: not a git repository"), args
        assert "Traceback" not in done.stderr

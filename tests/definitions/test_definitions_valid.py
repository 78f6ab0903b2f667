"""Golden tests: a complete, valid definition set parses into exactly these objects."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from support.repos import commit_all
from typer.testing import CliRunner

from loopctl.cli.app import app
from loopctl.definitions import (
    Agent,
    Backend,
    Budget,
    Config,
    KeepPolicy,
    Loop,
    Project,
    Skill,
    TaskSource,
    Trigger,
    TriggerKind,
    load_project,
)
from loopctl.definitions.config import Notify, Price
from loopctl.definitions.loops import Action, CheckerSpec, DeliverSpec, MakerSpec, WorktreeSpec

VALID = Path(__file__).parents[1] / "fixtures" / "definitions" / "valid"

CONFIG_BUDGET = Budget(
    max_iterations=6,
    max_tasks=8,
    max_parallel=3,
    max_tokens=1_000_000,
    max_usd=10.5,
    max_wall_s=3600.0,
    stop_after_identical_failures=3,
)


@pytest.fixture
def project(repo: Path) -> Project:
    shutil.copytree(VALID, repo, dirs_exist_ok=True)
    return load_project(repo)


def test_golden_set_has_no_problems(project: Project) -> None:
    assert [p.render(project.root) for p in project.problems] == []
    assert sorted(project.loops) == ["babysit", "docs-watch", "nightly"]
    assert sorted(project.agents) == [
        "api-judge",
        "argv-only",
        "implementer",
        "reviewer",
        "scripted",
        "verifier",
    ]
    assert sorted(project.skills) == ["fix-ci", "review-diff", "triage-issue"]


def test_config_every_section(project: Project, repo: Path) -> None:
    expected = Config(
        path=repo / ".loop" / "config.toml",
        maker="implementer",
        checker="verifier",
        budget=CONFIG_BUDGET,
        env_allow=("PIP_INDEX_URL", "NPM_CONFIG_REGISTRY"),
        # Condition names are matched case- and space-insensitively, so they are stored folded.
        conditions=(("tests green", ("pytest", "-q")), ("lint clean", ("ruff", "check", "."))),
        worktree_root=None,  # compared below, after resolving
        keep=KeepPolicy.ALWAYS,
        author="Loop Bot <bot@example.com>",
        notify=Notify(
            command=("notify-send", "loopctl"),
            webhook="https://hooks.example.com/loopctl",
            on=("approval", "failed"),
        ),
        prices=(
            ("gpt-5-codex", Price(input=1.25, output=10.0, cached_input=0.125)),
            ("sonnet", Price(input=3.0, output=15.0)),
        ),
    )
    assert replace(project.config, worktree_root=None) == expected
    assert project.config.condition_map()["tests green"] == ("pytest", "-q")
    # A relative worktree root is relative to the repository, not to .loop/ or the cwd.
    assert project.config.worktree_root is not None
    assert project.config.worktree_root.resolve() == (repo.parent / "worktrees").resolve()


def test_loop_with_every_key(project: Project, repo: Path) -> None:
    expected = Loop(
        name="babysit",
        path=repo / ".loop" / "loops" / "babysit.toml",
        description="Watch my PRs, fix broken builds",
        trigger=Trigger(TriggerKind.EVERY, every_s=300.0),
        goal="tests green",
        prompt="Keep the build green.",
        rules=("Never weaken a test.", "Keep the diff small."),
        tasks=TaskSource(
            command=("gh", "pr", "list", "--author", "@me", "--json", "number,title,headRefName"),
            id="pr-{number}",
            base="{headRefName}",
            prompt="Make the checks of PR #{number} ({title}) pass.",
            dedupe="base",
        ),
        maker=MakerSpec(
            agent="implementer",
            skills=("fix-ci", "review-diff"),
            scope=("src/**", "docs/**"),
            allow_self_edit=False,
        ),
        checker=CheckerSpec(
            commands=(("pytest", "-q"),),
            agent="verifier",
            protect=("tests/**",),
            timeout_s=600.0,
        ),
        worktree=WorktreeSpec(
            setup=(("uv", "sync"),),
            copy=(".env.example",),
            keep=KeepPolicy.ON_FAILURE,  # the loop's own value beats the config's "always"
        ),
        budget=Budget(
            max_iterations=5,
            max_tasks=10,
            max_parallel=2,
            max_tokens=500_000,
            max_usd=5.0,
            max_wall_s=1800.0,
            stop_after_identical_failures=2,
        ),
        deliver=DeliverSpec(
            actions=(Action("commit"), Action("push"), Action("deploy", ("make", "deploy"))),
            approve=("push", "deploy"),
            remote="upstream",
            author="Babysitter <baby@example.com>",
        ),
        overlap="queue-one",
        catch_up="none",
        jitter_s=30.0,
        tz="Europe/Paris",
    )
    assert project.loops["babysit"] == expected
    assert project.loops["babysit"].trigger is not None
    assert project.loops["babysit"].trigger.describe() == "every 5m"


def test_loop_with_string_commands_and_cron(project: Project, repo: Path) -> None:
    expected = Loop(
        name="nightly",
        path=repo / ".loop" / "loops" / "nightly.toml",
        trigger=Trigger(TriggerKind.CRON, cron="0 3 * * 1-5"),
        prompt="Update dependencies.",
        maker=MakerSpec(agent="implementer"),  # from [defaults] maker
        # A string command is split with shlex into one argv.
        checker=CheckerSpec(commands=(("pytest", "-q", "--maxfail=1"),)),
        # A string `setup` is one command, split into one argv.
        worktree=WorktreeSpec(setup=(("uv", "sync", "--frozen"),), keep=KeepPolicy.ALWAYS),
        budget=CONFIG_BUDGET,
        deliver=DeliverSpec(),
    )
    assert project.loops["nightly"] == expected


def test_loop_with_watch_trigger_and_config_defaults(project: Project, repo: Path) -> None:
    expected = Loop(
        name="docs-watch",
        path=repo / ".loop" / "loops" / "docs-watch.toml",
        trigger=Trigger(TriggerKind.WATCH, watch=("docs/**/*.md", "README.md")),
        goal="lint clean",
        # A single skill may be a bare string.
        maker=MakerSpec(agent="implementer", skills=("triage-issue",)),
        checker=CheckerSpec(commands=(("ruff", "check", "."), ("mypy", "src"))),
        # ["uv sync", "npm ci"] is two commands, not one argv of two words.
        worktree=WorktreeSpec(setup=(("uv", "sync"), ("npm", "ci")), keep=KeepPolicy.ALWAYS),
        # The loop's [budget] overrides one limit; the rest come from the config.
        budget=replace(CONFIG_BUDGET, max_iterations=2),
        deliver=DeliverSpec(actions=(Action("commit"),)),
    )
    assert project.loops["docs-watch"] == expected


def test_loopctl_agent_formats(project: Project, repo: Path) -> None:
    agents = repo / "agents"
    assert project.agents["implementer"] == Agent(
        name="implementer",
        path=agents / "implementer.toml",
        backend=Backend.CLAUDE,
        description="Implements the task inside the worktree",
        instructions="Keep changes minimal. Never edit tests to make them pass.",
        model="sonnet",
        timeout_s=1200.0,
        max_turns=40,
        env_allow=("ANTHROPIC_API_KEY",),
        args=("--verbose",),
        prompt_via="stdin",
        resume=True,
    )
    assert project.agents["scripted"] == Agent(
        name="scripted",
        path=agents / "scripted.toml",
        backend=Backend.COMMAND,
        description="Runs a local script",
        argv=("python", "tools/my_agent.py", "{prompt_file}"),
        prompt_via="file",
    )
    # `argv` alone implies backend = "command".
    assert project.agents["argv-only"] == Agent(
        name="argv-only",
        path=agents / "argv-only.toml",
        backend=Backend.COMMAND,
        argv=("./agent.sh", "{prompt_file}"),
    )
    # `name` overrides the file stem; the API key variable is passed through automatically.
    assert project.agents["api-judge"] == Agent(
        name="api-judge",
        path=agents / "api.toml",
        backend=Backend.OPENAI,
        instructions="Judge strictly.",
        model="gpt-4.1-mini",
        timeout_s=90.0,
        env_allow=("LOCAL_LLM_KEY",),
        base_url="http://localhost:8080/v1",
        api_key_env="LOCAL_LLM_KEY",
    )


def test_codex_agent_file_as_codex_writes_it(project: Project, repo: Path) -> None:
    assert project.agents["reviewer"] == Agent(
        name="reviewer",
        path=repo / ".codex" / "agents" / "reviewer.toml",
        backend=Backend.CODEX,
        description="PR reviewer focused on correctness, security, and missing tests.",
        instructions=(
            "Review code like an owner.\n"
            "Prioritize correctness, security, behavior regressions, and missing test coverage.\n"
        ),
        model="gpt-5.4",
        sandbox_mode="read-only",  # kept: the codex backend passes it as --sandbox
    )
    # Codex-only keys (nickname_candidates, sandbox_mode, [mcp_servers.x], …) are not problems.
    reviewer = repo / ".codex" / "agents" / "reviewer.toml"
    assert [p for p in project.problems if p.path == reviewer] == []


def test_claude_agent_file_as_claude_writes_it(project: Project, repo: Path) -> None:
    assert project.agents["verifier"] == Agent(
        name="verifier",
        path=repo / ".claude" / "agents" / "verifier.md",
        backend=Backend.CLAUDE,
        description=(
            "Verifies that a change does what the task asked. Use proactively after code changes."
        ),
        # The whole body is the instructions, including a `---` rule after the front matter.
        instructions=(
            "You are a verifier. You did not write this change.\n\n---\n\n"
            "Check the diff against the task and report what is wrong."
        ),
        model=None,  # "inherit" means: no model of our own
        max_turns=12,
        tools=("Read", "Grep", "Glob"),
        permission_mode="plan",
    )


def test_skills_in_all_three_locations(project: Project, repo: Path) -> None:
    assert project.skills["fix-ci"] == Skill(
        name="fix-ci",
        description="Diagnose and fix a failing CI job. Use when tests fail.",
        path=repo / "skills" / "fix-ci" / "SKILL.md",
        license="MIT",
        compatibility="Needs git and a Python toolchain",
        allowed_tools=("Bash(git:*)", "Read"),
        metadata=(("author", "example-org"), ("version", "1.0")),
    )
    assert project.skills["review-diff"] == Skill(
        name="review-diff",
        description="Review a diff before delivery.",
        path=repo / ".claude" / "skills" / "review-diff" / "SKILL.md",
    )
    assert project.skills["triage-issue"] == Skill(
        name="triage-issue",
        description="Triage an issue into a scoped task.",
        path=repo / ".agents" / "skills" / "triage-issue" / "SKILL.md",
        license="Apache-2.0",
    )
    # Instructions are read on demand, front matter stripped.
    assert project.skills["fix-ci"].instructions() == "# Fix CI\n\nReproduce first."
    assert project.skills["fix-ci"].folder == repo / "skills" / "fix-ci"


def test_validate_accepts_the_golden_set(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(VALID, repo, dirs_exist_ok=True)
    commit_all(repo, "the golden set")  # the scripts its command agents run are committed
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(app, ["validate"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok: 3 loops, 6 agents, 3 skills\n"
    assert result.stderr == ""


def test_no_config_gives_defaults(repo: Path) -> None:
    (repo / "agents").mkdir()
    (repo / "agents" / "maker.toml").write_text('backend = "command"\nargv = ["true"]\n')
    (repo / ".loop" / "loops").mkdir(parents=True)
    (repo / ".loop" / "loops" / "once.toml").write_text(
        'prompt = "Do it."\n[maker]\nagent = "maker"\n'
    )
    project = load_project(repo)
    assert project.problems == ()
    assert project.config == Config()
    assert project.loops["once"] == Loop(
        name="once",
        path=repo / ".loop" / "loops" / "once.toml",
        prompt="Do it.",
        maker=MakerSpec(agent="maker"),
    )
    assert project.loops["once"].budget == Budget(max_iterations=5, max_tasks=10, max_parallel=1)
    assert project.loops["once"].worktree.keep is KeepPolicy.ON_FAILURE


def test_claude_extension_keys_in_a_skill_only_warn(repo: Path) -> None:
    folder = repo / "skills" / "deploy"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Deploy the app.\nwhen_to_use: after a merge\n---\nGo.\n"
    )
    project = load_project(repo)
    assert project.errors == []
    assert [(p.line, p.message) for p in project.warnings] == [
        (4, "'when_to_use' is a Claude Code extension; other agents ignore it")
    ]
    assert project.skills["deploy"].description == "Deploy the app."


def test_utf8_bom_is_accepted(repo: Path) -> None:
    folder = repo / "skills" / "bom"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_bytes(
        b"\xef\xbb\xbf---\nname: bom\ndescription: Saved by Notepad.\n---\nBody.\n"
    )
    project = load_project(repo)
    assert project.problems == ()
    assert project.skills["bom"].instructions() == "Body."

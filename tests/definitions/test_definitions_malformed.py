"""Malformed definitions: every problem is one clean `path:line: message`, exit 2, no traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from loopctl.cli.app import app

LOOP = ".loop/loops/demo.toml"
CONFIG = ".loop/config.toml"
AGENT = "agents/helper.toml"
CLAUDE = ".claude/agents/reviewer.md"
SKILL = "skills/my-skill/SKILL.md"

# A small valid project every case starts from, so each case shows exactly one mistake.
BASE: dict[str, str] = {
    "agents/maker.toml": 'backend = "command"\nargv = ["true"]\n',
    "agents/checker.toml": 'backend = "claude"\n',
    "skills/fix-ci/SKILL.md": "---\nname: fix-ci\ndescription: Fix a failing CI job.\n---\nDo.\n",
}
# A loop needs work and a maker; these three lines provide both (lines 1-3).
HEAD = ('prompt = "Fix the build."', "[maker]", 'agent = "maker"')


@dataclass(frozen=True)
class Symlink:
    """A file entry that is a symbolic link to `target` (relative to the link's folder)."""

    target: str


@dataclass(frozen=True)
class Directory:
    """A file entry that is a directory (holding one file, so it exists)."""


FileSpec = str | bytes | Symlink | Directory


def text(*lines: str) -> str:
    """Lines of a file; the n-th argument is line n."""
    return "\n".join(lines) + "\n"


def front(*lines: str, body: str = "Body.") -> str:
    """A markdown file with YAML front matter; front(x) puts x on line 2."""
    return text("---", *lines, "---", body)


@dataclass(frozen=True)
class Case:
    id: str
    files: dict[str, FileSpec]
    path: str  # the file the problem is reported against
    line: int | None  # None: a whole-file problem, or a line this table does not pin
    message: str  # a fragment of the message
    also: tuple[str, ...] = field(default=())  # more fragments the same line must hold


def write_files(root: Path, files: dict[str, FileSpec]) -> None:
    for relative, spec in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(spec, Symlink):
            os.symlink(spec.target, target)
        elif isinstance(spec, Directory):
            target.mkdir()
            (target / "inside.txt").write_text("not a definition\n")
        elif isinstance(spec, bytes):
            target.write_bytes(spec)
        else:
            target.write_text(spec, encoding="utf-8")


def problem_line(output: str, path: str, line: int | None, message: str) -> str:
    """The output line reporting `message` against `path` (and `line`, when one applies)."""
    where = re.escape(path) + (f":{line}" if line is not None else r"(?::\d+)?")
    pattern = re.compile(rf"^{where}: .*{re.escape(message)}", re.M)
    found = pattern.search(output)
    assert found, f"no line matching {pattern.pattern!r} in:\n{output}"
    end = output.find("\n", found.start())
    return output[found.start() : end if end >= 0 else None]


def assert_clean(result: Result) -> None:
    """No traceback reached the user, and nothing escaped the CLI's boundary."""
    assert "Traceback" not in result.stdout
    assert "Traceback" not in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


def validate(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(root)
    return CliRunner().invoke(app, ["validate", *args])


# --- the table of cases -------------------------------------------------------------------------

LOOP_CASES = [
    # triggers
    Case(
        "loop-every-bad-unit", {LOOP: text('every = "5x"', *HEAD)}, LOOP, 1, "invalid duration '5x'"
    ),
    Case(
        "loop-every-zero", {LOOP: text('every = "0s"', *HEAD)}, LOOP, 1, "must be longer than zero"
    ),
    Case(
        "loop-every-integer",
        {LOOP: text("every = 5", *HEAD)},
        LOOP,
        1,
        "'every' must be a duration string",
        also=("not an integer",),
    ),
    Case(
        "loop-cron-four-fields",
        {LOOP: text('cron = "* * * *"', *HEAD)},
        LOOP,
        1,
        "has 4 fields; expected 5",
    ),
    Case(
        "loop-cron-minute-61",
        {LOOP: text('cron = "61 * * * *"', *HEAD)},
        LOOP,
        1,
        "invalid cron expression '61 * * * *'",
    ),
    Case("loop-cron-integer", {LOOP: text("cron = 5", *HEAD)}, LOOP, 1, "'cron' must be a string"),
    Case(
        "loop-two-triggers",
        {LOOP: text('every = "5m"', 'cron = "*/5 * * * *"', *HEAD)},
        LOOP,
        2,
        "at most one trigger",
    ),
    Case("loop-watch-empty", {LOOP: text("watch = []", *HEAD)}, LOOP, 1, "at least one glob"),
    Case("loop-watch-not-strings", {LOOP: text("watch = [1]", *HEAD)}, LOOP, 1, "non-empty string"),
    Case("loop-jitter-bad", {LOOP: text('jitter = "5"', *HEAD)}, LOOP, 1, "invalid duration '5'"),
    Case("loop-overlap-bad", {LOOP: text('overlap = "never"', *HEAD)}, LOOP, 1, "skip, queue-one"),
    Case(
        "loop-tz-mars",
        {LOOP: text('tz = "Mars/Base"', *HEAD)},
        LOOP,
        1,
        "unknown time zone 'Mars/Base'",
    ),
    # unknown keys, with a suggestion
    Case(
        "loop-unknown-key-evrey",
        {LOOP: text('evrey = "5m"', *HEAD)},
        LOOP,
        1,
        "unknown key 'evrey' (did you mean 'every'?)",
    ),
    Case(
        "loop-unknown-table-budgte",
        {LOOP: text(*HEAD, "[budgte]", "max_tasks = 3")},
        LOOP,
        4,
        "unknown key 'budgte' (did you mean 'budget'?)",
    ),
    Case(
        "loop-unknown-budget-key",
        {LOOP: text(*HEAD, "[budget]", "max_iteration = 3")},
        LOOP,
        5,
        "'max_iteration' in [budget] (did you mean 'max_iterations'?)",
    ),
    Case(
        "loop-unknown-maker-key",
        {LOOP: text(*HEAD, 'skils = ["fix-ci"]')},
        LOOP,
        4,
        "unknown key 'skils' in [maker] (did you mean 'skills'?)",
    ),
    # wrong types, key by key (DESIGN §2)
    Case("loop-description-int", {LOOP: text("description = 1", *HEAD)}, LOOP, 1, "a string"),
    Case(
        "loop-goal-int",
        {LOOP: text("goal = 1", "[maker]", 'agent = "maker"')},
        LOOP,
        1,
        "'goal' must be a string",
    ),
    Case("loop-rules-int", {LOOP: text("rules = 1", *HEAD)}, LOOP, 1, "'rules' must be a list"),
    Case("loop-tasks-string", {LOOP: text('tasks = "gh"', *HEAD)}, LOOP, 1, "must be a table"),
    Case(
        "loop-tasks-command-int",
        {LOOP: text(*HEAD, "[tasks]", "command = 1")},
        LOOP,
        5,
        "'command' in [tasks] must be a command",
    ),
    Case(
        "loop-tasks-command-empty",
        {LOOP: text(*HEAD, "[tasks]", "command = []")},
        LOOP,
        5,
        "empty command",
    ),
    Case(
        "loop-tasks-id-int",
        {LOOP: text(*HEAD, "[tasks]", 'command = ["gh"]', "id = 1")},
        LOOP,
        6,
        "'id' in [tasks] must be a string",
    ),
    Case(
        "loop-tasks-without-command",
        {LOOP: text(*HEAD, "[tasks]", 'id = "pr-{number}"')},
        LOOP,
        4,
        "missing required key 'command' in [tasks]",
    ),
    Case(
        "loop-tasks-dedupe-bad",
        {LOOP: text(*HEAD, "[tasks]", 'command = ["gh"]', 'dedupe = "yes"')},
        LOOP,
        6,
        "none, base",
    ),
    Case(
        "loop-template-unclosed-brace",
        {LOOP: text(*HEAD, "[tasks]", 'command = ["gh"]', 'id = "pr-{"')},
        LOOP,
        6,
        "'id' is not a valid template",
    ),
    Case(
        "loop-template-empty-placeholder",
        {LOOP: text(*HEAD, "[tasks]", 'command = ["gh"]', 'prompt = "Fix {}"')},
        LOOP,
        6,
        "bad placeholder {}",
    ),
    Case(
        "loop-template-positional",
        {LOOP: text(*HEAD, "[tasks]", 'command = ["gh"]', 'base = "{0}"')},
        LOOP,
        6,
        "bad placeholder {0}",
    ),
    Case("loop-maker-string", {LOOP: text('prompt = "x"', 'maker = "maker"')}, LOOP, 2, "a table"),
    Case(
        "loop-maker-agent-int",
        {LOOP: text('prompt = "x"', "[maker]", "agent = 1")},
        LOOP,
        3,
        "'agent' in [maker] must be a string",
    ),
    Case(
        "loop-maker-skills-int",
        {LOOP: text(*HEAD, "skills = 1")},
        LOOP,
        4,
        "'skills' in [maker] must be a list of strings",
    ),
    Case(
        "loop-checker-command-int",
        {LOOP: text(*HEAD, "[checker]", "command = 1")},
        LOOP,
        5,
        "'command' in [checker] must be a list of commands",
    ),
    Case(
        "loop-checker-command-unbalanced-quote",
        {LOOP: text(*HEAD, "[checker]", "command = 'pytest \"-q'")},
        LOOP,
        5,
        "cannot be split into arguments",
    ),
    Case(
        "loop-checker-command-and-commands",
        {LOOP: text(*HEAD, "[checker]", 'command = ["a"]', 'commands = ["b"]')},
        LOOP,
        6,
        "'command' or 'commands', not both",
    ),
    Case(
        "loop-checker-agent-int",
        {LOOP: text(*HEAD, "[checker]", "agent = 1")},
        LOOP,
        5,
        "'agent' in [checker] must be a string",
    ),
    Case(
        "loop-checker-protect-int",
        {LOOP: text(*HEAD, "[checker]", "protect = 1")},
        LOOP,
        5,
        "'protect' in [checker] must be a list of strings",
    ),
    Case(
        "loop-checker-cache-string",
        {LOOP: text(*HEAD, "[checker]", 'cache = "no"')},
        LOOP,
        5,
        "'cache' in [checker] must be true or false",
    ),
    Case(
        "loop-checker-timeout-zero",
        {LOOP: text(*HEAD, "[checker]", 'timeout = "0s"')},
        LOOP,
        5,
        "longer than zero",
    ),
    Case(
        "loop-worktree-setup-int",
        {LOOP: text(*HEAD, "[worktree]", "setup = 1")},
        LOOP,
        5,
        "'setup' in [worktree] must be a list of commands",
    ),
    Case(
        "loop-worktree-copy-int",
        {LOOP: text(*HEAD, "[worktree]", "copy = 1")},
        LOOP,
        5,
        "'copy' in [worktree] must be a list of strings",
    ),
    Case(
        "loop-copy-escapes-repo",
        {LOOP: text(*HEAD, "[worktree]", 'copy = ["../x"]')},
        LOOP,
        5,
        "copy pattern '../x' must stay inside the repository",
    ),
    Case(
        "loop-copy-absolute",
        {LOOP: text(*HEAD, "[worktree]", 'copy = ["/etc/passwd"]')},
        LOOP,
        5,
        "must stay inside the repository",
    ),
    Case(
        "loop-keep-unknown",
        {LOOP: text(*HEAD, "[worktree]", 'keep = "sometimes"')},
        LOOP,
        5,
        "must be one of always, on-failure, never, not 'sometimes'",
    ),
    Case(
        "loop-keep-misspelt",
        {LOOP: text(*HEAD, "[worktree]", 'keep = "on_failure"')},
        LOOP,
        5,
        "(did you mean 'on-failure'?)",
    ),
    Case(
        "loop-keep-int",
        {LOOP: text(*HEAD, "[worktree]", "keep = 1")},
        LOOP,
        5,
        "'keep' in [worktree] must be a string",
    ),
    Case(
        "loop-budget-max-iterations-string",
        {LOOP: text(*HEAD, "[budget]", 'max_iterations = "5"')},
        LOOP,
        5,
        "'max_iterations' in [budget] must be an integer, not a string",
    ),
    Case(
        "loop-budget-max-tasks-zero",
        {LOOP: text(*HEAD, "[budget]", "max_tasks = 0")},
        LOOP,
        5,
        "'max_tasks' in [budget] must be at least 1, not 0",
    ),
    Case(
        "loop-budget-max-parallel-float",
        {LOOP: text(*HEAD, "[budget]", "max_parallel = 1.5")},
        LOOP,
        5,
        "'max_parallel' in [budget] must be an integer",
    ),
    Case(
        "loop-budget-max-tokens-negative",
        {LOOP: text(*HEAD, "[budget]", "max_tokens = -1")},
        LOOP,
        5,
        "'max_tokens' in [budget] must be at least 1",
    ),
    Case(
        "loop-budget-max-usd-string",
        {LOOP: text(*HEAD, "[budget]", 'max_usd = "5"')},
        LOOP,
        5,
        "'max_usd' in [budget] must be a number",
    ),
    Case(
        "loop-budget-max-usd-nan",
        {LOOP: text(*HEAD, "[budget]", "max_usd = nan")},
        LOOP,
        5,
        "'max_usd' in [budget] must be at least",
    ),
    Case(
        "loop-budget-max-wall-int",
        {LOOP: text(*HEAD, "[budget]", "max_wall = 30")},
        LOOP,
        5,
        "'max_wall' in [budget] must be a duration string",
    ),
    Case(
        "loop-budget-max-idle-int",
        {LOOP: text(*HEAD, "[budget]", "max_idle = 30")},
        LOOP,
        5,
        "'max_idle' in [budget] must be a duration string",
    ),
    Case(
        "loop-budget-max-idle-zero",
        {LOOP: text(*HEAD, "[budget]", 'max_idle = "0s"')},
        LOOP,
        5,
        "'max_idle' in [budget] must be longer than zero",
    ),
    Case(
        "loop-budget-stop-after-bool",
        {LOOP: text(*HEAD, "[budget]", "stop_after_identical_failures = true")},
        LOOP,
        5,
        "must be an integer, not a boolean",
    ),
    Case(
        "loop-deliver-actions-string",
        {LOOP: text(*HEAD, "[deliver]", 'actions = "commit"')},
        LOOP,
        5,
        "'actions' must be a list",
    ),
    Case(
        "loop-deliver-unknown-action",
        {LOOP: text(*HEAD, "[deliver]", 'actions = ["commit", "pusj"]')},
        LOOP,
        5,
        "unknown action 'pusj' (did you mean 'push'?)",
    ),
    Case(
        "loop-deliver-action-twice",
        {LOOP: text(*HEAD, "[deliver]", 'actions = ["commit", "commit"]')},
        LOOP,
        5,
        "action 'commit' is listed twice",
    ),
    Case(
        "loop-deliver-custom-action-without-argv",
        {LOOP: text(*HEAD, "[deliver]", 'actions = [{ name = "deploy" }]')},
        LOOP,
        5,
        "actions[0] needs 'argv'",
    ),
    Case(
        "loop-approve-not-in-actions",
        {LOOP: text(*HEAD, "[deliver]", 'actions = ["commit"]', 'approve = ["push"]')},
        LOOP,
        6,
        "'approve' names 'push', which is not in 'actions' (commit)",
    ),
    Case(
        "loop-deliver-approve-int",
        {LOOP: text(*HEAD, "[deliver]", "approve = 1")},
        LOOP,
        5,
        "'approve' in [deliver] must be a list of strings",
    ),
    # TOML itself
    Case(
        "loop-duplicate-key",
        {LOOP: text('prompt = "a"', 'prompt = "b"', "[maker]", 'agent = "maker"')},
        LOOP,
        2,
        "invalid TOML",
    ),
    Case(
        "loop-duplicate-table",
        {LOOP: text(*HEAD, "[maker]", 'agent = "checker"')},
        LOOP,
        4,
        "invalid TOML",
    ),
    Case(
        "loop-toml-unterminated-string",
        {LOOP: text(*HEAD, "", 'goal = "tests green')},
        LOOP,
        5,
        "invalid TOML",
    ),
    Case(
        "loop-toml-unclosed-table-header",
        {LOOP: text(*HEAD, "[budget", "max_tasks = 1")},
        LOOP,
        4,
        "invalid TOML",
    ),
    Case(
        "loop-toml-nested-too-deeply",
        {LOOP: text(*HEAD, "x = " + "[" * 3000 + "]" * 3000)},
        LOOP,
        None,
        "invalid TOML",
    ),
    # cross references
    Case(
        "loop-unknown-maker-agent",
        {LOOP: text('prompt = "x"', "[maker]", 'agent = "makr"')},
        LOOP,
        3,
        "unknown agent 'makr' (did you mean 'maker'?)",
        also=("agents found: checker, maker",),
    ),
    Case(
        "loop-unknown-checker-agent",
        {LOOP: text(*HEAD, "[checker]", 'agent = "chekcer"')},
        LOOP,
        5,
        "unknown agent 'chekcer' (did you mean 'checker'?)",
        also=("agents found: checker, maker",),
    ),
    Case(
        "loop-unknown-skill",
        {LOOP: text(*HEAD, 'skills = ["fix-cj"]')},
        LOOP,
        4,
        "unknown skill 'fix-cj' (did you mean 'fix-ci'?)",
        also=("skills found: fix-ci",),
    ),
    Case(
        "loop-no-maker-and-no-default",
        {LOOP: text('prompt = "Fix the build."')},
        LOOP,
        None,
        "no maker agent",
    ),
    Case(
        "loop-no-work",
        {LOOP: text("[maker]", 'agent = "maker"')},
        LOOP,
        None,
        "a loop needs work to do",
    ),
    # the file name is the loop's name
    Case(
        "loop-file-name-with-space",
        {".loop/loops/bad name.toml": text(*HEAD)},
        ".loop/loops/bad name.toml",
        None,
        "loop name 'bad name' (the file name)",
    ),
    Case(
        "loop-file-name-leading-dash",
        {".loop/loops/-x.toml": text(*HEAD)},
        ".loop/loops/-x.toml",
        None,
        "loop name '-x'",
    ),
]

AGENT_CASES = [
    Case(
        "agent-missing-backend",
        {AGENT: text('description = "helps"')},
        AGENT,
        None,
        "missing 'backend': one of claude, codex",
    ),
    Case(
        "agent-unknown-backend",
        {AGENT: text('backend = "claud"')},
        AGENT,
        1,
        "not 'claud' (did you mean 'claude'?)",
    ),
    Case(
        "agent-command-without-argv",
        {AGENT: text('backend = "command"')},
        AGENT,
        None,
        "missing required key 'argv'",
    ),
    Case(
        "agent-argv-on-claude",
        {AGENT: text('backend = "claude"', 'argv = ["x"]')},
        AGENT,
        2,
        "'argv' is only for backend = \"command\"",
    ),
    Case(
        "agent-timeout-bad",
        {AGENT: text('backend = "claude"', 'timeout = "soon"')},
        AGENT,
        2,
        "invalid duration 'soon'",
    ),
    Case(
        "agent-timeout-int",
        {AGENT: text('backend = "claude"', "timeout = 20")},
        AGENT,
        2,
        "'timeout' must be a duration string",
    ),
    Case(
        "agent-max-turns-zero",
        {AGENT: text('backend = "claude"', "max_turns = 0")},
        AGENT,
        2,
        "'max_turns' must be at least 1, not 0",
    ),
    Case(
        "agent-env-not-table",
        {AGENT: text('backend = "claude"', 'env = "ANTHROPIC_API_KEY"')},
        AGENT,
        2,
        "'env' must be a table",
    ),
    Case(
        "agent-env-allow-int",
        {AGENT: text('backend = "claude"', "env.allow = 1")},
        AGENT,
        2,
        "'allow' in [env] must be a list of strings",
    ),
    Case(
        "agent-env-allow-numbers",
        {AGENT: text('backend = "claude"', "[env]", "allow = [1]")},
        AGENT,
        3,
        "non-empty string",
    ),
    Case(
        "agent-env-unknown-key",
        {AGENT: text('backend = "claude"', "[env]", 'alow = ["X"]')},
        AGENT,
        3,
        "unknown key 'alow' in [env] (did you mean 'allow'?)",
    ),
    Case(
        "agent-duplicate-name-in-codex-folder",
        {".codex/agents/maker.toml": text('description = "d"', 'developer_instructions = "x"')},
        ".codex/agents/maker.toml",
        None,
        "agent 'maker' is already defined in agents/maker.toml",
    ),
    Case(
        "agent-bad-base-url",
        {AGENT: text('backend = "openai"', 'model = "m"', 'base_url = "ftp://x"')},
        AGENT,
        3,
        "'base_url' must start with http:// or https://",
    ),
    Case(
        "agent-openai-without-model",
        {AGENT: text('backend = "openai"')},
        AGENT,
        None,
        "backend openai needs a 'model'",
    ),
    Case(
        "agent-anthropic-without-model",
        {AGENT: text('backend = "anthropic"')},
        AGENT,
        None,
        "backend anthropic needs a 'model'",
    ),
    Case(
        "agent-unknown-key",
        {AGENT: text('backend = "claude"', 'modle = "sonnet"')},
        AGENT,
        2,
        "unknown key 'modle' (did you mean 'model'?)",
    ),
    Case(
        "agent-bad-name",
        {AGENT: text('backend = "claude"', 'name = "bad name"')},
        AGENT,
        2,
        "agent name 'bad name' must be",
    ),
    Case(
        "agent-two-instruction-keys",
        {AGENT: text('backend = "claude"', 'developer_instructions = "a"', 'instructions = "b"')},
        AGENT,
        3,
        "'developer_instructions' or 'instructions', not both",
    ),
    Case(
        "agent-prompt-via-bad",
        {AGENT: text('backend = "claude"', 'prompt_via = "pipe"')},
        AGENT,
        2,
        "stdin, file, both",
    ),
]

CLAUDE_CASES = [
    Case(
        "claude-no-front-matter",
        {CLAUDE: "You review code.\n"},
        CLAUDE,
        1,
        "missing YAML front matter",
    ),
    Case(
        "claude-unclosed-front-matter",
        {CLAUDE: text("---", "name: reviewer", "description: Reviews.")},
        CLAUDE,
        1,
        "front matter is not closed",
    ),
    Case(
        "claude-yaml-tab-indent",
        {CLAUDE: front("name: reviewer", "description: Reviews.", "\tmodel: sonnet")},
        CLAUDE,
        4,
        "invalid YAML front matter",
    ),
    Case(
        "claude-yaml-mapping-in-value",
        {CLAUDE: front("name: reviewer", "description: Reviews.", "model: a: b")},
        CLAUDE,
        4,
        "invalid YAML front matter: mapping values are not allowed",
    ),
    Case(
        "claude-description-missing",
        {CLAUDE: front("name: reviewer")},
        CLAUDE,
        None,
        "missing required key 'description'",
    ),
    Case(
        "claude-front-matter-list",
        {CLAUDE: front("- name", "- description")},
        CLAUDE,
        None,
        "front matter must be a mapping",
    ),
    Case(
        "claude-non-string-key",
        {CLAUDE: front("name: reviewer", "description: Reviews.", "on: x")},
        CLAUDE,
        None,  # the line is asserted by test_yaml_boolean_key_points_at_its_line
        "front matter key True is not a string",
        also=("quote it",),
    ),
    Case(
        "claude-max-turns-zero",
        {CLAUDE: front("name: reviewer", "description: Reviews.", "maxTurns: 0")},
        CLAUDE,
        4,
        "'maxTurns' must be at least 1",
    ),
    Case(
        "claude-tools-number",
        {CLAUDE: front("name: reviewer", "description: Reviews.", "tools: 5")},
        CLAUDE,
        4,
        "'tools' must be a comma-separated string or a list",
    ),
    Case(
        "claude-bad-name",
        {CLAUDE: front("name: bad name", "description: Reviews.")},
        CLAUDE,
        2,
        "agent name 'bad name' must be",
    ),
]

SKILL_CASES = [
    Case(
        "skill-name-not-folder",
        {SKILL: front("name: other-skill", "description: Does things.")},
        SKILL,
        2,
        "skill name 'other-skill' must equal its folder name 'my-skill'",
    ),
    Case(
        "skill-uppercase-name",
        {"skills/My-Skill/SKILL.md": front("name: My-Skill", "description: Does things.")},
        "skills/My-Skill/SKILL.md",
        2,
        "must be lowercase letters, digits and single hyphens",
    ),
    Case(
        "skill-double-hyphen",
        {"skills/my--skill/SKILL.md": front("name: my--skill", "description: Does things.")},
        "skills/my--skill/SKILL.md",
        2,
        "single hyphens",
    ),
    Case(
        "skill-65-char-name",
        {f"skills/{'a' * 65}/SKILL.md": front(f"name: {'a' * 65}", "description: Does things.")},
        f"skills/{'a' * 65}/SKILL.md",
        2,
        "skill name is 65 characters; at most 64",
    ),
    Case(
        # Without `name` a skill is named after its folder (as Claude Code does), if it can be.
        "skill-name-missing-and-folder-not-a-name",
        {"skills/My Skill/SKILL.md": front("description: Does things.")},
        "skills/My Skill/SKILL.md",
        1,
        "missing required key 'name', and the folder name 'My Skill' is not a valid skill name",
    ),
    Case(
        "skill-name-empty",
        {SKILL: front('name: ""', "description: Does things.")},
        SKILL,
        2,
        "'name' is empty; use the folder name: `name: my-skill`",
    ),
    Case(
        "skill-description-missing",
        {SKILL: front("name: my-skill")},
        SKILL,
        None,
        "missing required key 'description'",
    ),
    Case(
        "skill-description-empty",
        {SKILL: front("name: my-skill", 'description: ""')},
        SKILL,
        3,
        "'description' is empty",
    ),
    Case(
        "skill-description-1025-chars",
        {SKILL: front("name: my-skill", "description: " + "x" * 1025)},
        SKILL,
        3,
        "'description' is 1025 characters; at most 1024",
    ),
    Case(
        "skill-description-number",
        {SKILL: front("name: my-skill", "description: 5")},
        SKILL,
        3,
        "'description' must be a string",
    ),
    Case(
        "skill-unknown-key",
        {SKILL: front("name: my-skill", "description: Does things.", "foo: bar")},
        SKILL,
        4,
        "unknown key 'foo'; the Agent Skills format allows only name, description",
    ),
    Case(
        "skill-misspelt-key",
        {SKILL: front("name: my-skill", "description: Does things.", "licence: MIT")},
        SKILL,
        4,
        "unknown key 'licence' (did you mean 'license'?)",
    ),
    Case(
        "skill-metadata-not-mapping",
        {SKILL: front("name: my-skill", "description: Does things.", "metadata: [1, 2]")},
        SKILL,
        4,
        "'metadata' must be a mapping",
    ),
    Case(
        "skill-metadata-nested",
        {SKILL: front("name: my-skill", "description: Does things.", "metadata:", "  a: [1]")},
        SKILL,
        4,
        "'metadata' must map strings to strings",
    ),
    Case(
        "skill-allowed-tools-number",
        {SKILL: front("name: my-skill", "description: Does things.", "allowed-tools: 5")},
        SKILL,
        4,
        "'allowed-tools' must be a space-separated string",
    ),
    Case(
        "skill-compatibility-501-chars",
        {
            SKILL: front(
                "name: my-skill", "description: Does things.", "compatibility: " + "c" * 501
            )
        },
        SKILL,
        4,
        "'compatibility' is 501 characters; at most 500",
    ),
    Case(
        "skill-no-front-matter",
        {SKILL: "# My skill\n"},
        SKILL,
        1,
        "missing YAML front matter",
    ),
]

CONFIG_CASES = [
    Case(
        "config-unknown-key",
        {CONFIG: text("verison = 1")},
        CONFIG,
        1,
        "unknown key 'verison' (did you mean 'version'?)",
    ),
    Case(
        "config-unknown-defaults-key",
        {CONFIG: text("[defaults]", 'makre = "maker"')},
        CONFIG,
        2,
        "unknown key 'makre' in [defaults] (did you mean 'maker'?)",
    ),
    Case(
        "config-budget-max-usd-string",
        {CONFIG: text("[budget]", 'max_usd = "lots"')},
        CONFIG,
        2,
        "'max_usd' in [budget] must be a number, not a string",
    ),
    Case(
        "config-budget-max-iterations-zero",
        {CONFIG: text("[budget]", "max_iterations = 0")},
        CONFIG,
        2,
        "'max_iterations' in [budget] must be at least 1",
    ),
    Case(
        "config-budget-max-wall-bad",
        {CONFIG: text("[budget]", 'max_wall = "5x"')},
        CONFIG,
        2,
        "invalid duration '5x'",
    ),
    Case(
        "config-review-max-open-zero",
        {CONFIG: text("version = 1", "[review]", "max_open = 0")},
        CONFIG,
        3,
        "'max_open' in [review] must be at least 1, not 0",
    ),
    Case(
        "config-review-max-open-string",
        {CONFIG: text("[review]", 'max_open = "3"')},
        CONFIG,
        2,
        "'max_open' in [review] must be an integer, not a string",
    ),
    Case(
        "config-review-unknown-key",
        {CONFIG: text("[review]", "max_opne = 3")},
        CONFIG,
        2,
        "unknown key 'max_opne' in [review] (did you mean 'max_open'?)",
    ),
    Case(
        "config-budget-max-idle-bad",
        {CONFIG: text("[budget]", 'max_idle = "soon"')},
        CONFIG,
        2,
        "invalid duration 'soon'",
    ),
    Case(
        "config-default-maker-unknown",
        {CONFIG: text("[defaults]", 'maker = "makr"')},
        CONFIG,
        2,
        "default maker agent 'makr' is not defined (did you mean 'maker'?)",
        also=("agents found: checker, maker",),
    ),
    Case(
        "config-default-checker-unknown",
        {CONFIG: text("[defaults]", 'checker = "nobody"')},
        CONFIG,
        2,
        "default checker agent 'nobody' is not defined",
    ),
    Case(
        "config-condition-not-argv",
        {CONFIG: text("[conditions]", '"tests green" = 1')},
        CONFIG,
        2,
        "'tests green' in [conditions] must be a command",
    ),
    Case(
        "config-condition-list-of-numbers",
        {CONFIG: text("[conditions]", '"tests green" = [1, 2]')},
        CONFIG,
        2,
        "must be a list of strings (an argv)",
    ),
    Case(
        "config-version-newer",
        {CONFIG: text("version = 2")},
        CONFIG,
        1,
        "config version 2 is newer than this loopctl understands",
    ),
    Case(
        "config-version-string",
        {CONFIG: text('version = "1"')},
        CONFIG,
        1,
        "'version' must be an integer",
    ),
    Case(
        "config-notify-webhook-not-http",
        {CONFIG: text("[notify]", 'webhook = "ftp://hooks.example.com"')},
        CONFIG,
        2,
        "'webhook' must be an http:// or https:// URL",
    ),
    Case(
        "config-worktree-keep-bad",
        {CONFIG: text("[worktree]", 'keep = "forever"')},
        CONFIG,
        2,
        "always, on-failure, never",
    ),
    Case(
        "config-env-allow-int",
        {CONFIG: text("[env]", "allow = 5")},
        CONFIG,
        2,
        "'allow' in [env] must be a list of strings",
    ),
    Case(
        "config-price-without-output",
        {CONFIG: text("[prices.sonnet]", "input = 3")},
        CONFIG,
        1,
        "needs both 'input' and 'output'",
    ),
]

BIG = b"# padding\n" + b"#" * (2 * 1024 * 1024) + b"\n"

FILE_CASES = [
    Case(
        "file-binary-nul",
        {LOOP: b'prompt = "x"\n\x00\x01\x02\n'},
        LOOP,
        2,
        "binary file (contains NUL bytes)",
    ),
    Case(
        "file-non-utf8-toml",
        {LOOP: b'prompt = "x"\n[maker]\nagent = "maker" # caf\xe9\n'},
        LOOP,
        3,
        "not valid UTF-8 (byte 0xe9)",
    ),
    Case(
        "file-non-utf8-markdown",
        {CLAUDE: b"---\nname: reviewer\ndescription: Reviews.\n---\n\xff\n"},
        CLAUDE,
        5,
        "not valid UTF-8 (byte 0xff)",
    ),
    Case("file-empty-loop", {LOOP: b""}, LOOP, None, "file is empty"),
    Case("file-whitespace-only-agent", {AGENT: "  \n\n\t\n"}, AGENT, None, "file is empty"),
    Case("file-empty-skill", {SKILL: ""}, SKILL, None, "file is empty"),
    Case(
        "file-directory-named-toml",
        {".loop/loops/x.toml": Directory()},
        ".loop/loops/x.toml",
        None,
        "is a directory, expected a file",
    ),
    Case(
        "file-config-is-directory",
        {CONFIG: Directory()},
        CONFIG,
        None,
        "is a directory, expected a file",
    ),
    Case(
        "file-skill-md-is-directory",
        {SKILL: Directory()},
        SKILL,
        None,
        "is a directory, expected a file",
    ),
    Case(
        "file-symlink-loop",
        {".loop/loops/a.toml": Symlink("b.toml"), ".loop/loops/b.toml": Symlink("a.toml")},
        ".loop/loops/a.toml",
        None,
        "cannot read file",
    ),
    Case(
        "file-dangling-symlink",
        {AGENT: Symlink("nowhere.toml")},
        AGENT,
        None,
        "cannot read file",
    ),
    Case("file-2mb", {AGENT: BIG}, AGENT, None, "larger than 1024 KiB"),
]

CASES = LOOP_CASES + AGENT_CASES + CLAUDE_CASES + SKILL_CASES + CONFIG_CASES + FILE_CASES


def test_the_table_is_big_and_ids_are_unique() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    assert len(CASES) >= 60


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_malformed_definition(case: Case, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(repo, {**BASE, **case.files})
    result = validate(repo, monkeypatch)
    assert_clean(result)
    assert result.exit_code == 2, result.output
    found = problem_line(result.stdout, case.path, case.line, case.message)
    for fragment in case.also:
        assert fragment in found
    # The summary goes to stderr, so stdout stays a clean list of problems.
    assert re.search(r"^\d+ error\(s\)", result.stderr, re.M), result.stderr


# --- beyond one problem per file -----------------------------------------------------------------


def test_symlink_loop_reports_both_links(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(
        repo,
        {
            **BASE,
            ".loop/loops/a.toml": Symlink("b.toml"),
            ".loop/loops/b.toml": Symlink("a.toml"),
        },
    )
    result = validate(repo, monkeypatch)
    assert result.exit_code == 2
    problem_line(result.stdout, ".loop/loops/a.toml", None, "symbolic links")
    problem_line(result.stdout, ".loop/loops/b.toml", None, "symbolic links")


def test_yaml_python_tag_is_not_executed(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = repo / "SENTINEL"
    payload = '!!python/object/apply:os.system ["touch SENTINEL"]'
    write_files(
        repo,
        {
            **BASE,
            CLAUDE: front("name: reviewer", "description: Reviews.", f"model: {payload}"),
            SKILL: front("name: my-skill", f"description: {payload}"),
        },
    )
    result = validate(repo, monkeypatch)
    assert_clean(result)
    assert result.exit_code == 2
    assert not sentinel.exists()
    problem_line(result.stdout, CLAUDE, 4, "could not determine a constructor")
    problem_line(result.stdout, SKILL, 3, "could not determine a constructor")


def _billion_laughs(first_lines: tuple[str, ...], use: str) -> str:
    lines = [*first_lines, 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    previous = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [{', '.join(['*' + previous] * 9)}]")
        previous = name
    lines.append(use.replace("LAUGHS", "*i"))
    return front(*lines)


def test_billion_laughs_finishes_and_fails_cleanly(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_files(
        repo,
        {
            **BASE,
            SKILL: _billion_laughs(("name: my-skill",), "description: LAUGHS"),
            CLAUDE: _billion_laughs(("name: reviewer", "description: Reviews."), "tools: LAUGHS"),
        },
    )
    result = validate(repo, monkeypatch)
    assert_clean(result)
    assert result.exit_code == 2
    problem_line(result.stdout, SKILL, None, "'description' must be a string")
    problem_line(result.stdout, CLAUDE, None, "'tools' must be")


def test_deeply_nested_yaml_is_a_clean_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nested = "[" * 5000 + "]" * 5000
    write_files(repo, {**BASE, CLAUDE: front("name: reviewer", "description: R.", f"x: {nested}")})
    result = validate(repo, monkeypatch)
    assert_clean(result)
    assert result.exit_code == 2
    problem_line(result.stdout, CLAUDE, None, "invalid YAML front matter")


def test_many_problems_in_many_files_in_one_run(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_files(
        repo,
        {
            **BASE,
            LOOP: text('evrey = "5m"', *HEAD, "[budget]", "max_tasks = 0"),
            ".loop/loops/other.toml": text(*HEAD, "[worktree]", 'copy = ["../x"]'),
            AGENT: text('backend = "claude"', "max_turns = 0"),
            CONFIG: text("verison = 1"),
            SKILL: front("name: other", "description: Does things."),
            CLAUDE: "no front matter\n",
            ".loop/loops/broken.toml": b"\x00",
        },
    )
    result = validate(repo, monkeypatch)
    assert_clean(result)
    assert result.exit_code == 2
    expected = [
        (LOOP, 1, "unknown key 'evrey'"),
        (LOOP, 6, "'max_tasks' in [budget] must be at least 1"),
        (".loop/loops/other.toml", 5, "must stay inside the repository"),
        (AGENT, 2, "'max_turns' must be at least 1"),
        (CONFIG, 1, "unknown key 'verison'"),
        (SKILL, 2, "must equal its folder name"),
        (CLAUDE, 1, "missing YAML front matter"),
        (".loop/loops/broken.toml", 1, "binary file"),
    ]
    for path, line, message in expected:
        problem_line(result.stdout, path, line, message)
    assert "8 error(s)" in result.stderr


def test_validate_json_lists_every_problem(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(
        repo,
        {
            **BASE,
            LOOP: text('every = "5x"', *HEAD),
            SKILL: front("name: my-skill", "description: Does things.", "when_to_use: later"),
        },
    )
    result = validate(repo, monkeypatch, "--json")
    assert_clean(result)
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert document["version"] == 1
    report = document["validation"]
    assert report["ok"] is False
    assert sorted(report["problems"], key=lambda p: p["path"]) == [
        {
            "path": LOOP,
            "line": 1,
            "severity": "error",
            "message": '\'every\': invalid duration \'5x\': use forms like "90s", "5m", "1h30m"',
        },
        {
            "path": SKILL,
            "line": 4,
            "severity": "warning",
            "message": "'when_to_use' is a Claude Code extension; other agents ignore it",
        },
    ]
    assert report["skills"] == ["fix-ci", "my-skill"]
    assert report["loops"] == []


def test_warnings_alone_exit_zero(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(
        repo,
        {
            **BASE,
            SKILL: front("name: my-skill", "description: Does things.", "when_to_use: later"),
            ".codex/agents/coder.toml": text('description = "Codes."', "future_codex_key = 1"),
            LOOP: text(*HEAD, "allow_self_edit = true"),
            CLAUDE: front("name: reviewer", "description: Reviews.", "colour: blue"),
            ".agents/skills/fix-ci/SKILL.md": front("name: fix-ci", "description: Shadowed."),
            "skills/notes/README.md": "a folder without SKILL.md\n",
        },
    )
    result = validate(repo, monkeypatch)
    assert_clean(result)
    assert result.exit_code == 0, result.output
    problem_line(result.stdout, SKILL, 4, "warning: 'when_to_use' is a Claude Code extension")
    problem_line(result.stdout, ".codex/agents/coder.toml", 2, "warning: unknown key")
    problem_line(result.stdout, LOOP, 4, "warning: allow_self_edit = true")
    problem_line(result.stdout, CLAUDE, 4, "warning: unknown key 'colour' (did you mean 'color'?)")
    problem_line(
        result.stdout,
        ".agents/skills/fix-ci/SKILL.md",
        None,
        "warning: skill 'fix-ci' is also defined in skills/fix-ci/SKILL.md; the first one wins",
    )
    problem_line(result.stdout, "skills/notes", None, "warning: skill folder has no SKILL.md")
    assert result.stdout.endswith("ok: 1 loops, 4 agents, 2 skills, 6 warning(s)\n")


def test_inventory_commands_skip_an_invalid_agent_and_name_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_files(repo, {**BASE, AGENT: text('backend = "claude"', "max_turns = 0")})
    monkeypatch.chdir(repo)
    for args in (["agents"], ["skills"], ["skills", "show", "fix-ci"]):
        result = CliRunner().invoke(app, args)
        assert_clean(result)
        assert result.exit_code == 0, args
        assert (
            f"warning: agent 'helper' is invalid and skipped: {AGENT}:2:"
            " 'max_turns' must be at least 1, not 0; `loopctl validate` lists every problem"
        ) in result.stderr
    listed = CliRunner().invoke(app, ["agents"])
    assert "helper" not in listed.stdout
    assert "maker" in listed.stdout


def test_inventory_commands_refuse_a_broken_config(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_files(repo, {**BASE, CONFIG: text("verison = 1")})
    monkeypatch.chdir(repo)
    for args in (["agents"], ["skills"], ["skills", "show", "fix-ci"]):
        result = CliRunner().invoke(app, args)
        assert_clean(result)
        assert result.exit_code == 2, args
        problem_line(result.stderr, CONFIG, 1, "unknown key 'verison'")


# --- the same, through a real process -----------------------------------------------------------

SUBPROCESS_CASES = [
    Case(
        "toml-syntax",
        {LOOP: text(*HEAD, "[budget", "max_tasks = 1")},
        LOOP,
        4,
        "invalid TOML",
    ),
    Case(
        "binary",
        {AGENT: b"backend = \x00"},
        AGENT,
        1,
        "binary file",
    ),
    Case(
        "non-utf8",
        {SKILL: b"---\nname: my-skill\ndescription: caf\xe9\n---\n"},
        SKILL,
        3,
        "not valid UTF-8",
    ),
    Case(
        "symlink-loop",
        {CONFIG: Symlink("config.toml")},
        CONFIG,
        None,
        "cannot read file",
    ),
    Case(
        "yaml-python-tag",
        {
            SKILL: front(
                "name: my-skill", 'description: !!python/object/apply:os.system ["touch SENTINEL"]'
            )
        },
        SKILL,
        3,
        "could not determine a constructor",
    ),
    Case(
        "unknown-agent",
        {LOOP: text('prompt = "x"', "[maker]", 'agent = "makr"')},
        LOOP,
        3,
        "unknown agent 'makr' (did you mean 'maker'?)",
    ),
]


@pytest.mark.parametrize("case", SUBPROCESS_CASES, ids=[case.id for case in SUBPROCESS_CASES])
def test_malformed_definition_in_a_real_process(case: Case, repo: Path) -> None:
    write_files(repo, {**BASE, **case.files})
    done = subprocess.run(
        [sys.executable, "-m", "loopctl", "validate"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "Traceback" not in done.stdout
    problem_line(done.stdout, case.path, case.line, case.message)
    assert not (repo / "SENTINEL").exists()


@pytest.mark.parametrize("args", [(), ("--json",)], ids=["text", "json"])
def test_real_process_says_what_the_typer_command_says(
    args: tuple[str, ...], repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python -m loopctl validate` takes a fast path past typer; it must not drift from it."""
    write_files(
        repo,
        {
            **BASE,
            LOOP: text('every = "5x"', *HEAD),
            SKILL: front("name: my-skill", "description: Does things.", "when_to_use: later"),
        },
    )
    done = subprocess.run(
        [sys.executable, "-m", "loopctl", "validate", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    result = validate(repo, monkeypatch, *args)
    assert result.exit_code == 2
    assert (done.returncode, done.stdout, done.stderr) == (2, result.stdout, result.stderr)


# --- known bugs ---------------------------------------------------------------------------------


def test_line_after_multiline_array_of_commands(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_files(
        repo,
        {
            **BASE,
            LOOP: text(
                *HEAD, "[worktree]", "setup = [", '    ["make"],', "]", 'keep = "sometimes"'
            ),
        },
    )
    result = validate(repo, monkeypatch)
    assert result.exit_code == 2
    problem_line(result.stdout, LOOP, 8, "not 'sometimes'")


def test_yaml_boolean_key_points_at_its_line(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(repo, {**BASE, CLAUDE: front("name: reviewer", "description: Reviews.", "on: x")})
    result = validate(repo, monkeypatch)
    assert result.exit_code == 2
    problem_line(result.stdout, CLAUDE, 4, "front matter key True is not a string")


@pytest.mark.parametrize(
    "body",
    [text('backend = "claud"'), text('description = "no backend"')],
    ids=["unknown-backend", "missing-backend"],
)
def test_bad_backend_is_one_problem(body: str, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_files(repo, {**BASE, AGENT: body})
    result = validate(repo, monkeypatch)
    assert result.exit_code == 2
    reported = [line for line in result.stdout.splitlines() if line.startswith(AGENT)]
    assert len(reported) == 1, reported
    assert "argv" not in reported[0]

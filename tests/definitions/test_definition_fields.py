"""The field specs (loopctl.definitions.schema) and the loaders that use them agree.

Every key a definition file may hold is described once, as a `Field`; the loaders read them
with one routine. These tests fail when the two drift apart: a spec no loader reads (its key
would be "unknown"), a key read by hand that no spec declares (a misspelt `has("protec")`), or a
new spec that no test places in a file.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from loopctl.definitions import schema
from loopctl.definitions.agents import Backend, load_claude_agent, load_toml_agent
from loopctl.definitions.config import load_config
from loopctl.definitions.loops import load_loop
from loopctl.definitions.schema import Field
from loopctl.definitions.skills import load_skill
from loopctl.definitions.source import Problems

MODULES = (
    "loops",
    "github_source",
    "config",
    "agents",
    "skills",
    "connectors",
    "sandbox",
    "traces",
)
# Kinds with one wrong value each and the Table accessor's "must be" error: a field of these
# kinds that a loader reads reports that error on its key's line.
TYPED_KINDS = {
    schema.string,
    schema.integer,
    schema.number,
    schema.boolean,
    schema.strings,
    schema.globs,
    schema.command,
    schema.commands,
    schema.duration,
    schema.size,
    schema.folders,
}
# Table methods whose first argument names a key of that table (`table`/`read_table` name a
# sub-table, whose own keys `finish()` checks).
KEY_METHODS = {
    "string",
    "integer",
    "number",
    "boolean",
    "string_list",
    "glob_list",
    "argv",
    "argv_list",
    "duration",
    "size",
    "relative_paths",
    "raw",
    "has",
    "error",
    "warn",
    "where",
    "known",
}

# Where each spec's keys live: (file, the text around `KEY = VALUE`, where {line} goes).
LOOP = ".loop/loops/x.toml"
CONFIG = ".loop/config.toml"
AGENT = "agents/a.toml"
CLAUDE = ".claude/agents/a.md"
SKILL = "skills/s/SKILL.md"
AGENT_BASE = 'backend = "command"\nargv = ["true"]\n'
HOMES: dict[str, tuple[str, str]] = {
    "loops.DESCRIPTION_FIELD": (LOOP, 'prompt = "p"\n{line}\n'),
    "loops.TRIGGER_FIELDS": (LOOP, 'prompt = "p"\n{line}\n'),
    "loops.LOOP_FIELDS": (LOOP, 'description = "d"\n{line}\n'),
    "loops.TASK_SOURCE_FIELD": (LOOP, '[tasks]\ncommand = ["true"]\n{line}\n'),
    "loops.COMMAND_TASK_FIELDS": (LOOP, "[tasks]\n{line}\n"),
    "loops.TASK_FIELDS": (LOOP, '[tasks]\ncommand = ["true"]\n{line}\n'),
    "loops.MAKER_FIELDS": (LOOP, 'prompt = "p"\n[maker]\n{line}\n'),
    "loops.CHECKER_FIELDS": (LOOP, 'prompt = "p"\n[checker]\n{line}\n'),
    "loops.WORKTREE_FIELDS": (LOOP, 'prompt = "p"\n[worktree]\n{line}\n'),
    "loops.DELIVER_FIELDS": (LOOP, 'prompt = "p"\n[deliver]\n{line}\n'),
    "loops.DELIVER_TAIL_FIELDS": (LOOP, 'prompt = "p"\n[deliver]\n{line}\n'),
    "github_source.GITHUB_FIELDS": (LOOP, '[tasks]\nsource = "github"\n{line}\n'),
    "github_source.REFUSED_FIELDS": (LOOP, '[tasks]\nsource = "github"\nkind = "prs"\n{line}\n'),
    "config.BUDGET_FIELDS": (CONFIG, "[budget]\n{line}\n"),
    "config.DAILY_BUDGET_FIELDS": (CONFIG, "[budget]\n{line}\n"),
    "config.UP_MANDATE_FIELDS": (CONFIG, "[budget]\n{line}\n"),
    "config.REVIEW_FIELDS": (CONFIG, "[review]\n{line}\n"),
    "config.VERSION_FIELD": (CONFIG, "{line}\n"),
    "config.DEFAULTS_FIELDS": (CONFIG, "[defaults]\n{line}\n"),
    "config.ENV_FIELDS": (CONFIG, "[env]\n{line}\n"),
    "config.WORKTREE_FIELDS": (CONFIG, "[worktree]\n{line}\n"),
    "config.DELIVER_FIELDS": (CONFIG, "[deliver]\n{line}\n"),
    "config.NOTIFY_HOOK_FIELDS": (CONFIG, "[notify]\n{line}\n"),
    "config.NOTIFY_FIELDS": (CONFIG, "[notify]\n{line}\n"),
    "config.PRICE_FIELDS": (CONFIG, "[prices.m]\n{line}\n"),
    "config.CHECKER_FIELDS": (CONFIG, "[checker]\n{line}\n"),
    "agents.NAME_FIELD": (AGENT, AGENT_BASE + "{line}\n"),
    "agents.BACKEND_FIELD": (AGENT, 'argv = ["true"]\n{line}\n'),
    "agents.TEXT_FIELDS": (AGENT, AGENT_BASE + "{line}\n"),
    "agents.INSTRUCTIONS_FIELD": (AGENT, AGENT_BASE + "{line}\n"),
    "agents.RUN_FIELDS": (AGENT, AGENT_BASE + "{line}\n"),
    "agents.ENV_FIELDS": (AGENT, AGENT_BASE + "[env]\n{line}\n"),
    "agents.ARGV_FIELD": (AGENT, 'backend = "command"\n{line}\n'),
    "agents.LAUNCH_FIELDS": (AGENT, AGENT_BASE + "{line}\n"),
    "agents.PERMISSION_FIELDS": (AGENT, AGENT_BASE + "{line}\n"),
    "agents.CONNECTORS_FIELD": (AGENT, 'backend = "claude"\n{line}\n'),
    "agents.SANDBOX_FIELD": (AGENT, AGENT_BASE + "{line}\n"),
    "agents.CODEX_FIELDS": (AGENT, AGENT_BASE + "{line}\n"),
    "agents.CLAUDE_FIELDS": (CLAUDE, "---\n{line}\n---\nbody\n"),
    "agents.CLAUDE_ACCEPTED": (CLAUDE, "---\ndescription: d\n{line}\n---\nbody\n"),
    "skills.NAME_FIELD": (SKILL, "---\ndescription: d\n{line}\n---\nbody\n"),
    "skills.SKILL_FIELDS": (SKILL, "---\nname: s\n{line}\n---\nbody\n"),
    "connectors.CONNECTOR_FIELDS": (CONFIG, "[connectors.c]\n{line}\n"),
    "sandbox.AGENT_SANDBOX_FIELDS": (AGENT, AGENT_BASE + "[sandbox]\n{line}\n"),
    "sandbox.PROJECT_SANDBOX_FIELD": (CONFIG, "[sandbox]\n{line}\n"),
    "traces.TRACES_FIELDS": (CONFIG, "[traces]\n{line}\n"),
    "traces.SWITCH_FIELDS": (CONFIG, "[traces]\n{line}\n"),
}


def module(name: str) -> ModuleType:
    return importlib.import_module(f"loopctl.definitions.{name}")


def specs() -> Iterator[tuple[str, tuple[Field, ...]]]:
    """Every module-level Field or tuple of Fields of the definition modules."""
    for name in MODULES:
        for attr, value in vars(module(name)).items():
            if isinstance(value, Field):
                yield f"{name}.{attr}", (value,)
            elif isinstance(value, tuple) and value and all(isinstance(f, Field) for f in value):
                yield f"{name}.{attr}", value


def typed_fields() -> Iterator[tuple[str, Field]]:
    for spec, fields in specs():
        for field in fields:
            if field.kind in TYPED_KINDS:
                yield spec, field


def wrong_value(field: Field, markdown: bool) -> str:
    """A value of the wrong type for the field's kind, in the file's own syntax."""
    if field.kind is schema.boolean:
        return "[1]" if markdown else '"yes"'
    return "true"


def load(root: Path, relative: str, problems: Problems) -> None:
    """Run the loader that owns `relative` (a config first, as `load_project` does)."""
    loaders: dict[str, Callable[[Path], object]] = {
        LOOP: lambda p: load_loop(p, problems, load_config(root / CONFIG, Problems())),
        CONFIG: lambda p: load_config(p, problems),
        AGENT: lambda p: load_toml_agent(p, problems, default_backend=None),
        CLAUDE: lambda p: load_claude_agent(p, problems),
        SKILL: lambda p: load_skill(p, problems),
    }
    loaders[relative](root / relative)


def test_every_spec_has_a_home_in_a_file() -> None:
    """A new spec must be placed here, so the tests below cover its keys."""
    assert sorted(name for name, _ in specs()) == sorted(HOMES)


@pytest.mark.parametrize(
    ("spec", "field"),
    list(typed_fields()),
    ids=[f"{spec}.{field.key}" for spec, field in typed_fields()],
)
def test_each_declared_key_is_read_from_its_own_line(
    tmp_path: Path, spec: str, field: Field
) -> None:
    """A wrong value under the declared key is reported on that key's line with the kind's
    own error: the loader reads that key, with that kind. A loader that skipped the field or
    read another key would report 'unknown key' or nothing."""
    relative, around = HOMES[spec]
    markdown = relative.endswith(".md")
    value = wrong_value(field, markdown)
    line = f"{field.key}: {value}" if markdown else f"{field.key} = {value}"
    text = around.format(line=line)
    path = tmp_path / relative
    path.parent.mkdir(parents=True)
    path.write_text(text)
    problems = Problems()
    load(tmp_path, relative, problems)
    number = text.splitlines().index(line) + 1
    shown = [f"{p.line}: {p.message}" for p in problems.errors]
    assert any(
        p.line == number and p.message.startswith(f"'{field.key}'") and " must be " in p.message
        for p in problems.errors
    ), f"{text}\n{shown}"


def declared_keys() -> set[str]:
    return {field.key for _, fields in specs() for field in fields}


def keys_named_in_code(name: str) -> Iterator[tuple[int, str]]:
    """(line, key) for each string literal given as the key of a Table method call."""
    source = Path(module(name).__file__ or "").read_text()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in KEY_METHODS
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


@pytest.mark.parametrize("name", MODULES)
def test_every_key_a_loader_names_is_declared(name: str) -> None:
    """A loader's rules ask about keys by name (`has("commands")`, `error("approve", …)`);
    each must be a declared field, or the rule looks at a key the file never has."""
    declared = declared_keys()
    undeclared = [
        f"{name}.py:{line}: {key!r}"
        for line, key in keys_named_in_code(name)
        if key not in declared
    ]
    assert undeclared == []


def test_the_key_scan_sees_rule_keys() -> None:
    """The scan above is not vacuous: it finds the keys rules name in loops.py."""
    keys = {key for _, key in keys_named_in_code("loops")}
    assert {"commands", "approve", "actions", "watch", "copy"} <= keys


def test_a_codex_agent_keeps_codex_keys_as_known(tmp_path: Path) -> None:
    """`accepted` fields are known without being read: no unknown-key warning for them."""
    path = tmp_path / ".codex" / "agents" / "a.toml"
    path.parent.mkdir(parents=True)
    path.write_text('name = "a"\nmodel_reasoning_effort = "high"\nmodle = "x"\n')
    problems = Problems()
    agent = load_toml_agent(path, problems, default_backend=Backend.CODEX)
    assert agent is not None
    assert [(p.line, p.message) for p in problems.items] == [
        (3, "unknown key 'modle' (did you mean 'model'?) (kept for Codex, unused by loopctl)")
    ]


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_spec_default_replaces_an_empty_value_only_where_it_says(tmp_path: Path) -> None:
    """`blank_default`: an empty remote, author or id means the default; an empty maker agent
    stays empty (the loader's own default is the project's, and "" is not that)."""
    write(tmp_path, CONFIG, '[defaults]\nmaker = "m"\n[deliver]\nauthor = ""\n')
    config = load_config(tmp_path / CONFIG, Problems())
    assert config.author == "loopctl <loopctl@localhost>"
    problems = Problems()
    path = write(
        tmp_path,
        LOOP,
        '[tasks]\ncommand = ["true"]\nid = ""\n[deliver]\nremote = ""\n[maker]\nagent = ""\n',
    )
    loop = load_loop(path, problems, config)
    assert problems.items == []
    assert loop is not None
    assert loop.tasks is not None
    assert (loop.tasks.id, loop.deliver.remote, loop.maker.agent) == ("{id}", "origin", "")
    agent = load_toml_agent(
        write(tmp_path, AGENT, 'name = ""\n' + AGENT_BASE), Problems(), default_backend=None
    )
    assert agent is not None
    assert agent.name == "a"


def test_project_defaults_fill_what_a_loop_table_leaves_out(tmp_path: Path) -> None:
    """Defaults passed to `read` by name replace the spec's own: [maker] without `agent` uses
    [defaults] maker, [worktree] without `keep` the project's keep."""
    write(tmp_path, CONFIG, '[defaults]\nmaker = "m"\n[worktree]\nkeep = "never"\n')
    config = load_config(tmp_path / CONFIG, Problems())
    path = write(
        tmp_path, LOOP, 'prompt = "p"\n[maker]\nskills = ["s"]\n[worktree]\npool = false\n'
    )
    loop = load_loop(path, Problems(), config)
    assert loop is not None
    assert (loop.maker.agent, loop.maker.skills) == ("m", ("s",))
    assert (loop.worktree.keep.value, loop.worktree.pool) == ("never", False)
    bare = load_loop(write(tmp_path, LOOP, 'prompt = "p"\n'), Problems(), config)
    assert bare is not None
    assert (bare.maker.agent, bare.worktree.keep.value) == ("m", "never")


def test_a_key_read_only_when_present_keeps_what_came_before(tmp_path: Path) -> None:
    """`if_present`: `commands` absent leaves `command`'s list; present, it replaces it."""
    config = load_config(tmp_path / CONFIG, Problems())
    one = load_loop(
        write(tmp_path, LOOP, 'prompt = "p"\n[checker]\ncommand = ["pytest"]\n'), Problems(), config
    )
    assert one is not None
    assert one.checker.commands == (("pytest",),)
    two = load_loop(
        write(tmp_path, LOOP, 'prompt = "p"\n[checker]\ncommands = [["a"], ["b"]]\n'),
        Problems(),
        config,
    )
    assert two is not None
    assert two.checker.commands == (("a",), ("b",))


SPEC_ERRORS = [
    (
        LOOP,
        'prompt = "p"\novercap = 1\noverlap = "qeue-one"\n',
        (3, "'overlap' must be one of skip, queue-one, not 'qeue-one' (did you mean 'queue-one'?)"),
    ),
    (
        LOOP,
        'prompt = "p"\n[budget]\nmax_iterations = 0\n',
        (3, "'max_iterations' in [budget] must be at least 1, not 0"),
    ),
    (LOOP, '[tasks]\nsource = "github"\n', (1, "missing required key 'kind' in [tasks]")),
    (
        LOOP,
        'prompt = "p"\ntz = "Mars/Olympus"\n',
        (2, "unknown time zone 'Mars/Olympus' (use an IANA name such as \"UTC\")"),
    ),
    (
        CONFIG,
        '[notify]\non = ["aproval"]\n',
        (
            2,
            "'on' names 'aproval'; inbox kinds are approval, failed, escalation, unhandled,"
            " proposal (did you mean 'approval'?)",
        ),
    ),
    (
        SKILL,
        "---\nname: s\ndescription: d\ncompatibility: " + "c" * 501 + "\n---\n",
        (4, "'compatibility' is 501 characters; at most 500"),
    ),
    (
        AGENT,
        AGENT_BASE + "context_window = 999\n",
        (3, "'context_window' must be at least 1000, not 999"),
    ),
    # A number's minimum (a negative budget), a list that takes no lone string (an agent's
    # args: "--x" is not split into words), a required command.
    (CONFIG, "[budget]\nmax_usd = -5\n", (2, "'max_usd' in [budget] must be at least 0.0, not -5")),
    (AGENT, AGENT_BASE + 'args = "--x"\n', (3, "'args' must be a list of strings, not a string")),
    (LOOP, '[tasks]\nid = "x"\n', (1, "missing required key 'command' in [tasks]")),
]


@pytest.mark.parametrize(("relative", "text", "expected"), SPEC_ERRORS)
def test_a_spec_s_choices_minimum_required_and_check_report_on_the_key(
    tmp_path: Path, relative: str, text: str, expected: tuple[int, str]
) -> None:
    write(tmp_path, relative, text)
    problems = Problems()
    load(tmp_path, relative, problems)
    assert expected in [(p.line, p.message) for p in problems.errors]


def test_a_github_source_refuses_command_and_id_once_each(tmp_path: Path) -> None:
    """`refused` keys: one error each on the key's line, and not "unknown key" as well."""
    text = '[tasks]\nsource = "github"\nkind = "issues"\ncommand = ["x"]\nid = "x"\n'
    problems = Problems()
    load_loop(write(tmp_path, LOOP, text), problems, load_config(tmp_path / CONFIG, Problems()))
    assert [(p.line, p.message) for p in problems.items] == [
        (4, "'command' in [tasks]: source = \"github\" runs `gh` itself; drop 'command'"),
        (
            5,
            "'id' in [tasks]: a github task's id is fixed"
            ' ("issue-N" / "pr-N") so it stays stable',
        ),
    ]


def test_a_sub_table_read_whole_reports_its_unknown_keys(tmp_path: Path) -> None:
    problems = Problems()
    text = 'prompt = "p"\n[maker]\nagnet = "x"\n'
    load_loop(write(tmp_path, LOOP, text), problems, load_config(tmp_path / CONFIG, Problems()))
    assert [(p.line, p.message) for p in problems.items] == [
        (3, "unknown key 'agnet' in [maker] (did you mean 'agent'?)")
    ]


def test_an_empty_list_of_inbox_kinds_means_every_kind(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, CONFIG, "[notify]\non = []\n"), Problems())
    assert config.notify.on == ("approval", "failed", "escalation", "unhandled", "proposal")


def test_a_hyphenated_key_fills_its_underscored_attribute(tmp_path: Path) -> None:
    """`allowed-tools` in SKILL.md is the skill's `allowed_tools`."""
    text = "---\nname: s\ndescription: d\nallowed-tools: Bash Read\n---\nbody\n"
    problems = Problems()
    skill = load_skill(write(tmp_path, SKILL, text), problems)
    assert problems.items == []
    assert skill is not None
    assert skill.allowed_tools == ("Bash", "Read")

"""Loop definitions: .loop/loops/<name>.toml."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from string import Formatter
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from loopctl.definitions.config import Budget, Config, KeepPolicy, read_budget
from loopctl.definitions.fields import Table, did_you_mean, format_duration, validate_cron
from loopctl.definitions.github_source import (
    GithubKind,
    GithubQuery,
    check_safe_template,
    read_github_query,
)
from loopctl.definitions.sandbox import checker_network
from loopctl.definitions.schema import (
    Field,
    Values,
    boolean,
    command,
    commands,
    declared,
    duration,
    folders,
    globs,
    read,
    read_field,
    read_table,
    string,
    strings,
)
from loopctl.definitions.scope import ScopeSpec, read_scope
from loopctl.definitions.source import Problems, parse_toml
from loopctl.egress import HostPort, NetworkMode

LOOP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
# The delivery steps a loop names without an argv. Each is one object in loopctl/delivery/steps/
# (delivery sits above definitions, so the names are listed here too); a test fails when the
# two disagree (tests/delivery/test_step_registry.py).
BUILTIN_ACTIONS = ("commit", "push", "pr", "merge")


class TriggerKind(StrEnum):
    EVERY = "every"
    CRON = "cron"
    WATCH = "watch"


@dataclass(frozen=True, slots=True)
class Trigger:
    kind: TriggerKind
    every_s: float | None = None
    cron: str | None = None
    watch: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.kind is TriggerKind.EVERY and self.every_s is not None:
            return f"every {format_duration(self.every_s)}"
        if self.kind is TriggerKind.CRON:
            return f"cron {self.cron}"
        return "watch " + ", ".join(self.watch)


@dataclass(frozen=True, slots=True)
class TaskSource:
    """Where a tick's tasks come from: a command printing JSON, or GitHub via `gh`."""

    command: tuple[str, ...]
    id: str = "{id}"
    base: str | None = None
    prompt: str | None = None
    dedupe: str = "none"  # none | base
    source: str = "command"  # command | github
    github: GithubQuery | None = None  # source = "github"


@dataclass(frozen=True, slots=True)
class MakerSpec:
    agent: str | None = None
    skills: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    allow_self_edit: bool = False


@dataclass(frozen=True, slots=True)
class CheckerSpec:
    commands: tuple[tuple[str, ...], ...] = ()
    agent: str | None = None
    protect: tuple[str, ...] = ()
    timeout_s: float = 1800.0
    # A command that runs a known test runner protects that runner's files too, unless the
    # loop says `protect = []` outright.
    runner_protect: bool = True
    # A passing check of a base is reused while nothing it depends on changes (engine.check_cache);
    # false for a check whose result depends on the outside world.
    cache: bool = True
    # Checks run the agent's code: no network unless the loop says (issue 25).
    network: NetworkMode = NetworkMode.NONE
    hosts: tuple[HostPort, ...] = ()  # network = [...]: reachable through the proxy


@dataclass(frozen=True, slots=True)
class WorktreeSpec:
    setup: tuple[tuple[str, ...], ...] = ()
    copy: tuple[str, ...] = ()
    keep: KeepPolicy = KeepPolicy.ON_FAILURE
    # None: detected from the worktree (loopctl.seeds.DEFAULT_INPUTS / DEFAULT_PRESERVE).
    setup_inputs: tuple[str, ...] | None = None
    preserve: tuple[str, ...] | None = None
    pool: bool = True  # finished worktrees are recycled for the next task


@dataclass(frozen=True, slots=True)
class Action:
    """One delivery step: a built-in (commit, push, pr, merge) or a custom command."""

    name: str
    argv: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class DeliverSpec:
    actions: tuple[Action, ...] = (Action("commit"),)
    approve: tuple[str, ...] = ()
    remote: str = "origin"
    author: str | None = None


@dataclass(frozen=True, slots=True)
class Loop:
    """A loop as its definition file describes it, with project defaults applied."""

    name: str
    path: Path
    description: str = ""
    trigger: Trigger | None = None
    goal: str | None = None
    prompt: str | None = None
    rules: tuple[str, ...] = ()
    tasks: TaskSource | None = None
    maker: MakerSpec = field(default_factory=MakerSpec)
    checker: CheckerSpec = field(default_factory=CheckerSpec)
    worktree: WorktreeSpec = field(default_factory=WorktreeSpec)
    budget: Budget = field(default_factory=Budget)
    deliver: DeliverSpec = field(default_factory=DeliverSpec)
    scope: ScopeSpec = field(default_factory=ScopeSpec)  # [scope]: what its work may touch
    overlap: str = "skip"
    catch_up: str = "one"
    jitter_s: float | None = None
    tz: str | None = None


def _check_template(table: Table, key: str, template: str | None) -> None:
    if template is None:
        return
    try:
        for _literal, name, _spec, _conv in Formatter().parse(template):
            if name is not None and (name == "" or not re.match(r"^[A-Za-z_][\w.]*$", name)):
                table.error(key, f"'{key}' has a bad placeholder {{{name}}}: use {{field}}")
                return
    except ValueError as exc:
        table.error(key, f"'{key}' is not a valid template: {exc} (write {{{{ for a literal brace)")


def _check_tz(table: Table, key: str, tz: str) -> None:
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        table.error(key, f'unknown time zone {tz!r} (use an IANA name such as "UTC")')


def _inside_repository(table: Table, key: str, patterns: tuple[str, ...]) -> None:
    """`setup_inputs`: files or globs inside the repository whose content decides setup."""
    for pattern in patterns:
        if pattern.startswith("/") or ".." in Path(pattern).parts or "**" in pattern:
            table.error(
                key,
                f"{table.where(key)}: {pattern!r} must be a file or a glob inside"
                " the repository (no '..', no '**')",
            )
            return


def _actions(table: Table, field: Field, default: tuple[Action, ...]) -> tuple[Action, ...]:
    raw_actions = table.raw(field.key)
    return default if raw_actions is None else _read_actions(table, raw_actions)


# The keys of each table, in the order they are read (and their problems reported in): a rule
# across keys that reports before a key is read splits a table's fields in two.
DESCRIPTION_FIELD = Field("description", string, "")
TRIGGER_FIELDS = (
    Field("every", duration),
    Field("cron", string),
    Field("watch", globs),
)
LOOP_FIELDS = (
    Field("goal", string),
    Field("prompt", string),
    Field("rules", strings),
    Field("overlap", string, "skip", choices=("skip", "queue-one")),
    Field("catch_up", string, "one", choices=("one", "none")),
    Field("jitter", duration, attr="jitter_s"),
    Field("tz", string, check=_check_tz),
)
TASK_SOURCE_FIELD = Field("source", string, "command", choices=("command", "github"))
COMMAND_TASK_FIELDS = (
    Field("command", command, required=True),
    Field("id", string, "{id}", blank_default=True),
)
TASK_FIELDS = (
    Field("base", string),
    Field("prompt", string),
    Field("dedupe", string, "none", choices=("none", "base")),
)
MAKER_FIELDS = (
    Field("agent", string),
    Field("skills", strings),
    Field("scope", globs),
    Field("allow_self_edit", boolean, False),
)
CHECKER_FIELDS = (
    Field("command", commands, attr="commands"),
    # `commands` (when given) replaces `command`; giving both is an error reported between.
    Field("commands", commands, if_present=True),
    Field("protect", globs),
    Field("network", checker_network, (NetworkMode.NONE, ())),
    Field("agent", string),
    Field("timeout", duration, 1800.0, attr="timeout_s"),
    Field("cache", boolean, True),
)
WORKTREE_FIELDS = (
    Field("setup", commands),
    Field("copy", globs),
    Field("keep", string, KeepPolicy.ON_FAILURE.value, choices=tuple(k.value for k in KeepPolicy)),
    Field("setup_inputs", globs, if_present=True, check=_inside_repository),
    Field("preserve", folders),
    Field("pool", boolean, True),
)
DELIVER_FIELDS = (
    Field("actions", _actions, (Action("commit"),)),
    Field("approve", strings),
)
DELIVER_TAIL_FIELDS = (
    Field("remote", string, "origin", blank_default=True),
    Field("author", string),
)


def _read_trigger(table: Table) -> Trigger | None:
    given = [key for key in declared(TRIGGER_FIELDS) if table.has(key)]
    if len(given) > 1:
        table.error(given[1], f"give at most one trigger: {' or '.join(given)}, not both")
    values = read(table, TRIGGER_FIELDS)
    every, cron, watch = values["every"], values["cron"], values["watch"]
    if cron is not None:
        problem = validate_cron(cron)
        if problem:
            table.error("cron", problem)
            return None
    if table.has("watch") and not watch and not table.failed:
        table.error("watch", "'watch' needs at least one glob pattern")
    if len(given) > 1:
        return None
    if every is not None:
        return Trigger(TriggerKind.EVERY, every_s=every)
    if cron is not None:
        return Trigger(TriggerKind.CRON, cron=cron)
    if watch:
        return Trigger(TriggerKind.WATCH, watch=watch)
    return None


def _read_action(deliver: Table, index: int, item: object) -> Action | None:
    """One entry of `actions`: a built-in's name or `{ name = "…", argv = [...] }`."""
    if isinstance(item, str):
        if item in BUILTIN_ACTIONS:
            return Action(item)
        deliver.error(
            "actions",
            f"unknown action {item!r}{did_you_mean(item, BUILTIN_ACTIONS)}; built-ins are"
            f' {", ".join(BUILTIN_ACTIONS)}, or use {{ name = "…", argv = [...] }}',
        )
        return None
    if not isinstance(item, dict):
        deliver.error("actions", f"actions[{index}] must be a name or a table")
        return None
    name = item.get("name")
    extra = set(item) - {"name", "argv"}
    if not isinstance(name, str) or not re.match(r"^[a-z][a-z0-9_-]*$", name):
        deliver.error("actions", f"actions[{index}] needs a 'name' of lowercase letters")
        return None
    if extra:
        deliver.error("actions", f"actions[{index}] has unknown key(s) {', '.join(sorted(extra))}")
        return None
    argv = item.get("argv")
    if isinstance(argv, str):
        try:
            argv = shlex.split(argv)
        except ValueError as exc:
            deliver.error("actions", f"actions[{index}].argv cannot be split: {exc}")
            return None
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        deliver.error("actions", f"actions[{index}] needs 'argv', a list of strings")
        return None
    return Action(name, tuple(argv))


def _read_actions(deliver: Table, raw_actions: object) -> tuple[Action, ...]:
    if not isinstance(raw_actions, list):
        deliver.error("actions", '\'actions\' must be a list like ["commit", "push"]')
        return ()
    found = (_read_action(deliver, index, item) for index, item in enumerate(raw_actions))
    actions = tuple(action for action in found if action is not None)
    names = [a.name for a in actions]
    for name in names:
        if names.count(name) > 1:
            deliver.error("actions", f"action {name!r} is listed twice")
            break
    return actions


def _valid_name(path: Path, problems: Problems) -> bool:
    name = path.stem
    if name == "goal":
        problems.error(
            path, None, "the loop name 'goal' is reserved for `loopctl goal`; rename the file"
        )
        return False
    if not LOOP_NAME.match(name):
        problems.error(
            path,
            None,
            f"loop name {name!r} (the file name) must be 1-64 letters, digits, '_' or '-',"
            " starting with a letter or digit",
        )
        return False
    return True


def load_loop(path: Path, problems: Problems, config: Config) -> Loop | None:
    """Parse one loop file; problems are recorded, and None returned when it is unusable."""
    if not _valid_name(path, problems):
        return None
    errors_before = len(problems.errors)
    doc = parse_toml(path, problems)
    if doc is None:
        return None
    table = Table.of(doc, problems)
    description = read_field(table, DESCRIPTION_FIELD, DESCRIPTION_FIELD.default)
    trigger = _read_trigger(table)
    values = read(table, LOOP_FIELDS)
    tasks_table = table.table("tasks")
    tasks = _read_tasks(tasks_table) if tasks_table is not None else None
    if tasks is None and not values["prompt"] and not values["goal"] and tasks_table is None:
        table.error(None, "a loop needs work to do: set 'prompt', 'goal' or a [tasks] table")
    maker = read_table(table, "maker", MAKER_FIELDS, agent=config.maker)
    checker = _read_checker(table, config)
    worktree = _read_worktree(table, config)
    budget = read_budget(table.table("budget"), config.budget)
    deliver = _read_deliver(table, tasks)
    scope = read_scope(table)
    table.finish()
    if len(problems.errors) > errors_before:
        return None
    return Loop(
        name=path.stem,
        path=path,
        description=description,
        trigger=trigger,
        tasks=tasks,
        maker=MakerSpec(**maker) if maker is not None else MakerSpec(agent=config.maker),
        checker=checker,
        worktree=worktree,
        budget=budget,
        deliver=deliver,
        scope=scope,
        **values,
    )


def _read_tasks(table: Table) -> TaskSource | None:
    """`[tasks]`: a command printing JSON, or (source = "github") issues or pull requests."""
    source = read_field(table, TASK_SOURCE_FIELD, TASK_SOURCE_FIELD.default)
    github: GithubQuery | None = None
    if source == "github":
        github = read_github_query(table)
        kind = "pr" if github is not None and github.kind is GithubKind.PRS else "issue"
        values: Values = {"command": (), "id": f"{kind}-{{number}}"}
    else:
        values = read(table, COMMAND_TASK_FIELDS)
    values.update(read(table, TASK_FIELDS))
    for key in ("id", "base", "prompt"):
        _check_template(table, key, values[key])
        if source == "github":
            check_safe_template(table, key, values[key])
    table.finish()
    if values["command"] is None or (source == "github" and github is None):
        return None
    return TaskSource(**values, source=source or "command", github=github)


def _read_checker(table: Table, config: Config) -> CheckerSpec:
    reach = (config.check_network, config.check_hosts)
    checker = table.table("checker")
    if checker is None:
        return CheckerSpec(network=reach[0], hosts=reach[1])
    first = read(checker, CHECKER_FIELDS[:1])
    if checker.has("commands") and first["commands"]:
        checker.error("commands", "give 'command' or 'commands', not both")
    values = read(checker, CHECKER_FIELDS[1:], commands=first["commands"], network=reach)
    checker.finish()
    network, hosts = values.pop("network")
    return CheckerSpec(
        **values,
        runner_protect=bool(values["protect"]) or not checker.has("protect"),
        network=network,
        hosts=hosts,
    )


def _read_worktree(table: Table, config: Config) -> WorktreeSpec:
    worktree = table.table("worktree")
    if worktree is None:
        return WorktreeSpec(keep=config.keep)
    values = read(worktree, WORKTREE_FIELDS, keep=config.keep.value)
    for pattern in values["copy"]:
        if pattern.startswith("/") or ".." in Path(pattern).parts:
            worktree.error("copy", f"copy pattern {pattern!r} must stay inside the repository")
    worktree.finish()
    return WorktreeSpec(**{**values, "keep": KeepPolicy(values["keep"])})


def _read_deliver(table: Table, tasks: TaskSource | None) -> DeliverSpec:
    deliver = table.table("deliver")
    if deliver is None:
        return DeliverSpec(author=None)
    values = read(deliver, DELIVER_FIELDS)
    actions: tuple[Action, ...] = values["actions"]
    names = [a.name for a in actions]
    approve = _approval(deliver, names, values["approve"])
    if tasks is not None and tasks.github is not None and tasks.github.kind == "prs":
        for action_name in ("pr", "merge"):
            if action_name in names:
                deliver.error(
                    "actions",
                    f"a pull request task cannot {action_name!r}: its `push` adds the work"
                    " to the pull request itself (review and merge it on GitHub)",
                )
    if "commit" in names and names.index("commit") != 0:
        deliver.error("actions", "'commit' must be the first action: the rest deliver it")
    for gated in approve:
        if gated not in names:
            deliver.error(
                "approve",
                f"'approve' names {gated!r}, which is not in 'actions'"
                f" ({', '.join(names) or 'none'})"
                f"{did_you_mean(gated, names)}",
            )
    tail = read(deliver, DELIVER_TAIL_FIELDS)
    deliver.finish()
    return DeliverSpec(actions=actions, approve=approve, **tail)


def _approval(deliver: Table, names: list[str], approve: tuple[str, ...]) -> tuple[str, ...]:
    """Policy (invariant 3): everything past `commit` waits for a human unless the loop writes
    its own list; `approve = []` waives every gate and earns a warning."""
    if not deliver.has("approve"):
        return tuple(n for n in names if n != "commit")
    for action_name in names:
        if action_name != "commit" and action_name not in approve:
            deliver.warn(
                "approve",
                f"action {action_name!r} runs without a human's approval (it is not in"
                " 'approve'); add it to 'approve' unless that is intended",
            )
    return approve

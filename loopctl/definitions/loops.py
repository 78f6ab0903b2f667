"""Loop definitions: .loop/loops/<name>.toml."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl.definitions.config import Budget, Config, KeepPolicy, read_budget
from loopctl.definitions.fields import Table, did_you_mean, validate_cron
from loopctl.definitions.sandbox import read_checker_network
from loopctl.definitions.source import Problems, parse_toml
from loopctl.egress import HostPort, NetworkMode

if TYPE_CHECKING:
    from loopctl.definitions.github_source import GithubQuery

LOOP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
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
        from loopctl.definitions.fields import format_duration

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
    overlap: str = "skip"
    catch_up: str = "one"
    jitter_s: float | None = None
    tz: str | None = None


def _check_template(table: Table, key: str, template: str | None) -> None:
    if template is None:
        return
    try:
        for _literal, name, _spec, _conv in string.Formatter().parse(template):
            if name is not None and (name == "" or not re.match(r"^[A-Za-z_][\w.]*$", name)):
                table.error(key, f"'{key}' has a bad placeholder {{{name}}}: use {{field}}")
                return
    except ValueError as exc:
        table.error(key, f"'{key}' is not a valid template: {exc} (write {{{{ for a literal brace)")


def _read_trigger(table: Table) -> Trigger | None:
    given = [key for key in ("every", "cron", "watch") if table.has(key)]
    if len(given) > 1:
        table.error(given[1], f"give at most one trigger: {' or '.join(given)}, not both")
    every = table.duration("every")
    cron = table.string("cron")
    watch = table.glob_list("watch")
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


def _read_actions(deliver: Table) -> tuple[Action, ...]:
    raw = deliver.raw("actions")
    if raw is None:
        return (Action("commit"),)
    if not isinstance(raw, list):
        deliver.error("actions", '\'actions\' must be a list like ["commit", "push"]')
        return ()
    actions: list[Action] = []
    for index, item in enumerate(raw):
        if isinstance(item, str):
            if item not in BUILTIN_ACTIONS:
                deliver.error(
                    "actions",
                    f"unknown action {item!r}{did_you_mean(item, BUILTIN_ACTIONS)}; built-ins are"
                    f' {", ".join(BUILTIN_ACTIONS)}, or use {{ name = "…", argv = [...] }}',
                )
                continue
            actions.append(Action(item))
        elif isinstance(item, dict):
            name = item.get("name")
            argv = item.get("argv")
            extra = set(item) - {"name", "argv"}
            if not isinstance(name, str) or not re.match(r"^[a-z][a-z0-9_-]*$", name):
                deliver.error("actions", f"actions[{index}] needs a 'name' of lowercase letters")
                continue
            if extra:
                deliver.error(
                    "actions", f"actions[{index}] has unknown key(s) {', '.join(sorted(extra))}"
                )
                continue
            if isinstance(argv, str):
                import shlex

                try:
                    argv = shlex.split(argv)
                except ValueError as exc:
                    deliver.error("actions", f"actions[{index}].argv cannot be split: {exc}")
                    continue
            if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
                deliver.error("actions", f"actions[{index}] needs 'argv', a list of strings")
                continue
            actions.append(Action(name, tuple(argv)))
        else:
            deliver.error("actions", f"actions[{index}] must be a name or a table")
    names = [a.name for a in actions]
    for name in names:
        if names.count(name) > 1:
            deliver.error("actions", f"action {name!r} is listed twice")
            break
    return tuple(actions)


def load_loop(path: Path, problems: Problems, config: Config) -> Loop | None:
    """Parse one loop file; problems are recorded, and None returned when it is unusable."""
    name = path.stem
    if name == "goal":
        problems.error(
            path, None, "the loop name 'goal' is reserved for `loopctl goal`; rename the file"
        )
        return None
    if not LOOP_NAME.match(name):
        problems.error(
            path,
            None,
            f"loop name {name!r} (the file name) must be 1-64 letters, digits, '_' or '-',"
            " starting with a letter or digit",
        )
        return None
    errors_before = len(problems.errors)
    doc = parse_toml(path, problems)
    if doc is None:
        return None
    table = Table.of(doc, problems)
    description = table.string("description", "") or ""
    trigger = _read_trigger(table)
    goal = table.string("goal")
    prompt = table.string("prompt")
    rules = table.string_list("rules")
    overlap = table.string("overlap", "skip", choices=("skip", "queue-one")) or "skip"
    catch_up = table.string("catch_up", "one", choices=("one", "none")) or "one"
    jitter_s = table.duration("jitter")
    tz = table.string("tz")
    if tz is not None:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            table.error("tz", f'unknown time zone {tz!r} (use an IANA name such as "UTC")')

    tasks = None
    tasks_table = table.table("tasks")
    if tasks_table is not None:
        source = tasks_table.string("source", "command", choices=("command", "github"))
        github: GithubQuery | None = None
        if source == "github":
            from loopctl.definitions.github_source import (
                GithubKind,
                check_safe_template,
                read_github_query,
            )

            github = read_github_query(tasks_table)
            command: tuple[str, ...] | None = ()
            kind = "pr" if github is not None and github.kind is GithubKind.PRS else "issue"
            id_template = f"{kind}-{{number}}"
        else:
            command = tasks_table.argv("command", required=source == "command")
            id_template = tasks_table.string("id", "{id}") or "{id}"
        base = tasks_table.string("base")
        task_prompt = tasks_table.string("prompt")
        dedupe = tasks_table.string("dedupe", "none", choices=("none", "base")) or "none"
        for key, value in (("id", id_template), ("base", base), ("prompt", task_prompt)):
            _check_template(tasks_table, key, value)
            if source == "github":
                check_safe_template(tasks_table, key, value)
        tasks_table.finish()
        if command is not None and (source != "github" or github is not None):
            tasks = TaskSource(
                command, id_template, base, task_prompt, dedupe, source or "command", github
            )
    if tasks is None and not prompt and not goal and tasks_table is None:
        table.error(None, "a loop needs work to do: set 'prompt', 'goal' or a [tasks] table")

    maker = MakerSpec(agent=config.maker)
    maker_table = table.table("maker")
    if maker_table is not None:
        maker = MakerSpec(
            agent=maker_table.string("agent", config.maker),
            skills=maker_table.string_list("skills"),
            scope=maker_table.glob_list("scope"),
            allow_self_edit=maker_table.boolean("allow_self_edit", False),
        )
        maker_table.finish()

    checker = CheckerSpec(network=config.check_network, hosts=config.check_hosts)
    checker_table = table.table("checker")
    if checker_table is not None:
        commands = checker_table.argv_list("command")
        if checker_table.has("commands"):
            if commands:
                checker_table.error("commands", "give 'command' or 'commands', not both")
            commands = checker_table.argv_list("commands")
        protect = checker_table.glob_list("protect")
        network, hosts = read_checker_network(checker_table, (checker.network, checker.hosts))
        checker = CheckerSpec(
            commands=commands,
            agent=checker_table.string("agent"),
            protect=protect,
            timeout_s=checker_table.duration("timeout", 1800.0) or 1800.0,
            runner_protect=bool(protect) or not checker_table.has("protect"),
            cache=checker_table.boolean("cache", True),
            network=network,
            hosts=hosts,
        )
        checker_table.finish()

    worktree = WorktreeSpec(keep=config.keep)
    worktree_table = table.table("worktree")
    if worktree_table is not None:
        worktree = WorktreeSpec(
            setup=worktree_table.argv_list("setup"),
            copy=worktree_table.glob_list("copy"),
            keep=KeepPolicy(
                worktree_table.string(
                    "keep", config.keep.value, choices=[k.value for k in KeepPolicy]
                )
                or config.keep
            ),
            setup_inputs=_setup_inputs(worktree_table),
            preserve=worktree_table.relative_paths("preserve"),
            pool=worktree_table.boolean("pool", True),
        )
        for pattern in worktree.copy:
            if pattern.startswith("/") or ".." in Path(pattern).parts:
                worktree_table.error(
                    "copy", f"copy pattern {pattern!r} must stay inside the repository"
                )
        worktree_table.finish()

    budget = read_budget(table.table("budget"), config.budget)

    deliver = DeliverSpec(author=None)
    deliver_table = table.table("deliver")
    if deliver_table is not None:
        actions = _read_actions(deliver_table)
        names = [a.name for a in actions]
        # Policy (invariant 3): everything past `commit` waits for a human unless the loop
        # writes its own list; `approve = []` waives every gate and earns a warning.
        explicit = deliver_table.has("approve")
        approve = deliver_table.string_list("approve")
        if not explicit:
            approve = tuple(n for n in names if n != "commit")
        else:
            for action_name in names:
                if action_name != "commit" and action_name not in approve:
                    deliver_table.warn(
                        "approve",
                        f"action {action_name!r} runs without a human's approval (it is not in"
                        " 'approve'); add it to 'approve' unless that is intended",
                    )
        if tasks is not None and tasks.github is not None and tasks.github.kind == "prs":
            for action_name in ("pr", "merge"):
                if action_name in names:
                    deliver_table.error(
                        "actions",
                        f"a pull request task cannot {action_name!r}: its `push` adds the work"
                        " to the pull request itself (review and merge it on GitHub)",
                    )
        if "commit" in names and names.index("commit") != 0:
            deliver_table.error("actions", "'commit' must be the first action: the rest deliver it")
        for gated in approve:
            if gated not in names:
                deliver_table.error(
                    "approve",
                    f"'approve' names {gated!r}, which is not in 'actions'"
                    f" ({', '.join(names) or 'none'})"
                    f"{did_you_mean(gated, names)}",
                )
        deliver = DeliverSpec(
            actions=actions,
            approve=approve,
            remote=deliver_table.string("remote", "origin") or "origin",
            author=deliver_table.string("author"),
        )
        deliver_table.finish()

    table.finish()
    if len(problems.errors) > errors_before:
        return None
    return Loop(
        name=name,
        path=path,
        description=description,
        trigger=trigger,
        goal=goal,
        prompt=prompt,
        rules=rules,
        tasks=tasks,
        maker=maker,
        checker=checker,
        worktree=worktree,
        budget=budget,
        deliver=deliver,
        overlap=overlap,
        catch_up=catch_up,
        jitter_s=jitter_s,
        tz=tz,
    )


def _setup_inputs(table: Table) -> tuple[str, ...] | None:
    """`setup_inputs`: files or globs inside the repository whose content decides setup."""
    if not table.has("setup_inputs"):
        return None
    patterns = table.glob_list("setup_inputs")
    for pattern in patterns:
        if pattern.startswith("/") or ".." in Path(pattern).parts or "**" in pattern:
            table.error(
                "setup_inputs",
                f"{table.where('setup_inputs')}: {pattern!r} must be a file or a glob inside"
                " the repository (no '..', no '**')",
            )
            return ()
    return patterns

"""Project defaults: .loop/config.toml."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from loopctl.definitions.connectors import Connector, read_connectors
from loopctl.definitions.fields import Table, did_you_mean
from loopctl.definitions.sandbox import SandboxMode, read_checker_network, read_project_sandbox
from loopctl.definitions.source import Problems, parse_toml
from loopctl.definitions.traces import TracesConfig, read_traces
from loopctl.egress import HostPort, NetworkMode

CONFIG_VERSION = 1


class KeepPolicy(StrEnum):
    ALWAYS = "always"
    ON_FAILURE = "on-failure"
    NEVER = "never"


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits a loop's ticks must stay within (DESIGN §5 invariant 4)."""

    max_iterations: int = 5
    max_tasks: int = 10
    max_parallel: int = 1
    max_tokens: int | None = None
    max_usd: float | None = None
    max_wall_s: float | None = None
    stop_after_identical_failures: int = 2


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens for a model, for backends that do not report cost."""

    input: float
    output: float
    cached_input: float | None = None


@dataclass(frozen=True, slots=True)
class Notify:
    """Where to tell a human that the inbox needs them (see loopctl.notify)."""

    command: tuple[str, ...] | None = None
    webhook: str | None = None
    on: tuple[str, ...] = ("approval", "failed", "escalation", "unhandled")
    webhook_env: str | None = None  # the URL is read from this variable, never from the file
    digest: str | None = None  # "HH:MM" local time: one summary a day


@dataclass(frozen=True, slots=True)
class Config:
    """The project's defaults; every field has a sane value when the file is absent."""

    path: Path | None = None
    maker: str | None = None
    checker: str | None = None
    budget: Budget = field(default_factory=Budget)
    env_allow: tuple[str, ...] = ()
    conditions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    worktree_root: Path | None = None
    keep: KeepPolicy = KeepPolicy.ON_FAILURE
    # [worktree] bounds on dependency seeds (loopctl.seeds), applied by `worktrees prune`.
    max_seed_size: int | None = None
    max_seed_age_s: float | None = None
    author: str = "loopctl <loopctl@localhost>"
    notify: Notify = field(default_factory=Notify)
    prices: tuple[tuple[str, Price], ...] = ()
    # The daily fuse across all loops (`[budget]` here only: a loop's own [budget] is per tick).
    max_tokens_per_day: int | None = None
    max_usd_per_day: float | None = None
    connectors: tuple[Connector, ...] = ()  # [connectors.NAME]: MCP servers agents may use
    traces: TracesConfig = field(default_factory=TracesConfig)  # [traces]: OpenTelemetry
    sandbox: SandboxMode = SandboxMode.REQUIRED  # [sandbox] mode: agents confined unless "off"
    # [checker] network: what checks may reach where a loop does not say (goals too)
    check_network: NetworkMode = NetworkMode.NONE
    check_hosts: tuple[HostPort, ...] = ()

    def condition_map(self) -> dict[str, tuple[str, ...]]:
        return dict(self.conditions)

    def connector_map(self) -> dict[str, Connector]:
        return {connector.name: connector for connector in self.connectors}


def read_budget(table: Table | None, base: Budget) -> Budget:
    """Overlay a [budget] table on `base`."""
    if table is None:
        return base
    budget = replace(
        base,
        max_iterations=table.integer("max_iterations", base.max_iterations, minimum=1)
        or base.max_iterations,
        max_tasks=table.integer("max_tasks", base.max_tasks, minimum=1) or base.max_tasks,
        max_parallel=table.integer("max_parallel", base.max_parallel, minimum=1)
        or base.max_parallel,
        max_tokens=table.integer("max_tokens", base.max_tokens, minimum=1),
        max_usd=table.number("max_usd", base.max_usd),
        max_wall_s=table.duration("max_wall", base.max_wall_s),
        stop_after_identical_failures=table.integer(
            "stop_after_identical_failures", base.stop_after_identical_failures, minimum=1
        )
        or base.stop_after_identical_failures,
    )
    table.finish()
    return budget


def load_config(path: Path, problems: Problems) -> Config:
    """Read .loop/config.toml; a missing file gives the defaults."""
    if not path.exists() and not path.is_symlink():
        return Config()
    doc = parse_toml(path, problems)
    if doc is None:
        return Config(path=path)
    table = Table.of(doc, problems)
    version = table.integer("version", CONFIG_VERSION, minimum=1)
    if version is not None and version > CONFIG_VERSION:
        table.error("version", f"config version {version} is newer than this loopctl understands")
    maker = checker = None
    defaults = table.table("defaults")
    if defaults is not None:
        maker = defaults.string("maker")
        checker = defaults.string("checker")
        defaults.finish()
    budget_table = table.table("budget")
    max_tokens_per_day = max_usd_per_day = None
    if budget_table is not None:
        max_tokens_per_day = budget_table.integer("max_tokens_per_day", None, minimum=1)
        max_usd_per_day = budget_table.number("max_usd_per_day", None)
    budget = read_budget(budget_table, Budget())
    env_allow: tuple[str, ...] = ()
    env = table.table("env")
    if env is not None:
        env_allow = env.string_list("allow")
        env.finish()
    conditions: list[tuple[str, tuple[str, ...]]] = []
    cond_table = table.table("conditions")
    if cond_table is not None:
        for name in list(cond_table.data):
            argv = cond_table.argv(name)
            if argv is not None:
                conditions.append((" ".join(name.lower().split()), argv))
    worktree_root: Path | None = None
    keep = KeepPolicy.ON_FAILURE
    max_seed_size: int | None = None
    max_seed_age_s: float | None = None
    worktree = table.table("worktree")
    if worktree is not None:
        root_text = worktree.string("root")
        if root_text:
            root = Path(root_text).expanduser()
            worktree_root = root if root.is_absolute() else (path.parent.parent / root)
        keep = KeepPolicy(
            worktree.string("keep", keep.value, choices=[k.value for k in KeepPolicy]) or keep
        )
        max_seed_size = worktree.size("max_seed_size")
        max_seed_age_s = worktree.duration("max_seed_age")
        worktree.finish()
    author = "loopctl <loopctl@localhost>"
    deliver = table.table("deliver")
    if deliver is not None:
        author = deliver.string("author", author) or author
        deliver.finish()
    notify = Notify()
    notify_table = table.table("notify")
    if notify_table is not None:
        hook = notify_table.string("webhook")
        if hook is not None and not hook.startswith(("http://", "https://")):
            notify_table.error("webhook", "'webhook' must be an http:// or https:// URL")
        hook_env = notify_table.string("webhook_env")
        if hook_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", hook_env):
            notify_table.error(
                "webhook_env", f"'webhook_env' must name an environment variable, not {hook_env!r}"
            )
        if hook is not None and hook_env is not None:
            notify_table.error("webhook_env", "give 'webhook' or 'webhook_env', not both")
        digest = notify_table.string("digest")
        if digest is not None and not re.fullmatch(r"(?:[01]\d|2[0-3]):[0-5]\d", digest):
            notify_table.error("digest", f"'digest' must be a time like \"08:00\", not {digest!r}")
        kinds = ("approval", "failed", "escalation", "unhandled")
        on = notify_table.string_list("on") or notify.on
        for kind in on:
            if kind not in kinds:
                notify_table.error(
                    "on",
                    f"'on' names {kind!r}; inbox kinds are {', '.join(kinds)}"
                    f"{did_you_mean(kind, kinds)}",
                )
        notify = Notify(
            command=notify_table.argv("command"),
            webhook=hook,
            on=on,
            webhook_env=hook_env,
            digest=digest,
        )
        notify_table.finish()
    prices: list[tuple[str, Price]] = []
    prices_table = table.table("prices")
    if prices_table is not None:
        for model in list(prices_table.data):
            entry = prices_table.table(model)
            if entry is None:
                continue
            inp = entry.number("input", None)
            out = entry.number("output", None)
            cached = entry.number("cached_input", None)
            if inp is None or out is None:
                entry.error(
                    None,
                    f"[prices.\"{model}\"] needs both 'input' and 'output' (USD per 1M tokens)",
                )
            else:
                prices.append((model, Price(inp, out, cached)))
            entry.finish()
    connectors = read_connectors(table.table("connectors"))
    traces = read_traces(table.table("traces"), path.parent.parent)
    sandbox = read_project_sandbox(table.table("sandbox"))
    check_network: NetworkMode = NetworkMode.NONE
    check_hosts: tuple[HostPort, ...] = ()
    checker_table = table.table("checker")
    if checker_table is not None:
        check_network, check_hosts = read_checker_network(checker_table)
        checker_table.finish()
    table.finish()
    return Config(
        path=path,
        maker=maker,
        checker=checker,
        budget=budget,
        max_tokens_per_day=max_tokens_per_day,
        max_usd_per_day=max_usd_per_day,
        env_allow=env_allow,
        conditions=tuple(conditions),
        worktree_root=worktree_root,
        max_seed_size=max_seed_size,
        max_seed_age_s=max_seed_age_s,
        keep=keep,
        author=author,
        notify=notify,
        prices=tuple(prices),
        connectors=connectors,
        traces=traces,
        sandbox=sandbox,
        check_network=check_network,
        check_hosts=check_hosts,
    )

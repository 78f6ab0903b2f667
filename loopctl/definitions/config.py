"""Project defaults: .loop/config.toml."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from loopctl.definitions.connectors import Connector, read_connectors
from loopctl.definitions.fields import Table, did_you_mean, parse_until
from loopctl.definitions.sandbox import SandboxMode, checker_network, read_project_sandbox
from loopctl.definitions.schema import (
    Field,
    Values,
    boolean,
    command,
    duration,
    integer,
    number,
    read,
    read_field,
    read_table,
    size,
    string,
    strings,
)
from loopctl.definitions.source import Problems, parse_toml
from loopctl.definitions.traces import TracesConfig, read_traces
from loopctl.egress import HostPort, NetworkMode

CONFIG_VERSION = 1
INBOX_KINDS = ("approval", "failed", "escalation", "unhandled", "proposal")
DEFAULT_AUTHOR = "loopctl <loopctl@localhost>"


class KeepPolicy(StrEnum):
    ALWAYS = "always"
    ON_FAILURE = "on-failure"
    NEVER = "never"


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits a loop's ticks must stay within (invariant 4, docs/INVARIANTS.md)."""

    max_iterations: int = 5
    max_tasks: int = 10
    max_parallel: int = 1
    max_tokens: int | None = None
    max_usd: float | None = None
    max_wall_s: float | None = None
    stop_after_identical_failures: int = 2
    # A turn or check with no output and no file change for this long is ended as stalled
    # (loopctl.engine.liveness); long enough for a model's slowest silent answer.
    max_idle_s: float = 900.0


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens for a model, for backends that do not report cost."""

    input: float
    output: float
    cached_input: float | None = None


@dataclass(frozen=True, slots=True)
class Notify:
    """Where to tell a human that the inbox needs them (see loopctl.journal.notify)."""

    command: tuple[str, ...] | None = None
    webhook: str | None = None
    on: tuple[str, ...] = INBOX_KINDS
    webhook_env: str | None = None  # the URL is read from this variable, never from the file
    digest: str | None = None  # "HH:MM" local time: one summary a day
    report_on_stop: bool = False  # when `up` stops, send the report of its session


@dataclass(frozen=True, slots=True)
class Review:
    """`[review]`: the reviewer's capacity (loopctl.engine.review_gate): while `max_open` items
    await a human, loops whose work would open another wait."""

    max_open: int | None = None  # None: no cap


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
    author: str = DEFAULT_AUTHOR
    notify: Notify = field(default_factory=Notify)
    prices: tuple[tuple[str, Price], ...] = ()
    # The daily fuse across all loops (`[budget]` here only: a loop's own [budget] is per tick).
    max_tokens_per_day: int | None = None
    max_usd_per_day: float | None = None
    # The mandate of each `loopctl up` (`[budget]` here only; `up --until/--max-usd` override):
    # when it stops, and what it may spend, counted from its start.
    up_until: str | None = None  # "07:30", an ISO date-time or a duration ("8h")
    up_max_usd: float | None = None
    # The first pause of a backend that reported a rate limit but stated no reset (it doubles
    # per pause, up to an hour); None: backends.rate_limits.BACKOFF_S.
    rate_limit_backoff_s: float | None = None
    connectors: tuple[Connector, ...] = ()  # [connectors.NAME]: MCP servers agents may use
    traces: TracesConfig = field(default_factory=TracesConfig)  # [traces]: OpenTelemetry
    sandbox: SandboxMode = SandboxMode.REQUIRED  # [sandbox] mode: agents confined unless "off"
    # [checker] network: what checks may reach where a loop does not say (goals too)
    check_network: NetworkMode = NetworkMode.NONE
    check_hosts: tuple[HostPort, ...] = ()
    review: Review = field(default_factory=Review)  # [review] max_open

    def condition_map(self) -> dict[str, tuple[str, ...]]:
        return dict(self.conditions)

    def connector_map(self) -> dict[str, Connector]:
        return {connector.name: connector for connector in self.connectors}


def _not_newer(table: Table, key: str, version: int) -> None:
    if version > CONFIG_VERSION:
        table.error(key, f"config version {version} is newer than this loopctl understands")


def _url(table: Table, key: str, hook: str) -> None:
    if not hook.startswith(("http://", "https://")):
        table.error(key, f"'{key}' must be an http:// or https:// URL")


def _variable(table: Table, key: str, name: str) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        table.error(key, f"'{key}' must name an environment variable, not {name!r}")


def _clock_time(table: Table, key: str, digest: str) -> None:
    if not re.fullmatch(r"(?:[01]\d|2[0-3]):[0-5]\d", digest):
        table.error(key, f"'{key}' must be a time like \"08:00\", not {digest!r}")


def _until(table: Table, key: str, text: str) -> None:
    # A date-time would hold for one night and then make every command fail: clock or duration.
    try:
        if re.match(r"^\s*\d{4}-", text):
            raise ValueError(text)
        parse_until(text, datetime.now(UTC))
    except ValueError:
        forms = 'a clock time like "07:30" or a duration like "8h"'
        table.error(key, f"'{key}' must be {forms}, not {text!r}")


def _positive_usd(table: Table, key: str, usd: float) -> None:
    if not usd > 0:
        table.error(key, f"'{key}' must be more than 0 (USD), not {usd!r}")


def _inbox_kinds(table: Table, key: str, kinds: tuple[str, ...]) -> None:
    for kind in kinds:
        if kind not in INBOX_KINDS:
            table.error(
                key,
                f"'{key}' names {kind!r}; inbox kinds are {', '.join(INBOX_KINDS)}"
                f"{did_you_mean(kind, INBOX_KINDS)}",
            )


# The keys of each table, in the order they are read (and their problems reported in).
BUDGET_FIELDS = (
    Field("max_iterations", integer, minimum=1),
    Field("max_tasks", integer, minimum=1),
    Field("max_parallel", integer, minimum=1),
    Field("max_tokens", integer, minimum=1),
    Field("max_usd", number),
    Field("max_wall", duration, attr="max_wall_s"),
    Field("stop_after_identical_failures", integer, minimum=1),
    Field("max_idle", duration, attr="max_idle_s"),
)
DAILY_BUDGET_FIELDS = (  # [budget] of config.toml only, read before BUDGET_FIELDS
    Field("max_tokens_per_day", integer, minimum=1),
    Field("max_usd_per_day", number),
    Field("rate_limit_backoff", duration, attr="rate_limit_backoff_s"),
)
UP_MANDATE_FIELDS = (  # [budget] of config.toml only: bounds each `loopctl up`
    Field("up_until", string, check=_until),
    Field("up_max_usd", number, check=_positive_usd),
)
VERSION_FIELD = Field("version", integer, CONFIG_VERSION, minimum=1, check=_not_newer)
DEFAULTS_FIELDS = (Field("maker", string), Field("checker", string))
ENV_FIELDS = (Field("allow", strings, attr="env_allow"),)
WORKTREE_FIELDS = (
    Field("root", string),
    Field("keep", string, KeepPolicy.ON_FAILURE.value, choices=tuple(k.value for k in KeepPolicy)),
    Field("max_seed_size", size),
    Field("max_seed_age", duration, attr="max_seed_age_s"),
)
DELIVER_FIELDS = (Field("author", string, DEFAULT_AUTHOR, blank_default=True),)
# "give 'webhook' or 'webhook_env', not both" is reported between these two.
NOTIFY_HOOK_FIELDS = (
    Field("webhook", string, check=_url),
    Field("webhook_env", string, check=_variable),
)
NOTIFY_FIELDS = (
    Field("digest", string, check=_clock_time),
    Field("on", strings, INBOX_KINDS, blank_default=True, check=_inbox_kinds),
    Field("command", command),
    Field("report_on_stop", boolean, False),
)
PRICE_FIELDS = (
    Field("input", number),
    Field("output", number),
    Field("cached_input", number),
)
CHECKER_FIELDS = (Field("network", checker_network, (NetworkMode.NONE, ())),)
REVIEW_FIELDS = (Field("max_open", integer, minimum=1),)


def read_budget(table: Table | None, base: Budget) -> Budget:
    """Overlay a [budget] table on `base`."""
    if table is None:
        return base
    budget = replace(base, **read(table, BUDGET_FIELDS, **asdict(base)))
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
    read_field(table, VERSION_FIELD, VERSION_FIELD.default)
    values = read_table(table, "defaults", DEFAULTS_FIELDS) or {}
    budget_table = table.table("budget")
    if budget_table is not None:
        values.update(read(budget_table, DAILY_BUDGET_FIELDS))
        values.update(read(budget_table, UP_MANDATE_FIELDS))
    values["budget"] = read_budget(budget_table, Budget())
    values.update(read_table(table, "env", ENV_FIELDS) or {})
    values["conditions"] = _read_conditions(table.table("conditions"))
    values.update(_read_worktree(table, path))
    values.update(read_table(table, "deliver", DELIVER_FIELDS) or {})
    values["notify"] = _read_notify(table.table("notify"))
    values["prices"] = _read_prices(table.table("prices"))
    values["connectors"] = read_connectors(table.table("connectors"))
    values["traces"] = read_traces(table.table("traces"), path.parent.parent)
    values["sandbox"] = read_project_sandbox(table.table("sandbox"))
    checker = read_table(table, "checker", CHECKER_FIELDS)
    if checker is not None:
        values["check_network"], values["check_hosts"] = checker["network"]
    review = read_table(table, "review", REVIEW_FIELDS)
    if review is not None:
        values["review"] = Review(**review)
    table.finish()
    return Config(path=path, **values)


def _read_conditions(table: Table | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`[conditions]`: a name (any case and spacing) for each command that checks it."""
    if table is None:
        return ()
    conditions: list[tuple[str, tuple[str, ...]]] = []
    for name in list(table.data):
        argv = table.argv(name)
        if argv is not None:
            conditions.append((" ".join(name.lower().split()), argv))
    return tuple(conditions)


def _read_worktree(table: Table, path: Path) -> Values:
    values = read_table(table, "worktree", WORKTREE_FIELDS)
    if values is None:
        return {}
    root_text = values.pop("root")
    if root_text:
        root = Path(root_text).expanduser()
        values["worktree_root"] = root if root.is_absolute() else (path.parent.parent / root)
    values["keep"] = KeepPolicy(values["keep"])
    return values


def _read_notify(table: Table | None) -> Notify:
    if table is None:
        return Notify()
    values = read(table, NOTIFY_HOOK_FIELDS)
    if values["webhook"] is not None and values["webhook_env"] is not None:
        table.error("webhook_env", "give 'webhook' or 'webhook_env', not both")
    values.update(read(table, NOTIFY_FIELDS))
    table.finish()
    return Notify(**values)


def _read_prices(table: Table | None) -> tuple[tuple[str, Price], ...]:
    """`[prices."MODEL"]`: USD per million tokens, for backends that report no cost."""
    if table is None:
        return ()
    prices: list[tuple[str, Price]] = []
    for model in list(table.data):
        entry = table.table(model)
        if entry is None:
            continue
        values = read(entry, PRICE_FIELDS)
        if values["input"] is None or values["output"] is None:
            entry.error(
                None,
                f"[prices.\"{model}\"] needs both 'input' and 'output' (USD per 1M tokens)",
            )
        else:
            prices.append((model, Price(**values)))
        entry.finish()
    return tuple(prices)

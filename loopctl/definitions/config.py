"""Project defaults: .loop/config.toml."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from loopctl.definitions.fields import Table
from loopctl.definitions.source import Problems, parse_toml

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
    """Where to tell a human that the inbox needs them (used by later features)."""

    command: tuple[str, ...] | None = None
    webhook: str | None = None
    on: tuple[str, ...] = ("approval", "failed", "escalation", "unhandled")


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
    author: str = "loopctl <loopctl@localhost>"
    notify: Notify = field(default_factory=Notify)
    prices: tuple[tuple[str, Price], ...] = ()

    def condition_map(self) -> dict[str, tuple[str, ...]]:
        return dict(self.conditions)


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
    budget = read_budget(table.table("budget"), Budget())
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
    worktree = table.table("worktree")
    if worktree is not None:
        root_text = worktree.string("root")
        if root_text:
            root = Path(root_text).expanduser()
            worktree_root = root if root.is_absolute() else (path.parent.parent / root)
        keep = KeepPolicy(
            worktree.string("keep", keep.value, choices=[k.value for k in KeepPolicy]) or keep
        )
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
        notify = Notify(
            command=notify_table.argv("command"),
            webhook=hook,
            on=notify_table.string_list("on") or notify.on,
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
    table.finish()
    return Config(
        path=path,
        maker=maker,
        checker=checker,
        budget=budget,
        env_allow=env_allow,
        conditions=tuple(conditions),
        worktree_root=worktree_root,
        keep=keep,
        author=author,
        notify=notify,
        prices=tuple(prices),
    )

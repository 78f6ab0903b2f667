"""`loopctl new`: write one loop file with tomli-w; keep it only if the loader accepts it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopctl.definitions import load_project
from loopctl.definitions.fields import parse_duration, validate_cron
from loopctl.definitions.loops import LOOP_NAME
from loopctl.definitions.project import DefinitionKind
from loopctl.errors import DefinitionError, LoopctlError, UsageError
from loopctl.paths import ProjectPaths


@dataclass(frozen=True, slots=True)
class NewLoop:
    """A loop file that was written and loads."""

    name: str
    path: Path
    trigger: str | None  # "every 5m", "cron 0 * * * *", or None (run by hand)


def loop_document(
    *,
    every: str | None = None,
    cron: str | None = None,
    goal: str | None = None,
    prompt: str | None = None,
    agent: str | None = None,
    description: str | None = None,
) -> dict[str, Any]:
    """The TOML table of a new loop; usage errors are raised before anything is written."""

    if every is not None and cron is not None:
        raise UsageError("give --every or --cron, not both")
    if not goal and not prompt:
        raise UsageError('a loop needs work to do: give --goal "COND" or --prompt TEXT (or both)')
    doc: dict[str, Any] = {}
    if description:
        doc["description"] = description
    if goal:
        doc["goal"] = goal
    if prompt:
        doc["prompt"] = prompt
    if every is not None:
        try:
            parse_duration(every)
        except ValueError as exc:
            raise UsageError(f"--every: {exc}") from None
        doc["every"] = every.strip()
    if cron is not None:
        problem = validate_cron(cron)
        if problem is not None:
            raise UsageError(f"--cron: {problem}")
        doc["cron"] = cron.strip()
    if agent:
        doc["maker"] = {"agent": agent}
    return doc


def check_name(name: str) -> None:
    """Refuse a name the loader would refuse as a file name (exit 2, nothing written)."""

    if name == "goal":
        raise UsageError("the loop name 'goal' is reserved for `loopctl goal`; pick another name")
    if not LOOP_NAME.match(name):
        raise UsageError(
            f"bad loop name {name!r}: use 1-64 letters, digits, '_' or '-',"
            " starting with a letter or digit"
        )


def create_loop(root: Path, name: str, doc: dict[str, Any]) -> NewLoop:
    """Write `.loop/loops/<name>.toml`; never overwrite, and remove it again if it is invalid."""
    # lazy: only `loopctl new` writes TOML; kept off every other command's start
    import tomli_w

    check_name(name)
    path = ProjectPaths(root).loops_dir / f"{name}.toml"
    relative = path.relative_to(root)
    header = f"# Written by `loopctl new {name}`. Run one tick: loopctl run {name} --once\n"
    text = header + tomli_w.dumps(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # O_EXCL: a file that appears between a check and the write is not overwritten either.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        raise LoopctlError(f"{relative} already exists: edit it, or pick another name") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        project = load_project(root)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    loop = project.loops.get(name)
    if loop is None:
        # Nothing broken is left behind: the file goes, the loader's reasons are shown.
        path.unlink(missing_ok=True)
        bad = project.invalid_named(DefinitionKind.LOOP, name)
        problems = list(bad.problems) if bad is not None else project.blocking
        raise DefinitionError(problems, root)
    return NewLoop(name, path, loop.trigger.describe() if loop.trigger else None)

"""Each agent turn's model cassette (issue 31, item 5): recorded, or played back offline.

A turn whose egress proxy runs (a bwrap sandbox in proxy mode) records what it forwards in
its attempt folder, `<role>.cassette.jsonl` (loopctl.egress_cassette). Under
`loopctl replay RUN --offline` the replaying process is started with `REPLAY_PLAN` naming a
plan file: each turn is then answered from the recorded run's cassette of the same task,
attempt and role, by a `TurnPlayer` on 127.0.0.1 (loopctl.egress_replay), and nothing else is
reached. The plan is loopctl's own (replaying.offline writes it, outside every worktree).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl.egress_cassette import SUFFIX, Cassette, CassetteWriter, read_cassette
from loopctl.egress_replay import REPLAY_PLAN, TurnPlayer
from loopctl.engine.context import RunContext
from loopctl.errors import LoopctlError
from loopctl.paths import cache_home
from loopctl.secrets import Redactor

if TYPE_CHECKING:
    from loopctl.sandbox import Sandbox


def cassette_name(role: str) -> str:
    return f"{role}{SUFFIX}"


def with_tape(
    ctx: RunContext,
    sandbox: Sandbox | None,
    task: str,
    number: int,
    role: str,
    worktree: Path,
    folder: Path,
) -> tuple[Sandbox | None, Callable[[], None]]:
    """`sandbox` with this turn's cassette (when its proxy runs), and what ends it."""
    if sandbox is None or sandbox.mechanism != "bwrap" or not sandbox.egress.proxied:
        return sandbox, lambda: None
    lent = [secret.value for secret in sandbox.egress.secrets]
    redactor = Redactor([*ctx.rec.redactor.secrets, *lent])
    places = {
        "worktree": str(worktree),
        "root": str(ctx.paths.root),
        "folder": str(folder),
        "cache": str(cache_home()),
        "run": ctx.run_id,
    }
    plan = os.environ.get(REPLAY_PLAN)
    if plan:
        player = _player(Path(plan), f"{task}/attempt-{number}/{role}", places, redactor)
        return replace(sandbox, cassette=player), player.close
    tape = CassetteWriter(
        folder / cassette_name(role),
        within=ctx.paths.root,
        redactor=redactor,
        meta={**places, "task": task, "attempt": number, "role": role},
    )
    tape.open()
    return replace(sandbox, cassette=tape), lambda: None


def _player(plan_file: Path, turn: str, places: dict[str, str], redactor: Redactor) -> TurnPlayer:
    try:
        plan = json.loads(plan_file.read_text(encoding="utf-8"))
        recorded = Path(plan["recorded"])  # the recorded run's folder, under `within`
        within = Path(plan["within"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LoopctlError(f"cannot read the replay plan {plan_file}: {exc}") from exc
    path = recorded / f"{turn.rsplit('/', 1)[0]}" / cassette_name(turn.rsplit("/", 1)[1])
    cassette: Cassette | None = None
    if path.exists() or path.is_symlink():
        cassette = read_cassette(path, within=within)
    return TurnPlayer(
        cassette,
        turn,
        places=places,
        strict=bool(plan.get("strict", True)),
        results=Path(plan["results"]),
        redactor=redactor,
    )

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl.egress_cassette import (
    REPLAY_PLAN,
    SUFFIX,
    Cassette,
    CassetteWriter,
    EgressTap,
    read_cassette,
)
from loopctl.engine.context import RunContext
from loopctl.errors import LoopctlError
from loopctl.paths import cache_home
from loopctl.secrets import Redactor

if TYPE_CHECKING:
    from loopctl.egress_replay import TurnPlayer
    from loopctl.sandbox import Sandbox


def cassette_name(role: str) -> str:
    return f"{role}{SUFFIX}"


@dataclass(frozen=True, slots=True)
class Taped:
    """A turn's sandbox (its proxy's tape set), the tape loopctl's own agent is given, and
    what ends the turn's tape."""

    sandbox: Sandbox | None
    tape: EgressTap | None
    end: Callable[[], None]


def with_tape(
    ctx: RunContext,
    sandbox: Sandbox | None,
    task: str,
    number: int,
    role: str,
    worktree: Path,
    folder: Path,
    *,
    api: bool = False,
) -> Taped:
    """This turn's cassette: on `sandbox`'s proxy when it runs one, or for loopctl's own agent
    (`api`: its model calls leave from this process); none otherwise."""
    proxied = sandbox is not None and sandbox.mechanism == "bwrap" and sandbox.egress.proxied
    if not api and (sandbox is None or not proxied):
        return Taped(sandbox, None, lambda: None)
    lent = [secret.value for secret in sandbox.egress.secrets] if sandbox is not None else []
    redactor = Redactor([*ctx.rec.redactor.secrets, *lent])
    places = {
        "worktree": str(worktree),
        "root": str(ctx.paths.root),
        "folder": str(folder),
        "cache": str(cache_home()),
        "run": ctx.run_id,
    }
    plan = os.environ.get(REPLAY_PLAN)
    tape: EgressTap
    if plan:
        player = _player(Path(plan), f"{task}/attempt-{number}/{role}", places, redactor)
        tape, end = player, player.close
    else:
        writer = CassetteWriter(
            folder / cassette_name(role),
            within=ctx.paths.root,
            redactor=redactor,
            meta={**places, "task": task, "attempt": number, "role": role},
        )
        writer.open()
        tape, end = writer, lambda: None
    if api:
        return Taped(sandbox, tape, end)
    return Taped(replace(sandbox, cassette=tape) if sandbox is not None else None, None, end)


def _player(plan_file: Path, turn: str, places: dict[str, str], redactor: Redactor) -> TurnPlayer:
    # lazy: the player and its HTTP server (~13 ms) serve `replay --offline` only, not every run
    from loopctl.egress_replay import TurnPlayer

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

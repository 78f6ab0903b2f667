"""The drift score of an attempt: against its scope and against its loop's recent attempts.

    score = 0.6 * outside + 0.3 * novelty + 0.1 * size            (0 … 1, three decimals)

- `outside`: the steps outside the scope (checks.footprint.outside; a size overrun counts as
  one) divided by the footprint's items (each file, command, host and tool once), at most 1.
- `novelty`: of the attempt's features (the top-level folder of each file, "." for the root;
  the program of each command; each host; each tool), the share that none of the loop's last
  `HISTORY` attempts had. Zero until the loop has `MIN_HISTORY` earlier footprints.
- `size`: lines changed against the median of those attempts: 0 up to twice the median, 1 at
  ten times it or more, linear between. Zero without history or with a median of 0.

Only `outside` raises an alarm (the task pauses, engine.drift_gate): novelty and size describe
how unusual an attempt is for its loop, for a person reading `status`, never a reason to stop.
Pure functions (docs/loops.md, "Declared scope and drift", says the same in prose).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from loopctl.checks.footprint import Excursion, Footprint, split_commands

HISTORY = 10  # earlier attempts of the loop a footprint is compared with
MIN_HISTORY = 3  # fewer than this: no novelty or size term yet
WEIGHTS = (0.6, 0.3, 0.1)  # outside, novelty, size


@dataclass(frozen=True, slots=True)
class Drift:
    score: float
    outside: float
    novelty: float
    size: float
    new: tuple[str, ...] = ()  # the features none of the recent attempts had
    alarm: bool = False  # a step outside the scope
    history: int = 0  # earlier footprints compared with

    def to_json(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "outside": self.outside,
            "novelty": self.novelty,
            "size": self.size,
            "new": list(self.new),
            "alarm": self.alarm,
            "history": self.history,
        }

    @classmethod
    def from_json(cls, data: object) -> Drift | None:
        if not isinstance(data, dict):
            return None
        new = data.get("new")
        return cls(
            score=_unit(data.get("score")),
            outside=_unit(data.get("outside")),
            novelty=_unit(data.get("novelty")),
            size=_unit(data.get("size")),
            new=tuple(str(n) for n in new) if isinstance(new, list) else (),
            alarm=data.get("alarm") is True,
            history=int(data["history"]) if isinstance(data.get("history"), int) else 0,
        )

    def describe(self) -> str:
        alarm = ", out of scope" if self.alarm else ""
        return f"drift {self.score:.2f}{alarm}"


def _unit(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return min(1.0, max(0.0, float(value)))


def items(footprint: Footprint) -> int:
    return (
        len(footprint.paths)
        + len([c for line in footprint.commands for c in split_commands(line)])
        + len(footprint.hosts)
        + len(footprint.tools)
    )


def features(footprint: Footprint) -> set[str]:
    """What novelty is counted over: top-level folders, programs, hosts and tools."""
    found = {f"dir {_top(p)}" for p in footprint.paths}
    for line in footprint.commands:
        for command in split_commands(line):
            words = command.split()
            if words:
                found.add(f"program {PurePosixPath(words[0]).name}")
    found |= {f"host {h}" for h in footprint.hosts}
    found |= {f"tool {t}" for t in footprint.tools}
    return found


def _top(path: str) -> str:
    parts = PurePosixPath(path).parts
    if path.startswith("/"):
        return "/"  # outside the worktree altogether
    return parts[0] if len(parts) > 1 else "."


def drift(footprint: Footprint, found: Sequence[Excursion], history: Sequence[Footprint]) -> Drift:
    """The score of `footprint`, whose out-of-scope steps are `found`, against `history` (the
    loop's earlier footprints, oldest first; only the last HISTORY count)."""
    recent = list(history)[-HISTORY:]
    outside_share = min(1.0, len(found) / max(1, items(footprint))) if found else 0.0
    novelty, size = 0.0, 0.0
    new: tuple[str, ...] = ()
    if len(recent) >= MIN_HISTORY:
        seen: set[str] = set().union(*(features(f) for f in recent))
        mine = features(footprint)
        new = tuple(sorted(mine - seen))
        novelty = len(new) / len(mine) if mine else 0.0
        median = statistics.median(f.lines for f in recent)
        if median > 0:
            size = min(1.0, max(0.0, (footprint.lines / median - 2.0) / 8.0))
    a, b, c = WEIGHTS
    return Drift(
        score=round(a * outside_share + b * novelty + c * size, 3),
        outside=round(outside_share, 3),
        novelty=round(novelty, 3),
        size=round(size, 3),
        new=new,
        alarm=bool(found),
        history=len(recent),
    )

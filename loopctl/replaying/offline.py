"""`loopctl replay RUN --offline`: a recorded run re-run against its cassettes.

The public interface (item 3's regression gate calls it): `replay_offline` and
`replayable_runs`. Body in progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first request of the replay that the recording does not answer."""

    attempt: str  # "<task>/attempt-<n>/<role>"
    index: int  # the request's index among that turn's recorded exchanges
    detail: str  # a short diff: what was recorded vs what was asked, from the first difference


@dataclass(frozen=True, slots=True)
class OfflineReplay:
    """What an offline replay found: the first divergence (None: every request matched), each
    task's recorded and replayed outcome, and whether both renderings of STATE.md agree."""

    run: str
    diverged: Divergence | None
    recorded_outcomes: dict[str, str] = field(default_factory=dict)
    replayed_outcomes: dict[str, str] = field(default_factory=dict)
    state_identical: bool = False


def replay_offline(
    root: Path, run_id: str, *, strict: bool = True, definitions: Path | None = None
) -> OfflineReplay:
    """Re-run `run_id` of the project at `root` against its cassettes, offline.

    `definitions`: a folder to read the `.loop/` definitions from instead of the checkout's
    (a proposal applied). `strict=False`: on a divergence, keep answering with the recorded
    responses in order and run to the end, so each task's replayed outcome is known."""
    raise NotImplementedError("in progress")


def replayable_runs(root: Path, loop: str, limit: int = 3) -> list[str]:
    """The last `limit` runs of `loop` whose every agent turn has a complete cassette,
    newest first."""
    raise NotImplementedError("in progress")

"""The activities a worker runs: one claimed attempt of a loop, heartbeating while it works, and
the release of a delivery a signal approved."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from loopctl.definitions import Project, load_project
from loopctl.errors import LoopctlError
from loopctl.journal.recorder import Recorder
from loopctl.temporal.claims import AttemptBusy, run_claimed
from loopctl.temporal.shapes import (
    RELEASE,
    RUN_ATTEMPT,
    ApprovalAnswer,
    ApprovalRelease,
    AttemptRequest,
    AttemptResult,
)

# Checks a signal against the journal and approves (commands.on_temporal.release): the
# inbox's decisions live above this layer, so the worker command hands it in.
Release = Callable[[Project, ApprovalRelease], ApprovalAnswer]
# Sends this clone's records home (commands.on_temporal.share_state: the state branch).
Share = Callable[[Project], None]


@dataclass(frozen=True, slots=True)
class Attempts:
    """The activity, bound to the repository and name of the worker that serves it."""

    root: str
    worker: str
    beat_every: float
    queue: str  # this worker's own task queue
    release: Release
    share: Share

    @activity.defn(name=RUN_ATTEMPT)
    def run_attempt(self, request: AttemptRequest) -> AttemptResult:
        """One tick of `request.loop` in this worker's repository, claimed by its attempt id."""
        # Loaded per attempt: a definition edited (pulled) since the worker started counts.
        project = load_project(Path(self.root))
        loop = project.loops.get(request.loop)
        if loop is None:
            names = ", ".join(sorted(project.loops)) or "none"
            raise ApplicationError(
                f"no loop named {request.loop!r} in {self.root} (loops: {names})",
                non_retryable=True,
            )
        try:
            result = run_claimed(
                Recorder(project),
                loop,
                request,
                self.worker,
                beat=activity.heartbeat,
                cancelled=activity.is_cancelled,
                beat_every=self.beat_every,
                queue=self.queue,
            )
        except AttemptBusy as exc:
            # Retried by Temporal: the live holder finishes it, and the retry answers from
            # the journal.
            raise ApplicationError(str(exc), type="AttemptBusy") from None
        except LoopctlError as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__) from None
        self.share(project)
        return result

    @activity.defn(name=RELEASE)
    def release_approval(self, request: ApprovalRelease) -> ApprovalAnswer:
        """Release the gated delivery `request` names if its signal carries the item's commit."""
        project = load_project(Path(self.root))
        try:
            answer = self.release(project, request)
        except LoopctlError as exc:
            raise ApplicationError(str(exc), type=type(exc).__name__) from None
        self.share(project)
        return answer

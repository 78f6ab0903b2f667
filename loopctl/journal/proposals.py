"""The events of self-evolution as proposals (issue 31, item 3): a change to the loop's own
definitions an agent proposed (never wrote), and what a human's approval made of it.

A proposal is made by the engine (loopctl.engine.proposals) from a proposal file or from an edit
of the definitions it stripped from the attempt; it opens an inbox item of kind `proposal` whose
id is the proposal's. `inbox approve` applies it (loopctl.commands.proposals) or refuses it.
Their own module so that loopctl.journal.schema stays one screenful per family; schema lists them
in `PAYLOADS` like every other event type.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from loopctl.journal.events import Event, EventType
from loopctl.journal.payload import ItemId, Payload, read


def _sparse(*names: str) -> frozenset[str]:
    return frozenset(names)


class ProposalMade(Payload, frozen=True):
    """An agent proposed a change to the definitions: `source` is `file:NAME` (a proposal file
    in `.loop-proposals/`) or `edit` (its edit of definition files, stripped from the attempt).
    `base` is the commit it was made against and `definitions` the digest of the definition
    files there: an approval applies it only while the main checkout's are the same. `patch`
    (repository-relative, under .loop/runs/) holds the unified diff, whose sha256 is `sha256`.
    `refused` says why it was refused as soon as it was made (no inbox item then)."""

    TYPE: ClassVar[EventType] = EventType.PROPOSAL_MADE
    SPARSE: ClassVar[frozenset[str]] = _sparse("refused", "rationale")
    id: ItemId = ""
    source: str = ""
    attempt: int | None = None
    paths: tuple[str, ...] = ()
    base: str | None = None
    definitions: str | None = None
    patch: str | None = None
    sha256: str | None = None
    rationale: str = ""
    refused: str | None = None


class ProposalApplied(Payload, frozen=True):
    """An approved proposal was committed on the main checkout's branch (`commit` on `parent`)
    after `validate` passed and the regression gate (`gate`: replay | checks | none) passed
    the recorded tasks in `checked`."""

    TYPE: ClassVar[EventType] = EventType.PROPOSAL_APPLIED
    id: ItemId = ""
    commit: str | None = None
    parent: str | None = None
    branch: str | None = None
    gate: str = "none"
    checked: tuple[str, ...] = ()


class ProposalRefused(Payload, frozen=True):
    """An approval of a proposal did not apply it: `stage` is `patch` (its stored patch is not
    what was proposed), `stale` (the definitions changed since), `validate` or `regression`
    (it breaks `task`, a task recorded done, by the `gate` that ran)."""

    TYPE: ClassVar[EventType] = EventType.PROPOSAL_REFUSED
    SPARSE: ClassVar[frozenset[str]] = _sparse("task", "gate")
    id: ItemId = ""
    stage: str = ""
    reason: str = ""
    task: str | None = None
    gate: str | None = None


@dataclass(frozen=True, slots=True)
class ProposalView:
    """A proposal as the log tells it: where it was made and what became of it."""

    made: ProposalMade
    run: str | None
    loop: str | None
    task: str | None
    applied: ProposalApplied | None = None
    refused: ProposalRefused | None = None


def proposals(events: Iterable[Event]) -> dict[str, ProposalView]:
    """Every proposal by id, oldest first (the last word of each kind kept)."""
    found: dict[str, ProposalView] = {}
    for event in events:
        if event.type == EventType.PROPOSAL_MADE:
            made = read(ProposalMade, event)
            if made.id and made.id not in found:
                found[made.id] = ProposalView(made, event.run, event.loop, event.task)
        elif event.type == EventType.PROPOSAL_APPLIED:
            applied = read(ProposalApplied, event)
            view = found.get(applied.id)
            if view is not None:
                found[applied.id] = _with(view, applied=applied)
        elif event.type == EventType.PROPOSAL_REFUSED:
            refused = read(ProposalRefused, event)
            view = found.get(refused.id)
            if view is not None:
                found[refused.id] = _with(view, refused=refused)
    return found


def _with(
    view: ProposalView,
    *,
    applied: ProposalApplied | None = None,
    refused: ProposalRefused | None = None,
) -> ProposalView:
    return ProposalView(
        view.made,
        view.run,
        view.loop,
        view.task,
        applied if applied is not None else view.applied,
        refused if refused is not None else view.refused,
    )


def describe(event: Event) -> str | None:
    """One line of words for a proposal event (`log`, `replay`); None for any other event."""
    if event.type == EventType.PROPOSAL_MADE:
        made = read(ProposalMade, event)
        paths = ", ".join(made.paths) or "nothing"
        if made.refused is not None:
            return f"proposal ({made.source}) refused as made: {made.refused}"
        return (
            f"proposal {made.id} ({made.source}) to change {paths}, against {str(made.base)[:12]}"
        )
    if event.type == EventType.PROPOSAL_APPLIED:
        applied = read(ProposalApplied, event)
        return (
            f"proposal {applied.id} applied as {str(applied.commit)[:12]} on {applied.branch}"
            f" ({applied.gate} gate)"
        )
    if event.type == EventType.PROPOSAL_REFUSED:
        refused = read(ProposalRefused, event)
        return f"proposal {refused.id} refused ({refused.stage}): {refused.reason}"
    return None

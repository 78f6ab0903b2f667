"""A human's decision on a proposal (issue 31, item 3): `inbox approve` applies it, `inbox
reject` discards it. (The engine makes proposals: loopctl.engine.proposals.)

Approving applies a proposal only when all of these hold, in this order, and changes nothing
in the main checkout until they have:

1. its stored patch is byte for byte what was proposed (its sha256) and still a proposal
   (definition files only, plain text, no link);
2. the definitions are the ones it was made against: the definition files of the checked-out
   commit have the digest recorded with the proposal, and none of them is modified in the main
   checkout (an approval is bound to what it was shown, as a delivery's is to its sha);
3. `validate` passes on the definitions it makes (a temporary worktree of the would-be commit);
4. the regression gate passes (loopctl.commands.proposal_gate): the loop's last recorded tasks
   done still pass under them; otherwise the task it breaks is named.

Then it is one commit on the checked-out branch, its parent the commit it was checked against,
brought in by a fast-forward (`merge --ff-only` through the hardened git layer), so the branch
and the files move together or not at all. Every refusal closes the item with its reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopctl import git
from loopctl.commands.inbox_show import InboxError
from loopctl.commands.proposal_gate import Gate, run_gate
from loopctl.definitions import Project, load_project
from loopctl.definitions.proposals import (
    DEFINITION_GLOBS,
    definitions_digest,
    is_definition,
    patch_problems,
    tree_problems,
)
from loopctl.engine.context import author, printable
from loopctl.errors import LoopctlError
from loopctl.journal.inbox import InboxItem
from loopctl.journal.proposals import ProposalApplied, ProposalRefused, ProposalView, proposals
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import ApprovalRefused, Approved, InboxClosed
from loopctl.nofollow import read_file
from loopctl.paths import cache_home, repo_slug


@dataclass(frozen=True, slots=True)
class Decision:
    """What a decision on a proposal did, for `inbox approve/reject` to print and `--json`."""

    ok: bool
    message: str
    commit: str | None = None
    gate: str | None = None
    checked: tuple[str, ...] = ()
    task: str | None = None  # the recorded task it breaks
    stage: str | None = None  # where it was refused (ProposalRefused.stage)
    problems: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "gate": self.gate,
            "checked": list(self.checked),
            "broken_task": self.task,
            "stage": self.stage,
            "problems": list(self.problems),
        }


class _Refused(Exception):
    def __init__(self, stage: str, reason: str, task: str | None = None, gate: str | None = None):
        super().__init__(reason)
        self.stage, self.reason, self.task, self.gate = stage, reason, task, gate
        self.problems: tuple[str, ...] = ()


def view_of(rec: Recorder, item: InboxItem) -> ProposalView:
    found = proposals(rec.log.read()).get(item.id)
    if found is None:
        raise InboxError(f"proposal {item.id} is not in the log; dismiss it")
    return found


def approve(project: Project, rec: Recorder, item: InboxItem, note: str | None) -> Decision:
    """Apply the proposal `item` stands for, or refuse it (closing the item either way)."""
    view = view_of(rec, item)
    try:
        decision = _apply(project, rec, item, view)
    except _Refused as refused:
        _close(rec, item, ProposalRefused(
            id=item.id, stage=refused.stage, reason=refused.reason, task=refused.task,
            gate=refused.gate,
        ))  # fmt: skip
        return Decision(
            False,
            f"proposal {item.id} refused: {refused.reason}",
            gate=refused.gate,
            task=refused.task,
            stage=refused.stage,
            problems=refused.problems,
        )
    _item_event(rec, item, Approved(id=item.id, sha=decision.commit, action="apply", note=note))
    _item_event(rec, item, InboxClosed(id=item.id, resolution="approved", reason=note), ("reason",))
    rec.refresh_projections()
    return decision


def reject(rec: Recorder, item: InboxItem, reason: str | None) -> Decision:
    """Discard the proposal: nothing of it is applied, its item closes."""
    view_of(rec, item)
    why = reason or "no reason given"
    _item_event(rec, item, InboxClosed(id=item.id, resolution="rejected", reason=why), ("reason",))
    rec.refresh_projections()
    return Decision(True, f"rejected proposal {item.id}: nothing was applied ({why})")


def _item_event(rec: Recorder, item: InboxItem, payload: Any, keep: tuple[str, ...] = ()) -> None:
    rec.record(payload, run=item.run, loop=item.loop, task=item.task, keep=keep)


def _close(rec: Recorder, item: InboxItem, refused: ProposalRefused) -> None:
    _item_event(rec, item, refused)
    _item_event(rec, item, ApprovalRefused(id=item.id, reason=refused.reason))
    _item_event(
        rec, item, InboxClosed(id=item.id, resolution="refused", reason=refused.reason), ("reason",)
    )
    rec.refresh_projections()


def _patch(root: Path, view: ProposalView) -> str:
    made = view.made
    if made.refused is not None or not made.patch or not made.sha256:
        raise _Refused("patch", f"it was refused when it was made: {made.refused}")
    try:
        raw = read_file(root / made.patch, within=root)
    except (OSError, ValueError) as exc:
        raise _Refused("patch", f"its patch {made.patch} cannot be read ({exc})") from None
    if hashlib.sha256(raw).hexdigest() != made.sha256:
        raise _Refused("patch", f"its patch {made.patch} is not the one proposed (sha256 differs)")
    patch = raw.decode("utf-8", "surrogateescape")
    problems = patch_problems(patch)
    if problems:
        raise _Refused("patch", "; ".join(problems))
    return patch


def _fresh(root: Path, view: ProposalView) -> tuple[str, str]:
    """The checked-out branch and commit, if its definitions are the proposal's base's."""
    branch = git.current_branch(root)
    if branch is None:
        raise _Refused("stale", "the main checkout is on a detached HEAD: check out a branch")
    head = git.resolve_commit(root, "HEAD")
    digest = definitions_digest(git.tree_files(root, head, DEFINITION_GLOBS))
    dirty = [p for p in git.changed_paths(root, head) if is_definition(p)]
    if digest != view.made.definitions or dirty:
        moved = [
            p
            for p in git.tree_changes(root, view.made.base or head, head)
            if is_definition(p)
        ] if view.made.base else []  # fmt: skip
        named = ", ".join(dict.fromkeys([*moved, *dirty])) or "the definition files"
        raise _Refused(
            "stale",
            f"the definitions changed since it was proposed against"
            f" {(view.made.base or '?')[:12]} ({named}); it no longer applies as shown",
        )
    return branch, head


def _apply(project: Project, rec: Recorder, item: InboxItem, view: ProposalView) -> Decision:
    root = project.root
    patch = _patch(root, view)
    branch, head = _fresh(root, view)
    try:
        tree = git.apply_to_tree(root, head, patch)
    except LoopctlError as exc:
        raise _Refused("patch", str(exc)) from None
    changed = git.tree_changes(root, git.tree_of_commit(root, head), tree)
    modes = {p: m for m, _s, p in git.tree_files(root, tree, changed, literal=True)}
    problems = tree_problems((p, modes.get(p, "")) for p in changed)
    if problems:
        raise _Refused("patch", "; ".join(problems))
    name, email = author(project.config.author)
    paths = ", ".join(view.made.paths)
    message = (
        f"loopctl: apply proposal {item.id} ({paths})\n\n"
        # The rationale is the agent's text: no control character reaches a commit message.
        + (f"{printable(view.made.rationale)}\n\n" if view.made.rationale else "")
        + f"Proposed by the maker of loop {view.loop!r}, task {view.task!r}, run {view.run}\n"
        + f"({view.made.source}); approved with `loopctl inbox approve {item.id}`.\n"
    )
    commit = git.commit_tree(root, tree, [head], message, author_name=name, author_email=email)
    with _checkout(root, item.id, commit) as proposed:
        _validate(proposed)
        gate = run_gate(project, rec.log, item.id, view.loop or "", tree, proposed)
    if not gate.passed:
        raise _Refused(
            "regression",
            f"it breaks task {gate.broken!r} (recorded done; {gate.kind} gate): {gate.reason}",
            task=gate.broken,
            gate=gate.kind,
        )
    if git.resolve_commit(root, "HEAD") != head or git.current_branch(root) != branch:
        raise _Refused("stale", "the main checkout moved while the proposal was checked")
    try:
        git.fast_forward(root, branch, commit)
    except LoopctlError as exc:
        raise _Refused("stale", f"it cannot be applied to {branch}: {exc}") from None
    _item_event(
        rec,
        item,
        ProposalApplied(
            id=item.id, commit=commit, parent=head, branch=branch, gate=gate.kind,
            checked=gate.checked,
        ),
    )  # fmt: skip
    return Decision(
        True,
        f"applied proposal {item.id} as {commit[:12]} on {branch} ({paths}); validate passed;"
        f" {_gate_words(gate)}",
        commit=commit,
        gate=gate.kind,
        checked=gate.checked,
    )


def _gate_words(gate: Gate) -> str:
    if gate.kind == "none":
        return f"regression gate: nothing to check ({gate.reason})"
    return f"regression gate ({gate.kind}): {', '.join(gate.checked)} still pass"


@contextlib.contextmanager
def _checkout(root: Path, proposal: str, commit: str) -> Iterator[Path]:
    """A temporary worktree of the would-be commit: what `validate` and the gate read."""
    parent = cache_home() / "proposals" / repo_slug(root)
    parent.mkdir(parents=True, exist_ok=True)
    checkout = Path(tempfile.mkdtemp(prefix=f"{proposal}-", dir=parent)) / "tree"
    try:
        git.worktree_add_detached(root, checkout, commit)
        yield checkout
    finally:
        with contextlib.suppress(LoopctlError):
            git.worktree_remove(root, checkout, force=True)
        shutil.rmtree(checkout.parent, ignore_errors=True)


def _validate(checkout: Path) -> None:
    """`validate` on the proposed definitions: refused at the first error, as path:line."""
    errors = load_project(checkout).errors
    if errors:
        refused = _Refused(
            "validate",
            "validate fails on the proposed definitions: " + errors[0].render(checkout),
        )
        refused.problems = tuple(p.render(checkout) for p in errors)
        raise refused

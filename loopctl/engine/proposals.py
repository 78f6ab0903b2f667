"""Self-evolution as proposals (issue 31, item 3; invariant 10): what a maker's turn left for
its loop's own definitions becomes a proposal in the inbox, never a change that takes effect.

After the maker's turn and before anything is checked, two things in the worktree are taken
out of the attempt:

- the edits of definition files (`.loop/`, every agent and skill folder loopctl reads, and this
  loop's agents' and skills' files wherever they are): each turn's are gathered into one
  proposal (`source = "edit"`);
- the proposal files the agent wrote, `.loop-proposals/NAME.md` (one proposal each).

Both are put back as the base commit has them (`git.restore_paths`, following no link), so the
checks run on, and the commit holds, the rest of the attempt's work only: a stripped edit can
influence neither. The attempt goes on and is checked as usual; a human decides on the proposal
(`loopctl inbox approve`, loopctl.commands.proposals). A proposal that touches anything but
definition files, a link, or does not apply is recorded as refused and opens no item.
`[maker] allow_self_edit = true` keeps the old opt-out: edits are then the attempt's own work.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loopctl import git
from loopctl.atomicfile import write_atomic
from loopctl.checks.verdicts import self_edit_paths
from loopctl.definitions.proposals import (
    DEFINITION_GLOBS,
    MAX_PROPOSAL_BYTES,
    PROPOSAL_DIR,
    definitions_digest,
    holds_definitions,
    patch_problems,
    paths_of,
    read_proposal_file,
    tree_problems,
)
from loopctl.engine.context import RunContext, attempt_dir
from loopctl.errors import GitError, LoopctlError
from loopctl.globs import first_match
from loopctl.journal.inbox import ItemKind, new_item_id
from loopctl.journal.proposals import ProposalMade, proposals
from loopctl.journal.schema import Note
from loopctl.nofollow import read_file
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import Workspace

# The `what` of the note naming what was taken out of an attempt.
STRIPPED = "self_edit_stripped"
# How much of a proposal's diff its inbox item carries (the whole patch is in its file).
SHOWN_DIFF = 8000


@dataclass(frozen=True, slots=True)
class Draft:
    """A proposal before it is recorded: where from, its patch, or why it is refused."""

    source: str
    patch: str = ""
    paths: tuple[str, ...] = ()
    rationale: str = ""
    refused: str | None = None


def self_edit_patterns(ctx: RunContext) -> list[str]:
    """What a maker may propose but not write, as globs: invariant 10's paths (`.loop/`, the
    files of this loop's agents and skills, wherever they are) and every definition file."""
    agents = [a.path for a in (ctx.maker, ctx.judge) if a is not None]
    skills = [
        ctx.project.skills[name].folder
        for name in ctx.loop.maker.skills
        if name in ctx.project.skills
    ]
    return [*self_edit_paths(ctx.paths.root, agents, skills), *DEFINITION_GLOBS]


def harvest(ctx: RunContext, spec: TaskSpec, workspace: Workspace, number: int) -> list[str]:
    """Turn the turn's definition edits and proposal files into proposals, take them out of the
    worktree, and return the ids of the inbox items opened."""
    if ctx.in_place:
        return []  # the worktree is the checkout itself: invariant 10's verdict stands there
    try:
        git.require_work_tree(workspace.path, "read the proposals of")
        listed = git.changed_paths(workspace.path, workspace.base_sha)
    except LoopctlError:
        # Git there works on another tree (the agent replaced the worktree's `.git`): nothing
        # is harvested from it, and the snapshot refuses it and stops the task (engine.verdict).
        return []
    changed = [p for p in listed if not p.endswith("/")]
    patterns = [] if ctx.loop.maker.allow_self_edit else self_edit_patterns(ctx)
    edits = [p for p in changed if _definition(p, patterns)]
    files = [p for p in changed if p == PROPOSAL_DIR or p.startswith(PROPOSAL_DIR + "/")]
    if not edits and not files:
        return []
    try:
        opened = _harvest(ctx, spec, workspace, number, edits, files, changed)
    except (LoopctlError, OSError) as exc:
        # Left in place, they fail the attempt as protected paths (engine.setup): never committed.
        ctx.record(
            spec.id,
            Note(what=STRIPPED, attempt=number, role="maker", warning=f"not stripped: {exc}"),
        )
        return []
    ctx.record(
        spec.id,
        Note(
            what=STRIPPED,
            attempt=number,
            role="maker",
            extra={"paths": [*edits, *files], "proposals": opened},
        ),
    )
    return opened


def _harvest(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    number: int,
    edits: Sequence[str],
    files: Sequence[str],
    changed: Sequence[str],
) -> list[str]:
    drafts = []
    if edits:
        drafts.append(_from_edits(ctx, workspace, edits, changed))
    drafts += [_from_file(ctx, workspace, path) for path in files]
    opened = [i for d in drafts if (i := _record(ctx, spec, workspace, number, d)) is not None]
    # The checks and the commit see the base's definitions, whatever the turn left.
    git.restore_paths(workspace.path, workspace.base_sha, [*edits, *files])
    return opened


def _definition(path: str, patterns: Sequence[str]) -> bool:
    """A definition file, or a link or file put where a folder of definitions was (`.loop`)."""
    return first_match(path, patterns) is not None or holds_definitions(path, patterns)


def _from_edits(
    ctx: RunContext, workspace: Workspace, edits: Sequence[str], changed: Sequence[str]
) -> Draft:
    """The turn's edits of definition files as one proposal: the base with only them."""
    root = ctx.paths.root
    others = [p for p in changed if p not in edits]
    tree = git.snapshot_tree(workspace.path, workspace.base_sha, exclude=others)
    return _draft(root, "edit", workspace.base_sha, tree, "")


def _from_file(ctx: RunContext, workspace: Workspace, path: str) -> Draft:
    """One proposal file, read without following a link, its diff applied to the base."""
    source = f"file:{path.removeprefix(PROPOSAL_DIR + '/')}"
    name = path.removeprefix(PROPOSAL_DIR + "/")
    where = workspace.path / PROPOSAL_DIR
    try:
        if not stat.S_ISDIR(os.lstat(where).st_mode):
            return Draft(source, refused=f"{PROPOSAL_DIR} is not a folder (a link?)")
        if "/" in name:
            return Draft(source, refused=f"{path}: proposal files sit directly in {PROPOSAL_DIR}/")
        raw = read_file(workspace.path / path, within=workspace.path)
    except OSError as exc:
        return Draft(source, refused=f"{path} cannot be read as a plain file ({exc.strerror})")
    if len(raw) > MAX_PROPOSAL_BYTES:
        return Draft(source, refused=f"{path} is over {MAX_PROPOSAL_BYTES} bytes")
    try:
        proposal = read_proposal_file(name, raw.decode("utf-8"))
    except UnicodeDecodeError:
        return Draft(source, refused=f"{path} is not UTF-8 text")
    except ValueError as exc:
        return Draft(source, refused=str(exc))
    problems = patch_problems(proposal.diff)
    if problems:
        return Draft(source, paths=tuple(paths_of(proposal.diff)), refused="; ".join(problems))
    root = ctx.paths.root
    try:
        tree = git.apply_to_tree(root, workspace.base_sha, proposal.diff)
    except GitError as exc:
        return Draft(source, paths=tuple(paths_of(proposal.diff)), refused=str(exc))
    return _draft(root, source, workspace.base_sha, tree, proposal.rationale)


def _draft(repo: Path, source: str, base: str, tree: str, rationale: str) -> Draft:
    """A draft of what `tree` changes against `base`, refused unless every change is a
    definition file left a plain file."""
    changed = git.tree_changes(repo, git.tree_of_commit(repo, base), tree)
    if not changed:
        return Draft(source, rationale=rationale, refused="it changes nothing")
    modes = {path: mode for mode, _sha, path in git.tree_files(repo, tree, changed, literal=True)}
    problems = tree_problems((path, modes.get(path, "")) for path in changed)
    patch = git.tree_patch(repo, base, tree)
    if not problems:
        problems = patch_problems(patch)
    if not problems and len(patch.encode("utf-8", "surrogateescape")) > MAX_PROPOSAL_BYTES:
        problems = [f"its diff is over {MAX_PROPOSAL_BYTES} bytes"]
    return Draft(
        source,
        patch,
        tuple(changed),
        rationale,
        "; ".join(problems) if problems else None,
    )


def _record(
    ctx: RunContext, spec: TaskSpec, workspace: Workspace, number: int, draft: Draft
) -> str | None:
    """Record `draft` (once: the same patch proposed again is the same proposal) and open its
    inbox item unless it was refused; the item's id, or None."""
    what = draft.patch if draft.refused is None else f"{draft.source}\0{draft.refused}"
    digest = hashlib.sha256(what.encode("utf-8", "surrogateescape")).hexdigest()
    proposal_id = new_item_id("proposal", ctx.loop.name, digest)
    if proposal_id in proposals(ctx.log.read()):
        return None
    root = ctx.paths.root
    base = workspace.base_sha
    patch_path = None
    if draft.refused is None:
        stored = attempt_dir(ctx, spec.id, number) / f"proposal-{proposal_id}.patch"
        write_atomic(stored, draft.patch.encode("utf-8", "surrogateescape"))
        patch_path = stored.relative_to(root).as_posix()
    made = ProposalMade(
        id=proposal_id,
        source=draft.source,
        attempt=number,
        paths=draft.paths,
        base=base,
        definitions=definitions_digest(git.tree_files(root, base, DEFINITION_GLOBS)),
        patch=patch_path,
        sha256=digest if draft.refused is None else None,
        rationale=draft.rationale[:2000],
        refused=draft.refused,
    )
    ctx.record(spec.id, made)
    if draft.refused is not None:
        return None
    how = "edited" if draft.source == "edit" else "proposes changing"
    summary = f"the maker {how} {', '.join(draft.paths)}: a proposal, not applied"
    evidence = {
        "proposal": proposal_id,
        "source": draft.source,
        "paths": list(draft.paths),
        "base": base,
        "rationale": draft.rationale[:2000],
        "diff": draft.patch[:SHOWN_DIFF],
        "attempt": number,
    }
    return ctx.rec.open_item(
        ItemKind.PROPOSAL,
        summary,
        evidence,
        run=ctx.run_id,
        loop=ctx.loop.name,
        task=spec.id,
        item_id=proposal_id,
        again_once_closed=False,
    )

"""Whether a workspace's setup must run: skip it, seed it, or run it (and publish a seed).

`[worktree] setup` runs when the hash of its inputs (lockfiles, the setup commands, the preserved
folder names) differs from what this workspace last ran, or when its preserved folders are not
exactly as that setup left them. A new workspace whose hash has a seed gets the seed's folders
instead. Setup is skipped or seeded only when everything it produced lives in the preserved
folders: a setup that also writes elsewhere (a generated file, a build output the pool's
`git clean` deletes) runs every time, as it would in a fresh worktree.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from loopctl import git
from loopctl.seeds import (
    SeedStore,
    SeedTampered,
    detect_inputs,
    detect_preserve,
    inputs_hash,
    remove_preserved,
)


class Decision:
    """What was done about setup (the `decision` of a `setup_decision` event)."""

    NONE = "none"  # no setup commands
    SKIPPED = "skipped"  # same inputs, preserved folders intact: nothing to do
    SEEDED = "seeded"  # preserved folders copied from a seed
    RAN = "ran"  # setup ran


@dataclass(frozen=True, slots=True)
class Warmed:
    """The outcome for one workspace, as the log records it."""

    decision: str
    reason: str
    inputs_hash: str | None  # None when there is no setup
    reusable: bool  # True: a later task may skip setup for this hash in this workspace
    inputs: tuple[str, ...] = ()
    preserve: tuple[str, ...] = ()
    method: str | None = None  # reflink | copy, for a seed
    published: bool = False
    setup_s: float = 0.0  # how long setup ran now
    saved_s: float = 0.0  # what the setup it replaced took when it last ran


def resolve(
    worktree: Path, inputs: Sequence[str] | None, preserve: Sequence[str] | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`setup_inputs` and `preserve` as configured, or detected from the worktree when unset."""
    return (
        tuple(inputs) if inputs is not None else detect_inputs(worktree),
        tuple(preserve) if preserve is not None else detect_preserve(worktree),
    )


def prepare(
    worktree: Path,
    *,
    setup: Sequence[Sequence[str]],
    inputs: Sequence[str],
    preserve: Sequence[str],
    store: SeedStore,
    last_hash: str | None,
    intact: bool,
    last_setup_s: float,
    run_setup: Callable[[], None],
) -> Warmed:
    """Skip, seed or run `run_setup` for `worktree`, and publish a seed after a first run.

    `last_hash` and `intact` describe a recycled workspace (None and False for a new one):
    the inputs hash its setup last ran for, and whether its preserved folders are as it left them.
    `run_setup` raises when setup fails; nothing is published then.
    """
    inputs, preserve = tuple(inputs), tuple(preserve)
    if not setup:
        return Warmed(Decision.NONE, "no setup commands", None, False, inputs, preserve)
    digest = inputs_hash(worktree, inputs, setup, preserve)
    if not preserve:
        started = time.monotonic()
        run_setup()
        return Warmed(
            Decision.RAN,
            "nothing is preserved between tasks",
            digest,
            False,
            inputs,
            preserve,
            setup_s=time.monotonic() - started,
        )
    if last_hash == digest and intact:
        return Warmed(
            Decision.SKIPPED,
            "setup inputs unchanged and preserved folders intact",
            digest,
            True,
            inputs,
            preserve,
            saved_s=last_setup_s,
        )
    seed = store.get(digest)
    if seed is not None:
        try:
            method = store.restore(seed, worktree)
        except (SeedTampered, OSError):  # OSError: a link on the way to a preserved folder
            seed = None
        else:
            return Warmed(
                Decision.SEEDED,
                "a seed exists for these setup inputs",
                digest,
                True,
                inputs,
                preserve,
                method=method,
                saved_s=seed.setup_s,
            )
    reason = (
        "setup inputs changed"
        if last_hash is not None and last_hash != digest
        else "preserved folders changed since setup"
        if last_hash == digest
        else "no seed for these setup inputs"
    )
    # Setup runs on what a fresh worktree has: no folders from an earlier, different setup.
    for name in preserve:
        remove_preserved(worktree, name)
    before = git.status_outside(worktree, preserve)
    started = time.monotonic()
    run_setup()
    took = time.monotonic() - started
    # Only a setup whose every effect is inside the preserved folders can be skipped later.
    confined = git.status_outside(worktree, preserve) == before
    published = confined and store.publish(digest, worktree, preserve, took) is not None
    if not confined:
        reason += "; setup writes outside the preserved folders, so it runs every time"
    return Warmed(
        Decision.RAN,
        reason,
        digest,
        confined,
        inputs,
        preserve,
        published=published,
        setup_s=took,
    )

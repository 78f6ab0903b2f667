"""`loopctl status` shows what warm workspaces saved each loop, whatever kind of saving it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import invoke
from support.repos import commit_all, make_project, write_loop

from loopctl.journal.events import EventLog
from loopctl.paths import ProjectPaths


def ready(repo: Path, loop: str, **data: object) -> None:
    """A `workspace_ready` note as loopctl.engine.warming records it."""
    log = EventLog(ProjectPaths(repo).events_file)
    log.append("note", run="20261201T000000-warm", loop=loop, task="t",
               data={"what": "workspace_ready", **data})  # fmt: skip


def test_a_loop_whose_only_savings_are_seeds_and_skipped_setups_is_shown(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, "fixer.py")
    for name in ("seeded", "skipped", "cold", "quiet"):
        write_loop(repo, name, 'goal = "tests green"\nprompt = "fix add"\n')
    commit_all(repo, "four loops")
    ready(repo, "seeded", pool="miss", decision="seeded", saved_s=4.25)
    ready(repo, "skipped", pool="miss", decision="skipped", saved_s=1.5)
    ready(repo, "cold", pool="miss", decision="ran", saved_s=0)

    done = invoke(monkeypatch, repo, "status")
    assert done.exit_code == 0, done.output
    shown = done.output.split("warm workspaces (all runs):\n", 1)[1].split("\n\n", 1)[0]
    assert shown.splitlines() == [
        "  cold: saved 0.0s — 0 pool hits, 0 seed hits, 0 setups skipped, 1 run",
        "  seeded: saved 4.2s — 0 pool hits, 1 seed hits, 0 setups skipped, 0 run",
        "  skipped: saved 1.5s — 0 pool hits, 0 seed hits, 1 setups skipped, 0 run",
    ]

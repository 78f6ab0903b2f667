"""`loopctl worker` runs an attempt whose maker is the real Claude Code CLI (issue 32).

The Temporal development server and the worker are the ones of test_temporal_worker.py; the
maker is the installed Claude Code (tests/support/real_clis.py: skipped when it is absent,
a failure under LOOPCTL_REQUIRE_REAL_CLIS=1), pointed at the scripted model server, which
runs in this process on 127.0.0.1 (not in a network namespace: the worker must also reach the
Temporal server). HOME is the test's own (tests/conftest.py), so are Claude Code's files.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from support.beyond import loop_project, loopctl_worker, notes, tick
from support.journal import events
from support.model_server import ScriptedModelServer
from support.real_cli_scripts import SCRIPTS
from support.real_clis import API_KEY, Sandbox, cli_environment, require_cli, use_real_maker
from support.repos import commit_all, git

from loopctl.journal.events import EventType
from loopctl.temporal.claims import CLAIMED, FINISHED


def test_a_worker_runs_the_real_claude_cli_and_counts_its_spend_once(
    temporal_server: str, outside: Path
) -> None:
    require_cli("claude")
    project = loop_project(outside)
    with ScriptedModelServer(SCRIPTS["fix"]) as model:
        model.key = API_KEY
        port = int(model.url.rsplit(":", 1)[1])
        box = Sandbox(Path(os.environ["HOME"]), port, sealed=False)
        use_real_maker(project, "claude", box)
        commit_all(project, "the real claude as maker")
        env = cli_environment("claude", box)
        with loopctl_worker(temporal_server, project, "machine-a", outside / "w.log", env=env):
            first = asyncio.run(tick(temporal_server, "nightly-1"))
            asked = len(model.posts())
            # The same attempt delivered again (a retried activity): answered from the
            # journal, the model never asked again.
            again = asyncio.run(tick(temporal_server, "nightly-1-retry", attempt_id="nightly-1"))
        served = [seen.usage for seen in model.posts() if seen.usage is not None]

    log = (outside / "w.log").read_text()[-3000:]
    assert (first.status, first.outcome, first.worker) == ("done", "done", "machine-a"), log
    # The CLI's requests reached the scripted model server, with the key; none on the replay.
    assert asked > 0, log
    assert len(model.posts()) == asked
    assert all(seen.status == 200 for seen in model.posts())
    # The attempt's commit: one, on the loop's branch, the fix the model made.
    assert len(git(project, "log", "--format=%H", "main..loop/nightly/main").split()) == 1
    assert "return a + b" in git(project, "show", "loop/nightly/main:calc.py")
    # The journal's spend is what the server reported, counted once.
    found = events(project)
    (maker,) = [e.data for e in found if e.type == EventType.AGENT_FINISHED]
    assert (maker["backend"], maker["status"]) == ("claude", "ok")
    spent_in, spent_out = (sum(u[0] for u in served), sum(u[1] for u in served))
    assert (maker["input_tokens"], maker["output_tokens"]) == (spent_in, spent_out)
    assert first.tokens == spent_in + spent_out > 0
    assert again.replayed
    assert (again.run, again.tokens) == (first.run, first.tokens)
    types = [e.type for e in found]
    assert (types.count(EventType.AGENT_STARTED), types.count(EventType.TICK_STARTED)) == (1, 1)
    assert types.count(EventType.COMMIT_CREATED) == 1
    (claimed,) = notes(project, CLAIMED)
    assert (claimed["attempt"], claimed["worker"]) == ("nightly-1", "machine-a")
    (ended,) = notes(project, FINISHED)
    assert ended["tokens"] == first.tokens
    seqs = [e.seq for e in found]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))

"""The regression gate's decisions (loopctl.commands.proposal_gate): the replay gate's word on a
replayed run, table-tested on OfflineReplay values, and the tasks the checks gate reads from a
real recorded run. The gates end to end: tests/engine/test_proposals.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import invoke
from support.repos import make_project

from loopctl.commands.proposal_gate import Gate, recorded_tasks, replay_verdict
from loopctl.journal.events import EventLog
from loopctl.paths import ProjectPaths
from loopctl.replaying.offline import Divergence, OfflineReplay


@pytest.mark.parametrize(
    ("recorded", "replayed", "expected"),
    [
        ({"a": "done", "b": "done"}, {"a": "done", "b": "done"}, Gate("replay", ("a", "b"))),
        ({"a": "done"}, {"a": "failed"}, Gate("replay", ("a",), "a", "it replays failed")),
        ({"a": "done"}, {}, Gate("replay", ("a",), "a", "it replays not at all")),
        # A task that failed when recorded holds nothing: it may do anything in the replay.
        ({"a": "failed", "b": "done"}, {"a": "failed", "b": "done"}, Gate("replay", ("b",))),
        ({"a": "failed"}, {"a": "done"}, Gate("replay", ())),
    ],
)
def test_a_task_recorded_done_must_replay_done(
    recorded: dict[str, str], replayed: dict[str, str], expected: Gate
) -> None:
    gate = replay_verdict("run-1", OfflineReplay("run-1", None, recorded, replayed, True))

    assert (gate.kind, gate.checked, gate.broken) == (
        expected.kind,
        expected.checked,
        expected.broken,
    )
    assert expected.reason in gate.reason


def test_the_first_divergence_is_named() -> None:
    diverged = Divergence("a/attempt-1/maker", 2, "the prompt's rules block differs")
    replay = OfflineReplay("run-1", diverged, {"a": "done"}, {"a": "failed"})

    gate = replay_verdict("run-1", replay)

    assert not gate.passed
    assert "first divergence: the prompt's rules block differs" in gate.reason


def test_the_checks_gate_reads_the_loops_tasks_done_with_a_commit(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo)
    assert invoke(monkeypatch, repo, "goal", "tests green").exit_code == 0
    log = EventLog(ProjectPaths(repo).events_file)

    (task,) = recorded_tasks(log, "goal")

    assert task.task == "tests-green"
    assert task.condition == "tests green"
    assert len(task.commit) == 40
    assert recorded_tasks(log, "other") == []

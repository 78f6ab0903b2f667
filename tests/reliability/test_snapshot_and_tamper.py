"""Invariant 12: verdicts come from what was checked; refs, definitions and git config stay put.

A real hostile `command` maker (tests/reliability/agents/tampers.py) runs with the sandbox off,
so these checks are shown to hold on their own:
- a setsid double-forked survivor that edits the worktree during the check, or after the
  verdict, never gets its edit committed: loopctl commits the snapshot it checked;
- the agent's own commits on its task branch are folded into loopctl's commit; its commits or
  pushes anywhere else, and any other ref it moves, fail the attempt as tampering;
- a change to a definition or to the repository's git config during a turn (the maker's or the
  checker agent's) fails the attempt and holds every run, and `loopctl up`'s reloads, until a
  human approves the inbox item naming it;
- files loopctl copied or set up in a worktree reach no commit, the archive of earlier work too.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events, wait_event
from support.processes import Proc, kill_if_alive, read_pid, running_procs, spawn, wait_for
from support.repos import CALC, FAST_CHECK, TEST_CALC, git, toml_value

PY = sys.executable
TAMPERS = Path(__file__).parent / "agents" / "tampers.py"
BRANCH = "loop/fix/main"
SANDBOX_OFF = '\n[sandbox]\nmode = "off"\n'


def project(
    repo: Path,
    *attack: str | Path,
    check: tuple[str, ...] = FAST_CHECK,
    loop_extra: str = "",
    loop_head: str = "",
    judge: tuple[str | Path, ...] | None = None,
) -> Path:
    """calc with a bug, loop `fix` whose maker runs tampers.py ATTACK; the sandbox is off."""
    (repo / "calc.py").write_text(CALC)
    (repo / "tests").mkdir(exist_ok=True)
    (repo / "tests" / "test_calc.py").write_text(TEST_CALC)
    (repo / ".gitignore").write_text("__pycache__/\n")
    agents = repo / "agents"
    agents.mkdir(exist_ok=True)
    argv = [PY, str(TAMPERS), *(str(a) for a in attack)]
    (agents / "maker.toml").write_text(
        f'backend = "command"\nargv = {toml_value(argv)}\ntimeout = "60s"\n'
    )
    checker = f'[checker]\ncommand = {toml_value(check)}\nprotect = ["tests/**"]\n'
    if judge is not None:
        judge_argv = [PY, str(TAMPERS), *(str(a) for a in judge)]
        (agents / "judge.toml").write_text(
            f'backend = "command"\nargv = {toml_value(judge_argv)}\ntimeout = "60s"\n'
        )
        checker += 'agent = "judge"\n'
    loops = repo / ".loop" / "loops"
    loops.mkdir(parents=True, exist_ok=True)
    (repo / ".loop" / "config.toml").write_text('[defaults]\nmaker = "maker"\n' + SANDBOX_OFF)
    (loops / "fix.toml").write_text(
        loop_head
        + 'prompt = "Fix add() in calc.py."\n\n'
        + checker
        + "\n[budget]\nmax_iterations = 1\n"
        + loop_extra
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "calc with a bug")
    return repo


def run_fix(repo: Path, kill_at_seq: int | None = None) -> subprocess.CompletedProcess[str]:
    return run_loopctl(repo, "run", "fix", "--once", timeout=240, kill_at_seq=kill_at_seq)


def files_at(repo: Path, ref: str) -> list[str]:
    return git(repo, "ls-tree", "-r", "--name-only", ref).split()


def attempt(repo: Path) -> dict[str, object]:
    (finished,) = events(repo, "attempt_finished")
    return finished.data


def tamper_item(repo: Path) -> dict[str, Any]:
    """The one open inbox item that reports tampering (as the JSON listing shows it)."""
    listing = run_loopctl(repo, "inbox", "--json")
    assert_clean_exit(listing, 0)
    found = [i for i in json.loads(listing.stdout)["inbox"] if i["evidence"].get("tampering")]
    assert len(found) == 1, listing.stdout
    item: dict[str, Any] = found[0]
    return item


@pytest.fixture
def markdir(tmp_path: Path) -> Iterator[Path]:
    """Where the survivor and the test meet; the survivor is killed at the end if it lingers."""
    folder = tmp_path / "marks"
    folder.mkdir()
    yield folder
    kill_if_alive(read_pid(folder / "survivor.pid"))


# --- commit exactly what was checked -------------------------------------------------------------


def test_a_survivor_editing_the_worktree_during_the_check_gets_nothing_committed(
    repo: Path, markdir: Path
) -> None:
    # The check lets the survivor act while it runs, so the edit lands inside the check.
    handshake = (
        "import pathlib, sys, time, calc\n"
        f"marks = pathlib.Path({str(markdir)!r})\n"
        "(marks / 'check-started').write_text('1')\n"
        "deadline = time.monotonic() + 60\n"
        "while not (marks / 'tampered').exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
        "sys.exit(0 if calc.add(2, 3) == 5 else 1)\n"
    )
    project(repo, "survivor", markdir, "check-started", check=(PY, "-B", "-c", handshake))

    done = run_fix(repo)

    assert (markdir / "tampered").exists(), "the survivor never acted; this test proves nothing"
    assert_clean_exit(done, 1)
    finished = attempt(repo)
    assert finished["verdict"] == "failed"
    assert "changed while it was being checked" in str(finished["reason"])
    assert "backdoor.py" in str(finished["reason"])
    assert events(repo, "commit_created") == []
    assert "backdoor.py" not in files_at(repo, BRANCH)
    assert "== 5" in git(repo, "show", f"{BRANCH}:tests/test_calc.py")


def test_a_survivor_editing_the_worktree_after_the_verdict_gets_nothing_committed(
    repo: Path, markdir: Path, tmp_path: Path
) -> None:
    project(repo, "survivor", markdir, "go")
    # Where to stop loopctl: right after the passing verdict, before its commit. A copy of the
    # project run to the end says which event that is (one task, one attempt: the same seq).
    reference = shutil.copytree(repo, tmp_path / "reference", symlinks=True)
    assert_clean_exit(run_fix(reference), 0)
    kill_if_alive(wait_for(lambda: read_pid(markdir / "survivor.pid"), "the reference survivor"))
    (markdir / "survivor.pid").unlink()
    (passed,) = events(reference, "attempt_finished")
    assert passed.data["verdict"] == "passed"
    killed = run_fix(repo, kill_at_seq=passed.seq)
    assert killed.returncode == -9, killed.stderr
    (markdir / "go").write_text("loopctl is down\n")
    wait_for(lambda: (markdir / "tampered").exists(), "the survivor to edit the worktree")
    resumed = run_fix(repo)

    assert_clean_exit(resumed, 0)
    (commit,) = events(repo, "commit_created")
    sha = str(commit.data["sha"])
    assert "backdoor.py" not in files_at(repo, sha)
    assert "== 5" in git(repo, "show", f"{sha}:tests/test_calc.py")
    assert "a + b" in git(repo, "show", f"{sha}:calc.py")
    assert git(repo, "rev-parse", f"{sha}^{{tree}}").strip() == attempt(repo)["tree"]


def test_the_agents_own_commits_on_its_branch_are_folded_into_loopctls_commit(
    repo: Path,
) -> None:
    project(repo, "commit-own")
    base = git(repo, "rev-parse", "HEAD").strip()

    done = run_fix(repo)

    assert_clean_exit(done, 0)
    (commit,) = events(repo, "commit_created")
    sha = str(commit.data["sha"])
    assert git(repo, "rev-parse", BRANCH).strip() == sha
    assert git(repo, "rev-parse", f"{sha}^").strip() == base  # the agent's commit is no parent
    assert git(repo, "log", "-1", "--format=%an", sha).strip() == "loopctl"
    assert git(repo, "rev-parse", f"{sha}^{{tree}}").strip() == attempt(repo)["tree"]
    (folded,) = commit.data["folded"]
    assert git(repo, "log", "-1", "--format=%an", str(folded)).strip() == "agent"


@pytest.mark.parametrize(("attack", "delivered"), [("commit-own", True), ("commit-hidden", False)])
def test_without_a_commit_action_only_a_maker_commit_that_is_what_was_checked_is_pushed(
    repo: Path, tmp_path: Path, attack: str, delivered: bool
) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    git(repo, "remote", "add", "origin", str(origin))
    project(repo, attack, loop_extra='\n[deliver]\nactions = ["push"]\napprove = []\n')

    done = run_fix(repo)

    pushed = git(repo, "ls-remote", str(origin), f"refs/heads/{BRANCH}").split()
    if delivered:  # the maker committed exactly the checked worktree: its commit goes out
        assert_clean_exit(done, 0)
        assert pushed[0] == git(repo, "rev-parse", BRANCH).strip()
    else:  # its commit holds a file the checked worktree did not: nothing goes out
        assert_clean_exit(done, 1)
        assert pushed == []
        (task,) = events(repo, "task_finished")
        assert "not what was checked" in task.data["reason"]


def test_the_agents_own_commit_and_push_fail_the_attempt_as_tampering(
    repo: Path, tmp_path: Path
) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    git(repo, "remote", "add", "origin", str(origin))
    project(repo, "commit-push")

    done = run_fix(repo)

    assert_clean_exit(done, 1)
    finished = attempt(repo)
    assert finished["verdict"] == "failed"
    assert finished["fatal"] is True
    assert "tampering" in str(finished["reason"])
    assert "refs/remotes/origin/agent-pushed" in str(finished["reason"])
    assert events(repo, "commit_created") == []
    (task,) = events(repo, "task_finished")
    assert task.data["status"] == "stopped"
    item = tamper_item(repo)
    assert item["kind"] == "approval"
    assert "refs/remotes/origin/agent-pushed" in item["evidence"]["refs"]


def test_another_tasks_merge_during_a_turn_is_not_tampering(repo: Path, markdir: Path) -> None:
    # a's maker starts once b's turn has begun; b's finishes once a's delivery has fast-forwarded
    # main, so refs/heads/main moves inside b's turn, to the commit loopctl delivered.
    project(repo, "after-delivery", markdir, "refs/heads/main")
    items = json.dumps([{"id": "a"}, {"id": "b"}])
    loop = repo / ".loop" / "loops" / "fix.toml"
    loop.write_text(
        loop.read_text().replace("max_iterations = 1", "max_iterations = 1\nmax_parallel = 2")
        + f"\n[tasks]\ncommand = {toml_value([PY, '-c', f'print({items!r})'])}\n"
        + '\n[deliver]\nactions = ["commit", "merge"]\napprove = []\n'
    )
    git(repo, "commit", "-qam", "two tasks, merged")

    run_fix(repo)

    assert (markdir / "b-started").exists()
    (merged,) = [e for e in events(repo, "action_finished") if e.task == "a"]
    assert merged.data["ok"] is True
    assert git(repo, "rev-parse", "main").strip() == merged.data["commit"]
    verdicts = {e.task: e.data["verdict"] for e in events(repo, "attempt_finished")}
    assert verdicts == {"a": "passed", "b": "passed"}  # b's turn saw main move: loopctl's doing
    assert not any(e.data["evidence"].get("tampering") for e in events(repo, "inbox_opened"))


@pytest.mark.parametrize(
    ("kind", "ref"),
    [
        ("branch", "refs/heads/agent-branch"),
        ("move-main", "refs/heads/main"),
        ("tag", "refs/tags/agent-tag"),
        ("replace", "refs/replace/"),
        ("notes", "refs/notes/commits"),
        ("stash", "refs/stash"),
    ],
)
def test_a_ref_the_agent_moves_outside_loop_fails_the_attempt(
    repo: Path, kind: str, ref: str
) -> None:
    project(repo, "ref", kind)

    done = run_fix(repo)

    assert_clean_exit(done, 1)
    finished = attempt(repo)
    assert finished["fatal"] is True
    assert "tampering" in str(finished["reason"])
    refs = tamper_item(repo)["evidence"]["refs"]
    assert any(str(name).startswith(ref) for name in refs), refs
    assert events(repo, "commit_created") == []


def test_a_run_killed_after_reporting_tampering_resumes_with_that_verdict(
    repo: Path, tmp_path: Path
) -> None:
    project(repo, "ref", "tag")
    reference = shutil.copytree(repo, tmp_path / "reference", symlinks=True)
    assert_clean_exit(run_fix(reference), 1)
    (reported,) = [e for e in events(reference, "inbox_opened") if e.data["kind"] == "approval"]
    assert run_fix(repo, kill_at_seq=reported.seq).returncode == -9
    resumed = run_fix(repo)

    assert_clean_exit(resumed, 1)
    assert len(events(repo, "agent_started")) == 1  # the tampering turn is not redone
    finished = attempt(repo)
    assert finished["fatal"] is True
    assert "refs/tags/agent-tag" in str(finished["reason"])
    assert tamper_item(repo)["evidence"]["refs"] == ["refs/tags/agent-tag"]
    assert events(repo, "commit_created") == []


def test_an_agent_that_kills_loopctl_mid_turn_is_held_to_the_refs_from_before(
    repo: Path, markdir: Path
) -> None:
    project(repo, "kill-loopctl", markdir)

    killed = run_fix(repo)
    assert killed.returncode == -9, killed.stderr
    resumed = run_fix(repo)

    assert_clean_exit(resumed, 1)
    assert "refs/tags/agent-tag" in str(attempt(repo)["reason"])
    assert tamper_item(repo)["evidence"]["refs"] == ["refs/tags/agent-tag"]
    assert events(repo, "commit_created") == []


# --- definitions and git config unchanged by a turn ---------------------------------------------

DEFINITIONS = [
    ".loop/config.toml",
    ".loop/loops/fix.toml",
    ".loop/loops/evil.toml",
    "agents/maker.toml",
    "skills/evil/SKILL.md",
    ".claude/settings.json",
    ".git/config",
    ".git/hooks/pre-commit",
    ".git/info/exclude",
]


@pytest.mark.parametrize("target", DEFINITIONS)
def test_a_definition_changed_during_a_turn_holds_every_run_until_approved(
    repo: Path, target: str
) -> None:
    project(repo, "defs", target)

    first = run_fix(repo)

    assert_clean_exit(first, 1)
    finished = attempt(repo)
    assert finished["fatal"] is True
    assert "tampering" in str(finished["reason"])
    assert target in str(finished["reason"])
    item = tamper_item(repo)
    assert target in item["evidence"]["files"]
    held = run_fix(repo)
    assert_clean_exit(held, 1)
    assert str(item["id"]) in held.stderr
    assert len(events(repo, "attempt_started")) == 1  # no attempt started while held
    goal = run_loopctl(repo, "goal", "tests green", "--check", shlex.join(FAST_CHECK))
    assert_clean_exit(goal, 1)

    assert_clean_exit(run_loopctl(repo, "inbox", "approve", str(item["id"])), 0)
    again = run_fix(repo)

    assert_clean_exit(again, 0)  # the agent changes nothing this time: the turn is clean
    assert len(events(repo, "attempt_started")) == 2


def test_an_approved_push_waits_while_git_config_changed_by_a_turn_is_unapproved(
    repo: Path, tmp_path: Path
) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    git(repo, "remote", "add", "origin", str(origin))
    project(repo, "defs", ".git/config")
    # A second loop whose honest maker's push waits for a human.
    honest = [PY, str(TAMPERS), "honest"]
    (repo / "agents" / "honest.toml").write_text(
        f'backend = "command"\nargv = {toml_value(honest)}\ntimeout = "60s"\n'
    )
    (repo / ".loop" / "loops" / "ship.toml").write_text(
        'prompt = "Fix add()."\n\n[maker]\nagent = "honest"\n\n'
        f"[checker]\ncommand = {toml_value(FAST_CHECK)}\n\n"
        '[deliver]\nactions = ["commit", "push"]\napprove = ["push"]\n'
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ship loop")
    assert_clean_exit(run_loopctl(repo, "run", "ship", "--once"), 0)
    (gate,) = [e for e in events(repo, "inbox_opened") if e.loop == "ship"]
    assert_clean_exit(run_fix(repo), 1)  # the fix loop's maker points core.hooksPath elsewhere
    tampering = tamper_item(repo)

    refused = run_loopctl(repo, "inbox", "approve", str(gate.data["id"]))

    assert_clean_exit(refused, 1)
    assert "deliveries are held" in refused.stderr
    assert events(repo, "action_started") == []
    assert_clean_exit(run_loopctl(repo, "inbox", "approve", str(tampering["id"])), 0)
    assert_clean_exit(run_loopctl(repo, "inbox", "approve", str(gate.data["id"])), 0)
    assert git(repo, "ls-remote", str(origin)).strip() != ""


def test_a_checker_agent_changing_git_config_fails_the_attempt(repo: Path) -> None:
    project(repo, "commit-own", judge=("judge-defs", ".git/config"))

    done = run_fix(repo)

    assert_clean_exit(done, 1)
    finished = attempt(repo)
    assert finished["fatal"] is True
    assert ".git/config" in str(finished["reason"])
    assert ".git/config" in tamper_item(repo)["evidence"]["files"]
    assert events(repo, "commit_created") == []


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    yield from running_procs()


def test_up_does_not_reload_a_definition_changed_during_a_turn_until_approved(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    project(repo, "defs", ".loop/loops/evil.toml", loop_head='every = "1s"\n')
    spawn(procs, repo, tmp_path, "up")

    (opened,) = wait_event(repo, "inbox_opened", kind="approval", what="the tampering item")
    assert opened.data["evidence"]["tampering"]
    # A later tick is refused while the item is open (and nothing was reloaded before it).
    wait_event(repo, "tick_skipped", after=opened.seq, what="a tick refused while held")
    reloads = [e for e in events(repo, "note") if e.data.get("what") == "definitions_reloaded"]
    assert reloads == []
    approved = run_loopctl(repo, "inbox", "approve", str(opened.data["id"]))
    assert_clean_exit(approved, 0)
    (reloaded,) = wait_event(repo, "note", what="the reload after approval", added=["evil"])
    assert_clean_exit(run_loopctl(repo, "down"), 0)

    approval = [e for e in events(repo, "approved") if e.data.get("id") == opened.data["id"]]
    assert reloaded.seq > approval[0].seq


# --- copied and set-up files never reach a commit ------------------------------------------------


def test_copied_and_setup_files_stay_out_of_the_archive_of_earlier_work(repo: Path) -> None:
    setup = toml_value([PY, "-c", "open('setup-output.txt', 'w').write('built')"])
    project(
        repo,
        "honest",
        check=(PY, "-c", "raise SystemExit(1)"),  # never passes: the work stays in the worktree
        loop_extra=f'\n[worktree]\ncopy = [".env.local"]\nsetup = [{setup}]\n',
    )
    (repo / ".env.local").write_text("SECRET_SETTING=only-here\n")  # the user's, untracked
    assert_clean_exit(run_fix(repo), 1)
    worktree = Path(str(events(repo, "worktree_created")[0].data["path"]))
    (worktree / "notes.txt").write_text("work left uncommitted\n")

    assert_clean_exit(run_fix(repo), 1)  # a new run retires the old worktree into an archive

    (archived,) = [e for e in events(repo, "note") if e.data.get("what") == "branch_archived"]
    archive = str(archived.data["archive"])
    kept = files_at(repo, archive)
    assert "notes.txt" in kept
    assert ".env.local" not in kept
    assert "setup-output.txt" not in kept
    log = git(repo, "log", "--format=%H", archive).split()
    for sha in log:
        assert ".env.local" not in files_at(repo, sha)

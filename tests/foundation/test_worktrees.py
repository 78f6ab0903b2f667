"""loopctl.worktrees: safe names, create/reuse/recover against real git repositories."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support.repos import git as run_git
from support.repos import git_succeeds

from loopctl import git, worktrees
from loopctl.errors import GitError, LoopctlError
from loopctl.worktrees import (
    branch_name,
    ensure_worktree,
    list_worktrees,
    prune_worktrees,
    remove_worktree,
    sanitize_loop_name,
    sanitize_task_id,
    worktree_path,
)

KEPT = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")

HOSTILE = [
    "../../x",
    "-oProxyCommand=evil",
    "a;rm -rf ~",
    "--upload-pack=touch /tmp/pwned",
    "x\ny",
    "a\x00b",
    "ünï-cødé-🚀",
    "n" * 300,
    ".",
    "..",
    "@{-1}",
    "foo.lock",
    "",
    "/etc/passwd",
    "a/../../b",
    "HEAD@{0}",
    "trailing.",
    ".hidden",
    "sp ace",
    "a..b",
    "~user",
    "back\\slash",
    "a:b?c*[d]^e",
    "\udcff",  # an undecodable byte as os.fsdecode gives it
]
SAFE = ["pr-12", "issue_7", "Fix.Bug-3", "a", "x" * 64, "v1.2.3", "a-b_c.d"]


def commit_file(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    run_git(repo, "add", "--", name)
    run_git(repo, "commit", "-q", "-m", f"edit {name}")
    return run_git(repo, "rev-parse", "HEAD").strip()


def porcelain(repo: Path) -> list[dict[str, str]]:
    records = []
    for block in run_git(repo, "worktree", "list", "--porcelain").split("\n\n"):
        record = dict(line.partition(" ")[::2] for line in block.splitlines() if line)
        if record:
            records.append(record)
    return records


def is_valid_branch(repo: Path, name: str) -> bool:
    return git_succeeds(repo, "check-ref-format", "--branch", name)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    run_git(path, "init", "-q", "-b", "main")
    commit_file(path, "a.txt", "one\n")
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "worktrees"


# --- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", SAFE)
def test_safe_ids_come_back_unchanged(raw: str) -> None:
    assert sanitize_task_id(raw) == raw
    assert sanitize_loop_name(raw) == raw


@pytest.mark.parametrize("raw", HOSTILE)
def test_hostile_ids_become_safe(raw: str) -> None:
    clean = sanitize_task_id(raw)
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", clean)
    assert ".." not in clean
    assert not clean.endswith((".lock", "."))
    assert re.search(r"-[0-9a-f]{8}$", clean)  # changed, so it carries the hash of the raw id
    assert sanitize_task_id(raw) == clean  # stable
    assert sanitize_task_id(clean) == clean  # sanitising twice changes nothing


def test_hostile_ids_stay_readable() -> None:
    assert sanitize_task_id("ünï-cødé-🚀").startswith("uni-c-de-")
    assert sanitize_task_id("a;rm -rf ~").startswith("a-rm-rf-")
    assert sanitize_task_id("../../x").startswith("x-")
    assert sanitize_task_id("").startswith("task-")
    assert sanitize_loop_name("..").startswith("loop-")
    assert len(sanitize_task_id("n" * 300)) == worktrees.MAX_ID_LENGTH


def test_distinct_inputs_give_distinct_ids() -> None:
    inputs = [*HOSTILE, *SAFE, "a;b", "a b", "a\tb", "a-b", "x" * 65, "x" * 66]
    assert len({sanitize_task_id(raw) for raw in inputs}) == len(set(inputs))


def test_branch_names_pass_git_check_ref_format(repo: Path) -> None:
    for loop in ["babysit", *HOSTILE[:6]]:
        for task in [*HOSTILE, *SAFE]:
            name = branch_name(loop, task)
            assert name.startswith("loop/")
            assert name.count("/") == 2
            assert "\0" not in name
            assert is_valid_branch(repo, name), name


def test_check_ref_format_rejects_the_raw_hostile_ids(repo: Path) -> None:
    # Shows the branch test above has teeth: unsanitised, these names are refused.
    raw_ids = ["../../x", "a;rm -rf ~", "foo.lock", "@{-1}", "x\ny", ".", "..", "", "trailing."]
    assert not any(is_valid_branch(repo, f"loop/babysit/{raw}") for raw in raw_ids)


def test_worktree_paths_stay_inside_the_root(root: Path) -> None:
    for raw in HOSTILE:
        path = worktree_path(root, raw, raw)
        assert path.parent.parent == root
        assert path.resolve().is_relative_to(root.resolve())


def test_worktree_path_refuses_a_symlink_out_of_the_root(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    (root / "babysit").symlink_to(outside)
    with pytest.raises(LoopctlError, match="outside the worktree root"):
        worktree_path(root, "babysit", "t1")


# --- ensure_worktree ---------------------------------------------------------------------------


def test_creates_a_worktree_on_its_branch(repo: Path, root: Path) -> None:
    head = run_git(repo, "rev-parse", "HEAD").strip()
    ws = ensure_worktree(repo, root, "babysit", "pr-12")
    assert ws == worktrees.Workspace(
        root / "babysit" / "pr-12", "loop/babysit/pr-12", head, created=True, at_base=True
    )
    [_, record] = porcelain(repo)
    assert record["worktree"] == str(root / "babysit" / "pr-12")
    assert record["branch"] == "refs/heads/loop/babysit/pr-12"
    assert record["HEAD"] == head
    assert (ws.path / "a.txt").read_text() == "one\n"


def test_reuse_keeps_the_recorded_base(repo: Path, root: Path) -> None:
    first = ensure_worktree(repo, root, "babysit", "pr-12")
    commit_file(repo, "a.txt", "main moved\n")  # base_ref now names a newer commit
    commit_file(first.path, "b.txt", "task work\n")
    (first.path / "wip.txt").write_text("uncommitted")
    again = ensure_worktree(repo, root, "babysit", "pr-12")
    assert again == worktrees.Workspace(first.path, first.branch, first.base_sha, created=False)
    assert (again.path / "wip.txt").read_text() == "uncommitted"
    assert git.changed_paths(again.path, again.base_sha) == ["b.txt", "wip.txt"]


def test_reuse_without_a_record_uses_the_fork_point(repo: Path, root: Path) -> None:
    first = ensure_worktree(repo, root, "babysit", "t")
    commit_file(first.path, "b.txt", "task work\n")
    (git.git_dir(first.path) / "loopctl-base").unlink()
    commit_file(repo, "a.txt", "main moved\n")
    assert ensure_worktree(repo, root, "babysit", "t").base_sha == first.base_sha


def test_base_ref_picks_the_starting_commit(repo: Path, root: Path) -> None:
    old = run_git(repo, "rev-parse", "HEAD").strip()
    run_git(repo, "branch", "feature")
    commit_file(repo, "a.txt", "newer\n")
    ws = ensure_worktree(repo, root, "babysit", "t", base_ref="feature")
    assert ws.base_sha == old
    assert git.head_sha(ws.path) == old


def test_unknown_base_ref_is_named(repo: Path, root: Path) -> None:
    with pytest.raises(GitError, match="unknown ref 'no-such-branch'"):
        ensure_worktree(repo, root, "babysit", "t", base_ref="no-such-branch")
    assert not (root / "babysit" / "t").exists()


def test_repository_without_commits_is_refused(tmp_path: Path, root: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    run_git(empty, "init", "-q")
    with pytest.raises(LoopctlError, match="the repository has no commits yet; commit something"):
        ensure_worktree(empty, root, "babysit", "t")


@pytest.mark.parametrize("inside", ["wt", ".git/wt", "."])
def test_worktree_root_inside_the_repository_is_refused(repo: Path, inside: str) -> None:
    with pytest.raises(LoopctlError, match="inside the repository"):
        ensure_worktree(repo, repo / inside, "babysit", "t")
    assert len(porcelain(repo)) == 1


def test_root_above_the_repository_cannot_land_inside_it(repo: Path, tmp_path: Path) -> None:
    # <root>/<loop> would be the repository itself when the loop is named like its folder.
    with pytest.raises(LoopctlError, match="inside the repository"):
        ensure_worktree(repo, tmp_path, "repo", "t")


def test_hostile_ids_end_to_end(repo: Path, root: Path, tmp_path: Path) -> None:
    pwned = Path("/tmp/pwned")
    pwned_before = pwned.exists()
    neighbours = sorted(tmp_path.parent.iterdir())
    made = [ensure_worktree(repo, root, "babysit", raw) for raw in HOSTILE]

    assert len({ws.path for ws in made}) == len(HOSTILE)
    assert len({ws.branch for ws in made}) == len(HOSTILE)
    for ws in made:
        assert ws.created
        assert ws.path.parent == root / "babysit"
        assert ws.path.resolve().is_relative_to(root.resolve())
        assert is_valid_branch(repo, ws.branch)
        assert git.current_branch(ws.path) == ws.branch
    assert {r["worktree"] for r in porcelain(repo)[1:]} == {str(ws.path) for ws in made}
    assert sorted(tmp_path.parent.iterdir()) == neighbours
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo", "worktrees"]
    assert sorted(p.name for p in Path.home().iterdir()) == [".gitconfig-empty"]
    assert pwned.exists() == pwned_before


def test_leftover_folder_is_recovered(repo: Path, root: Path) -> None:
    path = worktree_path(root, "babysit", "t")
    path.mkdir(parents=True)
    (path / "half-written.txt").write_text("from a crash")
    ws = ensure_worktree(repo, root, "babysit", "t")
    assert ws.created
    assert not (path / "half-written.txt").exists()
    assert (path / "a.txt").exists()
    assert porcelain(repo)[1]["worktree"] == str(path)


def test_deleted_worktree_folder_is_recreated(repo: Path, root: Path) -> None:
    first = ensure_worktree(repo, root, "babysit", "t")
    subprocess.run(["rm", "-rf", str(first.path)], check=True)
    ws = ensure_worktree(repo, root, "babysit", "t")
    assert ws.created
    assert (ws.path / "a.txt").exists()
    assert len(porcelain(repo)) == 2


def test_add_killed_midway_is_recreated(repo: Path, root: Path) -> None:
    # `git worktree add` holds the lock reason "initializing" until checkout completes.
    first = ensure_worktree(repo, root, "babysit", "t")
    run_git(repo, "worktree", "lock", "--reason", "initializing", str(first.path))
    (first.path / "a.txt").unlink()
    ws = ensure_worktree(repo, root, "babysit", "t")
    assert ws.created
    assert (ws.path / "a.txt").exists()
    assert "locked" not in porcelain(repo)[1]


def test_worktree_on_another_branch_is_recreated(repo: Path, root: Path) -> None:
    first = ensure_worktree(repo, root, "babysit", "t")
    tip = commit_file(first.path, "b.txt", "committed work\n")
    run_git(first.path, "checkout", "-q", "-b", "elsewhere")
    ws = ensure_worktree(repo, root, "babysit", "t")
    assert ws.created
    assert git.current_branch(ws.path) == "loop/babysit/t"
    assert git.head_sha(ws.path) == tip  # the branch was not moved
    assert ws.base_sha == first.base_sha  # the fork point, not the branch tip


def test_existing_branch_is_checked_out_without_moving(repo: Path, root: Path) -> None:
    first = ensure_worktree(repo, root, "babysit", "t")
    tip = commit_file(first.path, "b.txt", "committed work\n")
    remove_worktree(repo, first.path)
    commit_file(repo, "a.txt", "main moved\n")
    ws = ensure_worktree(repo, root, "babysit", "t")
    assert ws.created
    assert not ws.at_base  # HEAD is the branch's work, not the base
    assert git.head_sha(ws.path) == tip
    assert ws.base_sha == first.base_sha
    assert git.changed_paths(ws.path, ws.base_sha) == ["b.txt"]


def test_what_the_caller_knows_gives_the_same_worktree(repo: Path, root: Path) -> None:
    head = run_git(repo, "rev-parse", "HEAD").strip()
    known = worktrees.Known(repo, git.worktree_list(repo), branch_is_new=True)
    ws = ensure_worktree(repo, root, "babysit", "t", head, known=known)
    asked = ensure_worktree(repo, root, "babysit", "u", head)
    assert (ws.base_sha, ws.created, ws.at_base) == (asked.base_sha, True, True)
    assert git.head_sha(ws.path) == head
    assert git.current_branch(ws.path) == "loop/babysit/t"
    # The base is recorded where a resumed run reads it, as for a worktree made by asking git.
    assert (git.git_dir(ws.path) / "loopctl-base").read_text() == head + "\n"
    assert git.new_worktree_git_dir(ws.path) == git.git_dir(ws.path)


def test_a_stale_claim_that_the_branch_is_new_never_overwrites_it(repo: Path, root: Path) -> None:
    first = ensure_worktree(repo, root, "babysit", "t")
    tip = commit_file(first.path, "b.txt", "committed work\n")
    remove_worktree(repo, first.path)
    base = run_git(repo, "rev-parse", "HEAD").strip()
    known = worktrees.Known(repo, git.worktree_list(repo), branch_is_new=True)
    with pytest.raises(GitError, match="already exists"):
        ensure_worktree(repo, root, "babysit", "t", base, known=known)
    assert run_git(repo, "rev-parse", "loop/babysit/t").strip() == tip


def test_the_git_dir_of_a_main_checkout_is_asked_of_git(repo: Path) -> None:
    # Only a linked worktree has a `.git` file to read; anything else is git's to answer.
    assert git.new_worktree_git_dir(repo) == git.git_dir(repo)


def test_folder_of_another_repository_is_not_deleted(repo: Path, root: Path) -> None:
    path = worktree_path(root, "babysit", "t")
    path.mkdir(parents=True)
    run_git(path, "init", "-q")
    (path / "precious.txt").write_text("keep me")
    with pytest.raises(LoopctlError, match="belongs to another repository"):
        ensure_worktree(repo, root, "babysit", "t")
    assert (path / "precious.txt").read_text() == "keep me"


# --- removal, listing, pruning -----------------------------------------------------------------


def test_remove_worktree_keeps_or_deletes_the_branch(repo: Path, root: Path) -> None:
    kept = ensure_worktree(repo, root, "babysit", "keep")
    gone = ensure_worktree(repo, root, "babysit", "gone")
    (kept.path / "dirty.txt").write_text("x")
    remove_worktree(repo, kept.path)
    remove_worktree(repo, gone.path, delete_branch=True)
    assert not kept.path.exists()
    assert not gone.path.exists()
    assert len(porcelain(repo)) == 1
    assert git.branch_exists(repo, kept.branch)
    assert not git.branch_exists(repo, gone.branch)
    remove_worktree(repo, gone.path)  # nothing left to remove is not an error


def test_remove_worktree_refuses_the_main_worktree(repo: Path) -> None:
    with pytest.raises(LoopctlError, match="main worktree"):
        remove_worktree(repo, repo, delete_branch=True)
    assert git.branch_exists(repo, "main")


def test_list_worktrees_shows_only_loopctls(repo: Path, root: Path, tmp_path: Path) -> None:
    clean = ensure_worktree(repo, root, "babysit", "clean")
    dirty = ensure_worktree(repo, root, "nightly", "dirty")
    (dirty.path / "new.txt").write_text("x")
    run_git(repo, "worktree", "add", "-q", "-b", "mine", str(tmp_path / "mine"))
    leftover = worktree_path(root, "babysit", "crashed")
    leftover.mkdir()

    infos = list_worktrees(repo, root)
    assert [(i.loop, i.task_id, i.dirty, i.exists, i.registered) for i in infos] == [
        ("babysit", "clean", False, True, True),
        ("babysit", "crashed", False, True, False),
        ("nightly", "dirty", True, True, True),
    ]
    assert infos[0].head == git.head_sha(clean.path)
    assert infos[0].branch == clean.branch
    assert infos[1].head == ""


def test_prune_worktrees_cleans_only_this_repositorys_leftovers(
    repo: Path, root: Path, tmp_path: Path
) -> None:
    live = ensure_worktree(repo, root, "babysit", "live")
    gone = ensure_worktree(repo, root, "babysit", "gone")
    subprocess.run(["rm", "-rf", str(gone.path)], check=True)
    crashed = worktree_path(root, "babysit", "crashed")
    crashed.mkdir()
    foreign = worktree_path(root, "babysit", "foreign")
    foreign.mkdir()
    run_git(foreign, "init", "-q")

    assert prune_worktrees(repo, root) == [crashed]
    assert live.path.exists()
    assert foreign.exists()
    assert [r["worktree"] for r in porcelain(repo)[1:]] == [str(live.path)]

"""loopctl.git against real repositories: queries, worktrees, diffs, commits, and hardening."""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support import repos

from loopctl import git
from loopctl.errors import GitError

KEPT = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM")


# Plain git for setting up scenes (and for showing that a planted trap is live).
run_git = functools.partial(repos.git, plain=True)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def executable(path: Path, body: str) -> Path:
    write(path, f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    run_git(path, "init", "-q", "-b", "main")
    write(path / "a.txt", "one\ntwo\n")
    write(path / "gone.txt", "bye\n")
    write(path / ".gitignore", "*.log\n")
    run_git(path, "add", "-A")
    run_git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def worktree(repo: Path, tmp_path: Path) -> Path:
    path = tmp_path / "wt"
    git.worktree_add(repo, path, "loop/l/t", git.head_sha(repo))
    return path


# --- running git -------------------------------------------------------------------------------


def test_failure_raises_git_error_naming_the_subcommand(repo: Path) -> None:
    with pytest.raises(GitError, match=r"^git log failed: ambiguous argument 'no-such-thing'"):
        git.git(["log", "no-such-thing"], cwd=repo)


def test_failure_is_data_without_check(repo: Path) -> None:
    result = git.git(["log", "no-such-thing"], cwd=repo, check=False)
    assert result.returncode != 0
    assert "no-such-thing" in result.stderr


def test_missing_git_binary_is_a_clear_error(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(GitError, match=r"^git is not installed or not on PATH$"):
        git.git(["status"], cwd=repo)


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="does not exist"):
        git.git(["status"], cwd=tmp_path / "nowhere")


def test_nul_in_an_argument_is_refused(repo: Path) -> None:
    with pytest.raises(GitError, match="NUL"):
        git.git(["rev-parse", "a\0b"], cwd=repo)


def test_stdin_is_empty_unless_input_is_given(repo: Path) -> None:
    empty_blob = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert git.git(["hash-object", "--stdin"], cwd=repo).stdout.strip() == empty_blob
    with_input = git.git(["hash-object", "--stdin"], cwd=repo, input="hello\n").stdout.strip()
    assert with_input == "ce013625030ba8dba906f756967f9e9ca394464a"


READS_STDIN = """
import sys
from pathlib import Path
from loopctl import git
print(git.git(["hash-object", "--stdin"], cwd=Path(sys.argv[1])).stdout.strip())
"""


def test_git_never_reads_loopctls_own_stdin(repo: Path) -> None:
    """loopctl's stdin is a pipe someone else feeds (a scheduler, a shell pipeline, a hook):
    a git command given no input reads nothing of it, here `hash-object --stdin`, which hashes
    whatever it is handed."""
    done = subprocess.run(
        [sys.executable, "-c", READS_STDIN, str(repo)], input="the caller's own input\n",
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # nothing read


def test_git_variables_from_the_caller_are_dropped(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As when loopctl itself runs inside a git hook of another repository.
    base = run_git(repo, "rev-parse", "HEAD").strip()
    (repo / "added.txt").write_text("added\n")
    run_git(repo, "add", "added.txt")
    run_git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "added")
    head = run_git(repo, "rev-parse", "HEAD").strip()
    other = tmp_path / "other"
    other.mkdir()
    run_git(other, "init", "-q")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "bogus-index"))
    assert git.toplevel(repo) == repo
    assert git.has_commits(repo)
    # And the one reader that takes git's output as bytes (a patch for `git apply`).
    assert b"+added" in git.patch_between(repo, base, head)


def test_a_file_name_that_is_not_utf8_is_listed_not_a_traceback(repo: Path) -> None:
    """git prints names byte for byte (core.quotePath is off in loopctl's git): a Latin-1
    name in a maker's change is read with surrogate escapes, never a UnicodeDecodeError."""
    base = run_git(repo, "rev-parse", "HEAD").strip()
    name = b"caf\xe9.txt"
    with open(os.path.join(os.fsencode(repo), name), "wb") as made:
        made.write(b"x\n")

    changed = git.changed_paths(repo, base)

    assert changed == [os.fsdecode(name)]


def test_a_git_that_never_answers_is_given_up_with_why(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A git that hangs (a network filesystem gone, a wedged credential helper) is stopped at
    its timeout, with a GitError naming the command, not waited on for ever."""
    fake = tmp_path / "bin"
    fake.mkdir()
    real = shutil.which("git")
    # Answers what loopctl asks before (its config and index checks), hangs at `status`.
    (fake / "git").write_text(
        f'#!/bin/sh\nfor word; do last=$word; done\n[ "$last" = status ] && exec sleep 600\n'
        f'exec {real} "$@"\n'
    )
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")

    with pytest.raises(GitError, match="git status timed out after 2s"):
        git.git(["status"], cwd=repo, timeout=2)


def test_extra_env_reaches_git(repo: Path) -> None:
    ident = git.git(
        ["var", "GIT_AUTHOR_IDENT"],
        cwd=repo,
        extra_env={"GIT_AUTHOR_NAME": "Loop Bot", "GIT_AUTHOR_EMAIL": "bot@example.com"},
    ).stdout
    assert ident.startswith("Loop Bot <bot@example.com>")


def test_hardening_config_is_in_force(repo: Path) -> None:
    run_git(repo, "config", "core.hooksPath", "/somewhere/else")
    run_git(repo, "config", "core.fsmonitor", "/bin/true")
    hooks = git.git(["config", "core.hooksPath"], cwd=repo).stdout.strip()
    fsmonitor = git.git(["config", "core.fsmonitor"], cwd=repo).stdout.strip()
    assert (hooks, fsmonitor) == ("/dev/null", "false")


# --- queries -----------------------------------------------------------------------------------


def test_is_git_repo(repo: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git.is_git_repo(repo)
    assert git.is_git_repo(write(repo / "sub" / "f", "x").parent)
    assert not git.is_git_repo(plain)
    assert not git.is_git_repo(tmp_path / "missing")


def test_toplevel_from_a_subfolder(repo: Path) -> None:
    sub = repo / "deep" / "er"
    sub.mkdir(parents=True)
    assert git.toplevel(sub) == repo


def test_resolve_commit_gives_full_shas(repo: Path) -> None:
    head = run_git(repo, "rev-parse", "HEAD").strip()
    run_git(repo, "tag", "-a", "v1", "-m", "annotated")
    assert git.resolve_commit(repo, "HEAD") == head
    assert git.resolve_commit(repo, "main") == head
    assert git.resolve_commit(repo, "v1") == head  # peeled to the commit
    assert git.resolve_commit(repo, head[:8]) == head


@pytest.mark.parametrize(
    "ref",
    ["nope", "--upload-pack=touch pwned", "-x", "a\0b", "x\ny", "", "HEAD:a.txt", "@{-1}"],
)
def test_resolve_commit_unknown_ref(repo: Path, ref: str) -> None:
    with pytest.raises(GitError, match=r"^unknown ref ") as info:
        git.resolve_commit(repo, ref)
    assert repr(ref) in str(info.value)
    assert not (repo / "pwned").exists()


def test_has_commits(tmp_path: Path, repo: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    run_git(empty, "init", "-q")
    assert not git.has_commits(empty)
    assert git.has_commits(repo)


def test_current_branch_and_detached_head(repo: Path) -> None:
    assert git.current_branch(repo) == "main"
    run_git(repo, "checkout", "-q", "--detach")
    assert git.current_branch(repo) is None


def test_branch_exists(repo: Path) -> None:
    run_git(repo, "branch", "loop/a/b")
    assert git.branch_exists(repo, "main")
    assert git.branch_exists(repo, "loop/a/b")
    assert not git.branch_exists(repo, "mai")
    assert not git.branch_exists(repo, "loop/a")
    assert not git.branch_exists(repo, "loop/*/b")
    assert not git.branch_exists(repo, "../../HEAD")
    assert not git.branch_exists(repo, "--all")


# --- worktrees ---------------------------------------------------------------------------------


def test_worktree_add_creates_branch_at_base(repo: Path, tmp_path: Path) -> None:
    base = git.head_sha(repo)
    write(repo / "a.txt", "moved on\n")
    run_git(repo, "commit", "-q", "-am", "main moves on")
    path = tmp_path / "wt"
    git.worktree_add(repo, path, "loop/l/t", base)
    assert git.head_sha(path) == base
    assert git.current_branch(path) == "loop/l/t"
    assert git.current_branch(repo) == "main"


def test_worktree_add_keeps_an_existing_branch_where_it_is(repo: Path, tmp_path: Path) -> None:
    base = git.head_sha(repo)
    run_git(repo, "checkout", "-q", "-b", "loop/l/t")
    write(repo / "a.txt", "work\n")
    run_git(repo, "commit", "-q", "-am", "earlier work")
    tip = git.head_sha(repo)
    run_git(repo, "checkout", "-q", "main")
    path = tmp_path / "wt"
    git.worktree_add(repo, path, "loop/l/t", base)
    assert git.head_sha(path) == tip
    assert git.current_branch(path) == "loop/l/t"


def test_worktree_list_reports_each_state(repo: Path, tmp_path: Path) -> None:
    head = git.head_sha(repo)
    git.worktree_add(repo, tmp_path / "on-branch", "loop/l/a", head)
    run_git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "detached"), "HEAD")
    git.worktree_add(repo, tmp_path / "locked", "loop/l/b", head)
    run_git(repo, "worktree", "lock", "--reason", "task running", str(tmp_path / "locked"))
    git.worktree_add(repo, tmp_path / "gone", "loop/l/c", head)
    subprocess.run(["rm", "-rf", str(tmp_path / "gone")], check=True)

    entries = {entry.path.name: entry for entry in git.worktree_list(repo)}
    assert git.worktree_list(repo)[0].path == repo
    assert entries["repo"].branch == "main"
    assert entries["on-branch"] == git.WorktreeEntry(
        tmp_path / "on-branch", head, "loop/l/a", False, False, False
    )
    assert entries["detached"].branch is None
    assert entries["detached"].detached
    assert entries["locked"].locked
    assert entries["locked"].lock_reason == "task running"
    assert entries["gone"].prunable
    assert not entries["on-branch"].prunable

    git.worktree_prune(repo)
    assert "gone" not in {entry.path.name for entry in git.worktree_list(repo)}


def test_worktree_remove_and_delete_branch(repo: Path, worktree: Path) -> None:
    write(worktree / "dirty.txt", "uncommitted")
    git.worktree_remove(repo, worktree)
    assert not worktree.exists()
    assert [entry.path for entry in git.worktree_list(repo)] == [repo]
    assert git.branch_exists(repo, "loop/l/t")
    git.delete_branch(repo, "loop/l/t")
    assert not git.branch_exists(repo, "loop/l/t")


def test_merge_base_and_common_dir(repo: Path, worktree: Path) -> None:
    base = git.head_sha(repo)
    write(worktree / "a.txt", "branch work\n")
    run_git(worktree, "commit", "-q", "-am", "work")
    assert git.merge_base(repo, "loop/l/t", "main") == base
    assert git.common_dir(worktree) == repo / ".git"
    assert git.git_dir(worktree).parent == repo / ".git" / "worktrees"


# --- changes -----------------------------------------------------------------------------------


def make_every_kind_of_change(worktree: Path) -> None:
    write(worktree / "committed.txt", "added in a commit\n")
    run_git(worktree, "add", "committed.txt")
    run_git(worktree, "commit", "-q", "-m", "branch work")
    write(worktree / "a.txt", "one\nTWO\n")  # modified, unstaged
    write(worktree / "staged.txt", "staged\n")
    run_git(worktree, "add", "staged.txt")
    (worktree / "gone.txt").unlink()  # deleted
    write(worktree / "new dir" / "untracked.txt", "new\n")
    write(worktree / "line\nbreak.txt", "newline in name\n")
    write(worktree / "ünï-cødé-🚀.txt", "unicode\n")
    write(worktree / "*", "a glob of a name\n")
    write(worktree / "debug.log", "ignored\n")


def test_changed_paths_sees_every_kind_of_change(repo: Path, worktree: Path) -> None:
    base = git.head_sha(repo)
    make_every_kind_of_change(worktree)
    assert git.changed_paths(worktree, base) == sorted(
        [
            "*",
            "a.txt",
            "committed.txt",
            "gone.txt",
            "line\nbreak.txt",
            "new dir/untracked.txt",
            "staged.txt",
            "ünï-cødé-🚀.txt",
        ]
    )


def test_changed_paths_from_a_subfolder_are_repository_relative(repo: Path, worktree: Path) -> None:
    base = git.head_sha(repo)
    write(worktree / "sub" / "x.txt", "x\n")
    write(worktree / "a.txt", "changed\n")
    assert git.changed_paths(worktree / "sub", base) == ["a.txt", "sub/x.txt"]


def test_changed_paths_is_empty_when_nothing_changed(repo: Path, worktree: Path) -> None:
    assert git.changed_paths(worktree, git.head_sha(repo)) == []


def test_changed_paths_accepts_a_ref_and_rejects_an_unknown_one(repo: Path, worktree: Path) -> None:
    write(worktree / "a.txt", "changed\n")
    assert git.changed_paths(worktree, "main") == ["a.txt"]
    with pytest.raises(GitError, match="unknown ref '--output=x'"):
        git.changed_paths(worktree, "--output=x")


def test_diff_text_shows_untracked_files_as_added_without_touching_the_index(
    repo: Path, worktree: Path
) -> None:
    base = git.head_sha(repo)
    make_every_kind_of_change(worktree)
    index = git.git_dir(worktree) / "index"
    before = index.read_bytes()
    text = git.diff_text(worktree, base, 100_000)
    assert index.read_bytes() == before
    assert "+one\n+TWO" not in text
    assert "+TWO\n" in text
    assert "deleted file mode" in text
    assert "diff --git a/new dir/untracked.txt b/new dir/untracked.txt\nnew file mode" in text
    assert "+unicode\n" in text
    assert "+a glob of a name\n" in text
    assert "ignored" not in text
    assert run_git(worktree, "status", "--porcelain", "--", "new dir").startswith("??")


def test_diff_text_is_truncated(repo: Path, worktree: Path) -> None:
    base = git.head_sha(repo)
    write(worktree / "big.txt", "é" * 5_000)
    text = git.diff_text(worktree, base, 1_000)
    body, marker, _ = text.partition("\n[diff truncated at 1000 bytes]")
    assert marker
    assert len(body.encode()) <= 1_000
    assert git.diff_text(worktree, base, 100_000).count("é") == 5_000


def test_diff_stat_includes_untracked_files(repo: Path, worktree: Path) -> None:
    base = git.head_sha(repo)
    write(worktree / "a.txt", "one\ntwo\nthree\n")
    write(worktree / "fresh.txt", "1\n2\n")
    stat_text = git.diff_stat(worktree, base)
    assert "a.txt" in stat_text
    assert "fresh.txt" in stat_text
    assert "2 files changed, 3 insertions(+)" in stat_text


def test_is_dirty(repo: Path, worktree: Path) -> None:
    assert not git.is_dirty(worktree)
    write(worktree / "debug.log", "ignored")
    assert not git.is_dirty(worktree)
    write(worktree / "new.txt", "x")
    assert git.is_dirty(worktree)


# --- commits -----------------------------------------------------------------------------------


def test_commit_all_commits_everything_with_the_given_identity(repo: Path, worktree: Path) -> None:
    base = git.head_sha(repo)
    make_every_kind_of_change(worktree)
    sha = git.commit_all(
        worktree, "-m looks like an option\n\nbody", author_name="Bot", author_email="b@x"
    )
    assert sha is not None
    assert sha == git.head_sha(worktree)
    assert not git.is_dirty(worktree) or git.changed_paths(worktree, sha) == []
    assert run_git(worktree, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s").strip() == (
        "Bot <b@x>|Bot <b@x>|-m looks like an option"
    )
    committed = run_git(worktree, "diff", "--name-only", "-z", base, sha).split("\0")
    assert "gone.txt" in committed
    assert "line\nbreak.txt" in committed
    assert "debug.log" not in committed


def test_commit_all_returns_none_when_clean(worktree: Path) -> None:
    assert git.commit_all(worktree, "nothing", author_name="Bot", author_email="b@x") is None
    write(worktree / "debug.log", "ignored only")
    assert git.commit_all(worktree, "nothing", author_name="Bot", author_email="b@x") is None


# --- planted traps (invariant 8) ---------------------------------------------------------------


@pytest.mark.parametrize("where", ["git-dir", "hooksPath"])
def test_planted_hooks_do_not_run(repo: Path, worktree: Path, tmp_path: Path, where: str) -> None:
    sentinel = tmp_path / "hook-ran"
    hooks = repo / ".git" / "hooks"
    if where == "hooksPath":
        hooks = tmp_path / "planted-hooks"
        run_git(worktree, "config", "core.hooksPath", str(hooks))
    for hook in ("pre-commit", "commit-msg", "post-commit", "post-checkout"):
        executable(hooks / hook, f"echo {hook} >> '{sentinel}'")

    write(worktree / "a.txt", "agent work\n")
    assert git.commit_all(worktree, "work", author_name="Bot", author_email="b@x")
    git.worktree_add(repo, tmp_path / "second", "loop/l/second", git.head_sha(repo))
    assert not sentinel.exists()

    # The traps are live: plain git runs them.
    write(worktree / "a.txt", "more\n")
    run_git(worktree, "commit", "-q", "-am", "plain")
    assert sentinel.read_text().split() == ["pre-commit", "commit-msg", "post-commit"]


def test_planted_fsmonitor_does_not_run(repo: Path, worktree: Path, tmp_path: Path) -> None:
    sentinel = tmp_path / "fsmonitor-ran"
    monitor = executable(tmp_path / "monitor", f"echo ran >> '{sentinel}'")
    run_git(worktree, "config", "core.fsmonitor", str(monitor))
    write(worktree / "a.txt", "changed\n")
    base = git.head_sha(repo)

    assert git.is_dirty(worktree)
    assert git.changed_paths(worktree, base) == ["a.txt"]
    git.diff_text(worktree, base, 10_000)
    git.diff_stat(worktree, base)
    git.commit_all(worktree, "work", author_name="Bot", author_email="b@x")
    assert not sentinel.exists()

    run_git(worktree, "status", "--porcelain")
    assert sentinel.exists()


def test_planted_filter_does_not_run(repo: Path, worktree: Path, tmp_path: Path) -> None:
    sentinel = tmp_path / "filter-ran"
    # A driver name with "=" cannot be overridden with `-c`; it must still be neutralised.
    for name in ("evil", "ev=il"):
        run_git(worktree, "config", f"filter.{name}.clean", f"sh -c 'echo x >> {sentinel}; cat'")
        run_git(worktree, "config", f"filter.{name}.smudge", f"sh -c 'echo x >> {sentinel}; cat'")
    write(worktree / ".gitattributes", "*.txt filter=evil\n*.md filter=ev=il\n")
    write(worktree / "a.txt", "changed\n")
    write(worktree / "notes.md", "new\n")
    base = git.head_sha(repo)

    git.changed_paths(worktree, base)
    git.diff_text(worktree, base, 10_000)
    git.is_dirty(worktree)
    sha = git.commit_all(worktree, "work", author_name="Bot", author_email="b@x")
    git.worktree_add(repo, tmp_path / "second", "loop/l/second", str(sha))
    write(tmp_path / "second" / "stray.txt", "untracked\n")
    git.clean_worktree(tmp_path / "second", [])  # runs without the probe: it reads no content
    git.recycle_checkout(tmp_path / "second", "loop/l/third", str(sha))
    assert not (tmp_path / "second" / "stray.txt").exists()
    assert not sentinel.exists()

    write(worktree / "notes.md", "plain git runs it\n")
    run_git(worktree, "add", "notes.md")
    assert sentinel.exists()


def test_required_planted_filter_fails_rather_than_being_skipped(
    repo: Path, worktree: Path
) -> None:
    run_git(worktree, "config", "filter.crypt.clean", "cat")
    run_git(worktree, "config", "filter.crypt.required", "true")
    write(worktree / ".gitattributes", "*.txt filter=crypt\n")
    write(worktree / "a.txt", "secret\n")
    with pytest.raises(GitError, match="clean filter 'crypt' failed"):
        git.commit_all(worktree, "work", author_name="Bot", author_email="b@x")


def test_planted_diff_drivers_and_signing_do_not_run(
    repo: Path, worktree: Path, tmp_path: Path
) -> None:
    sentinel = tmp_path / "driver-ran"
    tool = executable(tmp_path / "tool", f"echo ran >> '{sentinel}'; cat \"$1\"")
    run_git(worktree, "config", "diff.external", str(tool))
    run_git(worktree, "config", "diff.evil.command", str(tool))
    run_git(worktree, "config", "diff.evil.textconv", str(tool))
    run_git(worktree, "config", "gpg.program", str(tool))
    run_git(worktree, "config", "commit.gpgSign", "true")
    write(worktree / ".gitattributes", "*.txt diff=evil\n")
    write(worktree / "a.txt", "changed\n")
    base = git.head_sha(repo)

    assert "+changed" in git.diff_text(worktree, base, 10_000)
    git.diff_stat(worktree, base)
    assert git.commit_all(worktree, "work", author_name="Bot", author_email="b@x")
    assert not sentinel.exists()

    run_git(worktree, "diff", "HEAD~1")
    assert sentinel.exists()


def test_a_snapshot_from_a_seed_index_sees_a_same_size_edit_in_the_same_second(
    repo: Path, tmp_path: Path
) -> None:
    """The seed only saves hashing: an edit that keeps size and mtime second, made right after
    the worktree was created, is in the snapshot as it is without a seed."""
    (repo / "calc.py").write_text("a - b\n")
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-qm", "calc")
    base = run_git(repo, "rev-parse", "HEAD").strip()
    worktree = tmp_path / "wt"
    run_git(repo, "worktree", "add", "-q", "-b", "t", str(worktree), base)
    seed = tmp_path / "seed.index"
    git.seed_snapshot_index(worktree, seed)
    (worktree / "calc.py").write_text("a + b\n")
    (worktree / "new.py").write_text("x\n")

    seeded = git.snapshot_tree(worktree, base, seed=seed)

    assert seeded == git.snapshot_tree(worktree, base)
    assert run_git(repo, "cat-file", "-p", f"{seeded}:calc.py") == "a + b\n"
    assert run_git(repo, "cat-file", "-p", f"{seeded}:new.py") == "x\n"


def test_a_failing_git_command_reports_gits_error_not_the_graft_hint(repo: Path) -> None:
    """GIT_GRAFT_FILE (pinned against planted grafts) makes git print a deprecation hint before
    its error on every command that reads commits: the error is what the message must say."""
    with pytest.raises(GitError) as raised:
        git.git(["merge-base", "HEAD", "no-such-branch"], cwd=repo)
    message = str(raised.value)
    assert "no-such-branch" in message
    assert "hint" not in message
    assert "graft" not in message.lower()


def test_a_held_object_outlives_gc_until_released(repo: Path) -> None:
    (repo / "held.txt").write_text("work nobody committed\n")
    blob = repos.git(repo, "hash-object", "-w", "held.txt").strip()
    (repo / "held.txt").unlink()

    git.hold_object(repo, "abc123", blob)
    repos.git(repo, "gc", "--quiet", "--prune=now")
    kept = repos.git_succeeds(repo, "cat-file", "-e", blob)
    git.release_object(repo, "abc123")
    git.release_object(repo, "abc123")  # released twice: nothing to do
    repos.git(repo, "gc", "--quiet", "--prune=now")

    assert kept
    assert not repos.git_succeeds(repo, "cat-file", "-e", blob)
    with pytest.raises(GitError, match="not an object id"):
        git.hold_object(repo, "abc123", "--stdin")

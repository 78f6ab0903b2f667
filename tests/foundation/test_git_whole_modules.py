"""loopctl/git/'s modules mutated whole (issue 27, item 5): the behaviour their surviving mutants
showed untested, each test in real repositories with real git processes.

Each test names the mutants it kills (bench/mutation.py's git-config, git-command, git and
git-objects targets).
"""

from __future__ import annotations

import functools
import os
import pwd
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import repos

from loopctl import git as lgit
from loopctl.errors import GitError

# git for the test's own set-up, as a user runs it.
plain = functools.partial(repos.git, plain=True)


def in_namespace(
    binds: dict[str, Path], code: str, *args: str, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run Python `code` (argv: `args`) in a mount namespace of its own where each file of
    `binds` (destination: source) is bound over the machine's; the suite's GIT_CONFIG_NOSYSTEM
    is lifted there, and PATH is `path` when given."""
    unshare = shutil.which("unshare")
    if unshare is None or not all(Path(dest).is_file() for dest in binds):
        pytest.skip(f"needs unshare(1) and {', '.join(binds)} to bind other files over")
    namespace = [unshare, "-m"] if os.geteuid() == 0 else [unshare, "-Urm"]
    probe = subprocess.run([*namespace, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {probe.stderr.decode(errors='replace')}")
    env = {k: v for k, v in os.environ.items() if k != "GIT_CONFIG_NOSYSTEM"}
    if path is not None:
        env["PATH"] = path
    mounts = " && ".join(
        f"mount --bind {shlex.quote(str(src))} {shlex.quote(dest)}" for dest, src in binds.items()
    )
    return subprocess.run(
        [*namespace, "sh", "-c", f'{mounts} && exec "$@"', "sh", sys.executable, "-c", code, *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def nested_library(parent: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A nested repository `lib` in `parent`, committed there, whose `.gitattributes` names a
    `filter=evil` for its data: (lib, the marker the filter would write, the filter program)."""
    marker = tmp_path / "ran.txt"
    program = tmp_path / "clean"
    program.write_text(f"#!/bin/sh\necho clean >> '{marker}'\ncat\n")
    program.chmod(0o755)
    lib = parent / "lib"
    repos.make_repo(lib)
    (lib / ".gitattributes").write_text("*.txt filter=evil\n")
    (lib / "data.txt").write_text("data\n")
    repos.commit_all(lib, "data")
    plain(parent, "add", "lib")
    plain(parent, "commit", "-q", "-m", "the nested library")
    return lib, marker, program


def test_the_users_system_wide_ssh_command_is_the_one_ssh_urls_run(
    repo: Path, tmp_path: Path
) -> None:
    """/etc/gitconfig is the user's own configuration as much as ~/.gitconfig: a machine set up
    with `core.sshCommand` there (a jump host, a key of the machine's) reaches ssh remotes
    through it. Kills "system" dropped from the trusted scopes (git/neutralise.py), which left
    loopctl's network commands with plain `ssh`."""
    marker = tmp_path / "ran.txt"
    program = tmp_path / "system-ssh"
    program.write_text(f"#!/bin/sh\necho \"system-ssh $*\" >> '{marker}'\nexit 1\n")
    program.chmod(0o755)
    config = tmp_path / "gitconfig"
    config.write_text(f"[core]\n\tsshCommand = {program}\n")
    code = (
        "import sys; from pathlib import Path; from loopctl import git; "
        "from loopctl.errors import GitError\n"
        "try:\n git.remote_branch_sha(Path(sys.argv[1]), 'ssh://127.0.0.1:1/p.git', 'main')\n"
        "except GitError as exc:\n print(exc)\n"
    )
    done = in_namespace({"/etc/gitconfig": config}, code, str(repo))
    assert done.returncode == 0, done.stdout + done.stderr
    assert marker.is_file(), done.stdout + done.stderr
    assert "127.0.0.1" in marker.read_text()


def test_every_git_loopctl_runs_is_the_one_on_path(repo: Path, tmp_path: Path) -> None:
    """A user whose git is not /usr/bin's (a newer one in /usr/local/bin, Homebrew's, Nix's):
    loopctl runs that git, the first on PATH, for every command, the config listings and index
    reads behind the filter pins included, in the repository and in its submodules. Here
    /usr/bin/git is replaced by one that fails. Kills git's environment dropped from the
    listing of the repository's config, of its gitlinks (in its own index or a private one) and
    of a submodule's config (git/neutralise.py: git then searched only /bin:/usr/bin)."""
    library = tmp_path / "library"
    repos.make_repo(library)
    add = ("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    plain(repo, *add)
    plain(repo, "commit", "-q", "-m", "the library")
    (repo / "README.md").write_text("changed\n")
    users = tmp_path / "users-bin"
    users.mkdir()
    (users / "git").symlink_to("/usr/lib/git-core/git")
    other = tmp_path / "other-git"
    other.write_text("#!/bin/sh\necho 'fatal: not the git on PATH' >&2\nexit 128\n")
    other.chmod(0o755)
    code = (
        "import sys; from pathlib import Path; from loopctl import git\n"
        "repo = Path(sys.argv[1])\n"
        "print(git.git(['status', '--porcelain'], cwd=repo).stdout)\n"
        "tree = git.snapshot_tree(repo, sys.argv[2])\n"
        "print(git.tree_changes(repo, sys.argv[2], tree))\n"
    )
    if not Path("/usr/lib/git-core/git").is_file():
        pytest.skip("git's own copy in /usr/lib/git-core is where the user's git is linked from")
    base = plain(repo, "rev-parse", "HEAD").strip()
    path = f"{users}:/usr/bin:/bin"
    done = in_namespace({"/usr/bin/git": other}, code, str(repo), base, path=path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == [" M README.md", ""]
    assert done.stdout.splitlines()[-1] == "['README.md']"


def test_a_filter_in_a_nested_repository_another_account_owns_never_runs(
    repo: Path, tmp_path: Path
) -> None:
    """The agent (as another account) made a repository `lib` inside the worktree, committed as
    a gitlink, whose own config names a clean filter. Asking whether `lib` is dirty, git runs
    `git status` there with GIT_DIR set, which reads that config whoever owns it: loopctl reads it
    the same way, and pins the filter. Git's discovery instead stops at a repository of another
    owner ("dubious ownership"), failing the commit that git itself makes. Kills GIT_DIR dropped
    from the submodule's listing (git/neutralise.py's child_env)."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to give the nested repository to another account")
    nobody = pwd.getpwnam("nobody")
    lib, marker, program = nested_library(repo, tmp_path)
    plain(lib, "config", "filter.evil.clean", str(program))
    for path in [lib, *lib.rglob("*")]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid, follow_symlinks=False)
    old = 1_600_000_000  # an mtime long before lib's index was written: git must read the file
    os.utime(lib / "data.txt", (old, old))
    base = plain(repo, "rev-parse", "HEAD").strip()
    (repo / "README.md").write_text("changed\n")
    made = lgit.commit_all(repo, "work", author_name="Bot", author_email="bot@example.com")
    assert made is not None
    assert lgit.tree_changes(repo, base, made) == ["README.md"]
    assert not marker.exists()
    # The trap is live: plain git's `add -A` asks lib, which runs the filter.
    os.utime(lib / "data.txt", (old + 1, old + 1))
    subprocess.run(["git", "add", "-A"], cwd=repo, capture_output=True, check=False)
    assert marker.exists()


def test_objects_are_written_and_read_in_a_bare_repository(tmp_path: Path) -> None:
    """A bare repository (a data branch's, a remote's) has no working tree: the filter pins'
    look for gitlinks finds none there, where git says the command "must be run in a work
    tree", and the objects are written and read all the same. Kills the two failure checks of
    git/neutralise.py's _gitlink_folders turned off."""
    bare = tmp_path / "data.git"
    plain(tmp_path, "init", "-q", "--bare", str(bare))
    blob = lgit.write_blob(bare, "state\n")
    tree = lgit.write_tree(bare, {"STATE.md": blob})
    commit = lgit.commit_tree(
        bare, tree, [], "state", author_name="Bot", author_email="bot@example.com"
    )
    assert lgit.tree_of(bare, commit) == tree
    assert lgit.read_blob(bare, commit, "STATE.md") == "state\n"
    assert lgit.paths_in_commit(bare, commit, ["STATE.md", "other"]) == {"STATE.md"}


def test_a_clone_is_made_from_a_folder_outside_any_repository(repo: Path, tmp_path: Path) -> None:
    """The offline replay clones the checkout into a folder of its own, outside any
    repository: the filter pins' look for gitlinks in that folder finds none, where git says
    "not a git repository", and the clone is made. Kills the failure check of
    git/neutralise.py's _gitlink_folders turned off."""
    outside = tmp_path / "replays"
    outside.mkdir()
    clone = outside / "clone"
    lgit.git(["clone", "--quiet", "--no-checkout", "--", str(repo), str(clone)], cwd=outside)
    head = plain(repo, "rev-parse", "HEAD").strip()
    assert plain(clone, "rev-parse", "HEAD").strip() == head


def test_a_submodule_never_checked_out_or_replaced_by_a_file_is_left_alone(repo: Path) -> None:
    """A clone made without its submodules has each submodule's folder empty, and the agent
    may put a file where a submodule's folder was: git asks nothing of either, and neither does
    loopctl's look for their config; the work is committed, the file in the submodule's place.
    Kills the `.git` looked for in a gitlink's folder emptied (the folder itself found, git
    then run in a file)."""
    head = plain(repo, "rev-parse", "HEAD").strip()
    plain(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},lib")
    plain(repo, "commit", "-q", "-m", "a submodule")
    (repo / "lib").mkdir()
    base = plain(repo, "rev-parse", "HEAD").strip()
    (repo / "README.md").write_text("changed\n")
    made = lgit.commit_all(repo, "work", author_name="Bot", author_email="bot@example.com")
    assert made is not None
    assert lgit.tree_changes(repo, base, made) == ["README.md"]
    (repo / "lib").rmdir()
    (repo / "lib").write_text("a file now\n")
    again = lgit.commit_all(repo, "file", author_name="Bot", author_email="bot@example.com")
    assert again is not None
    assert lgit.read_blob(repo, again, "lib") == "a file now\n"


def test_a_submodule_the_agent_broke_stops_no_command_that_reads_no_file(
    repo: Path, tmp_path: Path
) -> None:
    """The agent wrote a `.git` file into its submodule's folder that leads nowhere: git can
    no longer read that repository. loopctl's commands that read no file content (refs,
    branches, ancestry, remotes, untracked and ignored names, worktree bookkeeping, the clean of
    a worktree) never look into submodules, as git's own do not, so they go on; only a command
    that reads files asks the submodule and fails, as git's would. Kills each content-free
    subcommand of git/command.py dropped or renamed (then loopctl looked into every submodule
    for config to pin, and failed there)."""
    library = tmp_path / "library"
    repos.make_repo(library)
    add = ("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    plain(repo, *add)
    plain(repo, "commit", "-q", "-m", "the library")
    plain(repo, "remote", "add", "origin", str(library))
    linked = tmp_path / "linked"
    plain(repo, "worktree", "add", "-q", "--lock", "-b", "side", str(linked))
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "build.log").write_text("ignored\n")
    (repo / "lib" / ".git").write_text(f"gitdir: {tmp_path / 'gone'}\n")
    head = plain(repo, "rev-parse", "HEAD").strip()

    assert lgit.resolve_commit(repo, "main") == head
    assert lgit.toplevel(repo) == repo
    assert lgit.current_branch(repo) == "main"
    assert lgit.branch_exists(repo, "side")
    assert lgit.merge_base(repo, head, "side") == head
    assert lgit.valid_branch_name(repo, "loop/fix/main")
    assert lgit.remote_url(repo, "origin") == str(library)
    lgit.point_branch(repo, "kept", head)
    lgit.rename_branch(repo, "kept", "renamed")
    lgit.delete_branch(repo, "renamed")
    assert not lgit.branch_exists(repo, "renamed")
    assert lgit.ignored_files(repo, wanted=lambda _: True, descend=lambda _: True) == ["build.log"]
    assert [entry.path for entry in lgit.worktree_list(repo)] == [repo, linked]
    lgit.worktree_unlock(repo, linked)
    shutil.rmtree(linked)
    lgit.worktree_prune(repo)
    assert [entry.path for entry in lgit.worktree_list(repo)] == [repo]
    lgit.clean_worktree(repo, keep=[])
    assert not (repo / "build.log").exists()
    # A command that reads files asks the submodule, and fails as git's own does.
    with pytest.raises(GitError):
        lgit.git(["status"], cwd=repo)
    assert subprocess.run(["git", "status"], cwd=repo, capture_output=True).returncode != 0


@pytest.mark.parametrize("how", ["init", "clone"])
def test_a_repository_made_from_inside_a_linked_worktree_is_its_own(
    repo: Path, tmp_path: Path, how: str
) -> None:
    """`git init` and `git clone` run in a folder of a linked worktree make a new repository
    with its own working tree: loopctl's pin of a linked worktree's working tree
    (GIT_WORK_TREE) is not given to them, or git would make the new repository's working tree
    the linked worktree (init) or refuse (clone). A local clone is allowed, as the repository
    names no upload-pack program. Kills "init" and "clone" dropped from (or renamed in)
    git/command.py's _MAKES_A_REPOSITORY, and git/neutralise.py's pattern of upload-pack keys
    emptied (every key matched: the file transport refused in every repository)."""
    linked = tmp_path / "linked"
    plain(repo, "worktree", "add", "-q", "-b", "side", str(linked))
    new = linked / "made"
    if how == "init":
        lgit.git(["init", "-q", "-b", "main", str(new)], cwd=linked)
    else:
        lgit.git(["clone", "-q", "--", str(repo), str(new)], cwd=linked)
        assert (new / "README.md").read_text() == "hello\n"
    assert lgit.toplevel(new) == new
    assert plain(new, "rev-parse", "--git-dir").strip() == ".git"
    assert plain(linked, "status", "--porcelain") == "?? made/\n"


def test_objects_written_and_read_name_every_file_and_person_exactly(repo: Path) -> None:
    """The objects a data branch is made of: a tree of several files, a commit of it on a
    parent, by exactly the identity given (author and committer); files read back by commit,
    nested and non-ASCII names found (asked from a subfolder), and a folder named with or
    without its slashes. Kills git/objects.py's arguments dropped or changed (`-r`, `-z`,
    `--full-tree`, `-p`, the identity variables, the join of the tree listing, the folder
    match)."""
    (repo / "docs" / "deep").mkdir(parents=True)
    (repo / "docs" / "deep" / "guide.md").write_text("guide\n")
    (repo / "docs" / "café.md").write_text("menu\n")
    (repo / "docsets.txt").write_text("not in docs/\n")
    (repo / "assets").mkdir()
    (repo / "assets" / "logo.txt").write_text("logo\n")
    plain(repo, "add", "-A")
    plain(repo, "commit", "-q", "-m", "docs")
    head = plain(repo, "rev-parse", "HEAD").strip()
    inside = repo / "docs"
    wanted = ["docs/deep/guide.md", "docs/café.md", "README.md", "missing.md", "assets"]
    assert lgit.paths_in_commit(inside, head, wanted) == set(wanted[:3])  # files, no folder
    assert lgit.read_blob(inside, head, "docs/café.md") == "menu\n"
    asked = ["docs/", "/docs", "docs/deep", "doc", "/README.md", "gone/", "assets"]
    found = {"docs/", "/docs", "docs/deep", "/README.md", "assets"}
    assert lgit.tracked_under(repo, head, asked) == found

    files = {"STATE.md": "state\n", "INBOX.md": "inbox\n", "runs.json": "[]\n"}
    tree = lgit.write_tree(
        repo, {name: lgit.write_blob(repo, text) for name, text in files.items()}
    )
    commit = lgit.commit_tree(
        repo, tree, [head], "state\n", author_name="Bot", author_email="bot@example.com"
    )
    assert lgit.tree_of(repo, commit) == tree == lgit.tree_of_commit(repo, commit)
    for name, text in files.items():
        assert lgit.read_blob(repo, commit, name) == text
    people = plain(repo, "log", "-1", "--format=%an|%ae|%cn|%ce|%P|%s", commit).strip()
    assert people == f"Bot|bot@example.com|Bot|bot@example.com|{head}|state"


def test_tracked_paths_are_found_from_a_subfolder_as_from_the_top(repo: Path) -> None:
    """tracked_under takes repository-relative paths whichever folder of the work tree it is
    given: from a subfolder, `docs/deep` and `README.md` are still tracked and `deep` (a folder
    of docs/, not of the top) is not. Kills `--full-tree` dropped from tracked_under (the listing
    then named files relative to the subfolder: `deep/guide.md`, `../README.md`)."""
    (repo / "docs" / "deep").mkdir(parents=True)
    (repo / "docs" / "deep" / "guide.md").write_text("guide\n")
    plain(repo, "add", "-A")
    plain(repo, "commit", "-q", "-m", "docs")
    head = plain(repo, "rev-parse", "HEAD").strip()
    asked = ["docs/deep", "README.md", "deep", "docs/"]
    assert lgit.tracked_under(repo / "docs", head, asked) == {"docs/deep", "README.md", "docs/"}
    assert lgit.tracked_under(repo, head, asked) == {"docs/deep", "README.md", "docs/"}


@pytest.mark.parametrize("name", ["", "a/b", "a\tb", "a\nb", ".", ".."])
def test_a_data_tree_takes_only_plain_top_level_names(repo: Path, name: str) -> None:
    """A tree entry named `.` or `..`, or with a slash, tab or newline, would make a tree git
    refuses to check out, or break mktree's listing: refused before git sees it. Kills the
    checks of git/objects.py's write_tree turned off or changed."""
    blob = lgit.write_blob(repo, "x\n")
    with pytest.raises(ValueError, match="not a top-level file name"):
        lgit.write_tree(repo, {"ok.md": blob, name: blob})


def test_a_commit_is_made_only_of_a_tree_named_by_its_sha(repo: Path) -> None:
    """commit_tree takes a tree by its full sha, never a name git would resolve (a branch,
    `HEAD^{tree}`, an option). Kills its check turned off (git/objects.py)."""
    with pytest.raises(GitError, match="not a tree sha"):
        lgit.commit_tree(repo, "HEAD^{tree}", [], "m", author_name="B", author_email="b@x")


def test_a_filter_in_a_worktrees_nested_repository_never_runs_whatever_core_worktree_says(
    tmp_path: Path,
) -> None:
    """The agent's linked worktree holds a repository `lib` of its own (a gitlink) whose config
    names a clean filter, and its config.worktree points core.worktree at the main checkout,
    which has no `lib`. loopctl's snapshot looks for gitlinks in the worktree itself, finds
    `lib` and pins its filter; found from where core.worktree points, `lib` would be missing
    there and its filter would run in the snapshot's `git add`. Kills the working-tree pin
    dropped from the look for the repository's gitlinks (git/neutralise.py)."""
    main = tmp_path / "main"
    repos.make_repo(main)
    plain(main, "config", "extensions.worktreeConfig", "true")
    worktree = tmp_path / "wt"
    plain(main, "worktree", "add", "-q", "-b", "loop/x/t", str(worktree))
    lib, marker, program = nested_library(worktree, tmp_path)
    base = plain(worktree, "rev-parse", "HEAD").strip()
    plain(lib, "config", "filter.evil.clean", str(program))
    admin = Path(plain(worktree, "rev-parse", "--absolute-git-dir").strip())
    (admin / "config.worktree").write_text(f"[core]\n\tworktree = {main}\n")
    old = 1_600_000_000  # an mtime long before lib's index was written: git must read the file
    os.utime(lib / "data.txt", (old, old))
    (worktree / "README.md").write_text("changed\n")
    tree = lgit.snapshot_tree(worktree, base)
    assert lgit.tree_changes(worktree, base, tree) == ["README.md"]
    assert not marker.exists()
    # The trap is live: git adding in the worktree (as loopctl pins it) asks lib, which runs it.
    os.utime(lib / "data.txt", (old + 1, old + 1))
    env = {**os.environ, "GIT_WORK_TREE": str(worktree)}
    subprocess.run(["git", "add", "-A"], cwd=worktree, env=env, capture_output=True, check=False)
    assert marker.exists()


def test_a_tracked_link_to_another_checkout_is_a_file_not_a_submodule(
    repo: Path, tmp_path: Path
) -> None:
    """The repository tracks a link to a checkout elsewhere (a shared data folder) whose
    `.git` git cannot read: a link is not a gitlink, git asks nothing of what it points at, and
    loopctl's look for submodules' config skips it too; the work is committed. Kills the
    gitlink test (mode 160000) of git/neutralise.py's _gitlink_folders dropped (a hand-made
    mutant: every entry then taken for a submodule, the link followed to the checkout, whose
    config git could not list)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / ".git").write_text(f"gitdir: {tmp_path / 'moved-away'}\n")
    (repo / "data").symlink_to(shared)
    plain(repo, "add", "data")
    plain(repo, "commit", "-q", "-m", "a link to the shared data")
    base = plain(repo, "rev-parse", "HEAD").strip()
    (repo / "README.md").write_text("changed\n")
    made = lgit.commit_all(repo, "work", author_name="Bot", author_email="bot@example.com")
    assert made is not None
    assert lgit.tree_changes(repo, base, made) == ["README.md"]

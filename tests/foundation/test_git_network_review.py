"""An independent review of loopctl/git/remotes.py and refs.py by one-line mutants: each test
here kills a mutant no other test killed, by behaviour (what reached the remote, which program
ran, what a repository's planted config achieved, what a user's repository holds afterwards).

Real repositories and real git; the remote is a bare repository on disk, or a local HTTP server
where a password is asked for. Config "planted" is in the repository's own .git/config, which an
agent writes with the sandbox off (invariant 8).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import repos
from support.repos import remote_refs
from support.unauthorized import COOKIE, cookie_remote, unauthorized_remote

from loopctl import git as lgit
from loopctl.errors import ForeignWorkTree, GitError

# git for the test's own set-up, as a user runs it (planted config live).
plain = functools.partial(repos.git, plain=True)


def bare(path: Path) -> Path:
    plain(path.parent, "init", "-q", "--bare", str(path))
    return path


def head(repo: Path) -> str:
    return plain(repo, "rev-parse", "HEAD").strip()


def commit(repo: Path, message: str) -> str:
    plain(repo, "commit", "-q", "--allow-empty", "-m", message)
    return head(repo)


def recorder(path: Path, marker: Path, then: str = "") -> str:
    """A program that appends its name and whether it saw the ssh agent's socket to `marker`."""
    path.write_text(
        f'#!/bin/sh\necho "{path.name} sock=${{SSH_AUTH_SOCK:-none}}'
        f" token=${{GITHUB_TOKEN:-none}}\" >> '{marker}'\n{then}\n"
    )
    path.chmod(0o755)
    return str(path)


def lines(marker: Path) -> list[str]:
    return marker.read_text().splitlines() if marker.exists() else []


# --- where a push goes, and what goes with it -----------------------------------------------------


def test_an_empty_url_rewrite_planted_in_the_repository_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    """`url.<base>.insteadOf` with an empty value is a prefix of every URL: git prepends
    <base> to the recorded URL, and the agent made a repository at that new path. Kills the
    empty value let through by git.remotes._refuse_steering (`value and ...`; it was the
    product's own spelling until this review)."""
    origin = bare(tmp_path / "origin.git")
    trap = tmp_path / "agent"
    stolen = Path(f"{trap}{origin}")
    stolen.parent.mkdir(parents=True)
    bare(stolen)
    plain(repo, "config", f"url.{trap}.insteadOf", "")
    with pytest.raises(GitError, match="insteadOf rewrites it"):
        lgit.push_commit(repo, str(origin), head(repo), "main", expect=None)
    assert remote_refs(stolen) == {}
    assert remote_refs(origin) == {}
    # The trap is live: git as a user runs it sends the same push to the agent's repository.
    plain(repo, "push", "-q", str(origin), "HEAD:refs/heads/main")
    assert remote_refs(stolen) == {"refs/heads/main": head(repo)}


def test_a_push_publishes_no_tag_the_repository_says_to_follow(repo: Path, tmp_path: Path) -> None:
    """push.followTags planted, and an annotated release tag on the commit loopctl pushes: the
    remote must get the branch only (a tag there can start a release). Kills
    `--no-follow-tags` dropped from push_commit."""
    remote = bare(tmp_path / "remote.git")
    plain(repo, "tag", "-a", "-m", "release", "v9.9.9")
    plain(repo, "config", "push.followTags", "true")
    lgit.push_commit(repo, str(remote), head(repo), "loop/l/t", expect=None)
    assert remote_refs(remote) == {"refs/heads/loop/l/t": head(repo)}


def test_a_push_carries_no_push_option_the_repository_names(repo: Path, tmp_path: Path) -> None:
    """push.pushOption planted (on GitLab `ci.skip` skips the checks, `merge_request.*` opens
    and merges a request): the remote's own pre-receive hook sees every option that reached it.
    Kills the `push.pushOption=` reset dropped from push_commit."""
    remote = bare(tmp_path / "remote.git")
    plain(remote, "config", "receive.advertisePushOptions", "true")
    seen = tmp_path / "options.txt"
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f"#!/bin/sh\necho \"count=$GIT_PUSH_OPTION_COUNT\" >> '{seen}'\n")
    hook.chmod(0o755)
    plain(repo, "config", "push.pushOption", "ci.skip")
    lgit.push_commit(repo, str(remote), head(repo), "main", expect=None)
    assert remote_refs(remote) == {"refs/heads/main": head(repo)}
    assert seen.read_text().split() == ["count=0"]


@pytest.mark.parametrize("planted", ["both", "both-for-the-url", "saving-only", "reading-only"])
def test_a_cookie_jar_planted_in_the_repository_is_refused(
    repo: Path, tmp_path: Path, planted: str
) -> None:
    """http.cookieFile and http.saveCookies planted (for every URL, or for the remote's own), or
    saveCookies alone beside the user's own cookieFile: git, run by loopctl as the user outside
    any sandbox, would write the server's cookies over that file (here one standing for
    ~/.bashrc or another repository's config). cookieFile alone sends the agent's cookies (a
    session of its own) with the user's push. Kills either cookie key dropped from
    git.remotes._HTTP_FILES, or that rule off."""
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    with cookie_remote() as (url, seen):
        scope = f"http.{url}" if planted == "both-for-the-url" else "http"
        if planted == "saving-only":
            user = Path(os.environ["GIT_CONFIG_GLOBAL"])
            user.write_text(f"[http]\n\tcookieFile = {victim}\n")
        else:
            plain(repo, "config", f"{scope}.cookieFile", str(victim))
        if planted != "reading-only":
            plain(repo, "config", f"{scope}.saveCookies", "true")
        with pytest.raises(GitError, match="sets a file git reads cookies from and saves them"):
            lgit.remote_branch_sha(repo, url, "main")
        with pytest.raises(GitError, match="refusing to reach"):
            lgit.push_commit(repo, url, head(repo), "main", expect=None)
        assert seen == []
        assert victim.read_text() == "the user's own file\n"
        # The trap is live: git as a user runs it overwrites the file with the server's cookie.
        plain(repo, "ls-remote", url)
        assert seen
        if planted != "reading-only":
            assert COOKIE.replace("=", "\t") in victim.read_text()
            assert "the user's own file" not in victim.read_text()


def test_http_settings_in_the_repository_stop_no_push_over_another_transport(
    repo: Path, tmp_path: Path
) -> None:
    """A repository's own http.proxy or http.sslVerify (a user's setting for some https remote,
    or an agent's) changes nothing for a push over ssh or to a path, which is not refused.
    Kills the transport check dropped from _refuse_steering's http rule."""
    remote = bare(tmp_path / "remote.git")
    plain(repo, "config", "http.proxy", "http://127.0.0.1:9/")
    plain(repo, "config", "http.sslVerify", "false")
    lgit.push_commit(repo, str(remote), head(repo), "main", expect=None)
    assert remote_refs(remote) == {"refs/heads/main": head(repo)}


# --- what loopctl reads from a remote, and what a fetch leaves behind ---------------------------


def test_a_branch_sha_is_never_read_from_a_branch_ending_in_its_name(
    repo: Path, tmp_path: Path
) -> None:
    """ls-remote matches its pattern against the end of each ref, so `refs/heads/main` also
    lists someone's `refs/heads/x/refs/heads/main`, sorted first. Kills the exact-name check
    dropped from remote_branch_sha (the lease would then expect another branch's commit)."""
    remote = bare(tmp_path / "remote.git")
    older = head(repo)
    newer = commit(repo, "newer")
    plain(repo, "push", "-q", str(remote), f"{older}:refs/heads/x/refs/heads/main")
    plain(repo, "push", "-q", str(remote), f"{older}:refs/heads/x/refs/heads/task")
    plain(repo, "push", "-q", str(remote), f"{newer}:refs/heads/main")
    assert lgit.remote_branch_sha(repo, str(remote), "main") == newer
    assert lgit.remote_branch_sha(repo, str(remote), "task") is None


@pytest.mark.parametrize("call", ["fetch_refs", "fetch_branch"])
def test_a_fetch_leaves_the_users_fetch_head_alone(repo: Path, tmp_path: Path, call: str) -> None:
    """The user fetched, and will `git merge FETCH_HEAD`: loopctl's own fetch in between must
    not swap in what it fetched. Kills `--no-write-fetch-head` dropped from either fetch."""
    users, loopctls = bare(tmp_path / "users.git"), bare(tmp_path / "loopctls.git")
    plain(repo, "push", "-q", str(users), "HEAD:refs/heads/main")
    plain(repo, "push", "-q", str(loopctls), f"{commit(repo, 'other')}:refs/heads/main")
    plain(repo, "fetch", "-q", str(users), "main")
    fetch_head = repo / ".git" / "FETCH_HEAD"
    before = fetch_head.read_text()
    if call == "fetch_refs":
        lgit.fetch_refs(repo, str(loopctls), ["+refs/heads/main:refs/loopctl/fetched"])
    else:
        lgit.fetch_branch(repo, str(loopctls), "main", "refs/loopctl/fetched")
    assert fetch_head.read_text() == before


def test_a_fetch_follows_a_branch_that_was_rewritten(repo: Path, tmp_path: Path) -> None:
    """`loopctl state pull` fetches the state branch into the same private ref each time; a
    person who rewrote that branch on the remote (a force-push) must not make every later pull
    fail. Kills the `+` (force) dropped from fetch_branch's refspec."""
    remote = bare(tmp_path / "remote.git")
    first = commit(repo, "state, first")
    plain(repo, "push", "-q", str(remote), f"{first}:refs/heads/loopctl-state")
    assert lgit.fetch_branch(repo, str(remote), "loopctl-state", "refs/loopctl/f") == first
    plain(repo, "checkout", "-q", "--orphan", "rewritten")
    rewritten = commit(repo, "state, rewritten with no common history")
    plain(repo, "push", "-q", "--force", str(remote), f"{rewritten}:refs/heads/loopctl-state")
    assert lgit.fetch_branch(repo, str(remote), "loopctl-state", "refs/loopctl/f") == rewritten


def test_a_remotes_url_is_read_without_its_password(repo: Path) -> None:
    """`loopctl export` writes origin's URL into files meant to be shared (a Kubernetes
    manifest, a pin): a token kept in that URL stays out. Kills the user:password part kept by
    remote_url."""
    plain(repo, "remote", "add", "origin", "https://someone:ghp-token-4711@example.com/p.git")
    assert lgit.remote_url(repo, "origin") == "https://example.com/p.git"


# --- the user's own programs, as the user named them ----------------------------------------------


def test_a_git_protocol_proxy_gets_no_ssh_agent(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git:// is no ssh, however its URL reads (`git:` then `//`, not an scp-like host:path):
    the user's own proxy program for it gets neither the ssh agent's socket nor a token. Kills
    the `(?!//)` dropped from git.remotes._SCP_LIKE."""
    marker = tmp_path / "ran.txt"
    proxy = recorder(tmp_path / "proxy", marker, "exit 1")
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text(f"[core]\n\tgitProxy = {proxy}\n")
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    monkeypatch.setenv("GITHUB_TOKEN", "not-for-git-protocol")
    with pytest.raises(GitError):
        lgit.remote_branch_sha(repo, "git://127.0.0.1:1/project.git", "main")
    assert lines(marker) == ["proxy sock=none token=none"]


def test_the_users_git_ssh_in_a_folder_with_a_space_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIT_SSH names a program, not a command line (git never splits it): loopctl passes it on
    as GIT_SSH_COMMAND, so it must quote it. Kills shlex.quote dropped from
    git.remotes._user_ssh_command (the shell would run `/…/my` with `tools/ssh` as argument)."""
    marker = tmp_path / "ran.txt"
    folder = tmp_path / "my tools"
    folder.mkdir()
    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    monkeypatch.setenv("GIT_SSH", recorder(folder / "ssh", marker, "exit 1"))
    monkeypatch.setenv("GIT_SSH_VARIANT", "ssh")  # no `-G` probe: one call
    with pytest.raises(GitError):
        lgit.remote_branch_sha(repo, "ssh://127.0.0.1:1/project.git", "main")
    assert [line.split()[0] for line in lines(marker)] == ["ssh"]


@pytest.fixture
def http_url() -> Iterator[str]:
    with unauthorized_remote() as (url, _):
        yield url


def test_the_users_askpass_named_from_home_runs(
    repo: Path, tmp_path: Path, http_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """core.askPass is a path git expands (`~/bin/askpass`); loopctl moves it into GIT_ASKPASS,
    which git runs as it is, so loopctl expands it. Kills expanduser dropped from
    git.remotes._user_askpass."""
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "ran.txt"
    recorder(home / "askpass", marker, "echo secret")
    monkeypatch.setenv("HOME", str(home))
    for name in ("GIT_ASKPASS", "SSH_ASKPASS"):
        monkeypatch.delenv(name, raising=False)
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text("[core]\n\taskPass = ~/askpass\n")
    with pytest.raises(GitError):
        lgit.remote_branch_sha(repo, http_url, "main")
    # Asked for a username, then a password.
    assert [line.split()[0] for line in lines(marker)] == ["askpass", "askpass"]


# --- refs: a name reads the branch it names, and nothing an agent planted moves another ---------


def test_a_branch_head_is_the_branch_never_a_tag_of_that_name(repo: Path) -> None:
    """An agent tags an old commit with the task branch's very name: git resolves a bare name
    to the tag first. Kills `refs/heads/` dropped from branch_head."""
    old = head(repo)
    plain(repo, "branch", "loop/l/t", commit(repo, "the task's work"))
    plain(repo, "tag", "loop/l/t", old)
    assert lgit.branch_head(repo, "loop/l/t") == head(repo)
    plain(repo, "tag", "gone", old)
    assert lgit.branch_head(repo, "gone") is None


@pytest.mark.parametrize("call", ["hold", "release"])
def test_holding_an_object_never_moves_a_branch_through_a_planted_link(
    repo: Path, call: str
) -> None:
    """The agent made loopctl's hold ref a symbolic ref to main: holding an object must not
    point main at it, nor releasing delete main. Kills `--no-deref` dropped from hold_object
    or release_object."""
    main = head(repo)
    blob = plain(repo, "hash-object", "-w", "README.md").strip()
    plain(repo, "symbolic-ref", "refs/loopctl/held/item", "refs/heads/main")
    if call == "hold":
        lgit.hold_object(repo, "item", blob)
    else:
        lgit.release_object(repo, "item")
    assert lgit.branch_head(repo, "main") == main


def test_refs_read_in_a_sha256_repository(tmp_path: Path) -> None:
    """A repository made with `--object-format=sha256` names commits with 64 hex digits.
    Kills the 64-digit form dropped from git.refs._FULL_SHA (every ref would be unknown)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    plain(repo, "init", "-q", "-b", "main", "--object-format=sha256")
    sha = commit(repo, "first")
    assert len(sha) == 64
    assert lgit.resolve_commit(repo, "main") == sha
    assert lgit.branch_head(repo, "main") == sha


def test_a_forced_branch_delete_removes_unmerged_work(repo: Path) -> None:
    """A loop's branch whose commits are in no other branch (the checkout is elsewhere) is
    still deleted when asked with force. Kills `-D` changed to `-d` in delete_branch."""
    plain(repo, "checkout", "-q", "-b", "loop/l/t")
    commit(repo, "work on no other branch")
    plain(repo, "checkout", "-q", "main")
    lgit.delete_branch(repo, "loop/l/t")
    assert not lgit.branch_exists(repo, "loop/l/t")


def test_a_head_linked_outside_the_branches_is_no_current_branch(repo: Path) -> None:
    """HEAD made a symbolic ref to a remote-tracking ref (an agent can write HEAD): that is
    no branch to deliver to or reattach, so current_branch says None. Kills the refs/heads/
    check dropped from current_branch (it would name `refs/remotes/origin/main`)."""
    plain(repo, "update-ref", "refs/remotes/origin/main", head(repo))
    plain(repo, "symbolic-ref", "HEAD", "refs/remotes/origin/main")
    assert lgit.current_branch(repo) is None


def test_the_common_git_dir_is_absolute_whatever_folder_loopctl_runs_in(repo: Path) -> None:
    """git names a main checkout's git dir relative to where it ran (`.git`); loopctl runs in
    another folder, where that relative name is some other place. Kills
    `--path-format=absolute` dropped from common_dir."""
    assert Path.cwd() != repo
    assert lgit.common_dir(repo) == repo / ".git"


def test_a_worktree_reached_through_a_symlink_is_still_its_own(repo: Path, tmp_path: Path) -> None:
    """The worktree folder is named through a symbolic link (macOS's /tmp is one): git reports
    the resolved path, and the worktree is still the one git works in. Kills the realpath
    comparison in require_work_tree changed to a plain one (loopctl would refuse its own)."""
    link = tmp_path / "link"
    link.symlink_to(repo)
    lgit.require_work_tree(link, "snapshot")
    # A folder inside it is not: the comparison still tells them apart.
    (repo / "sub").mkdir()
    with pytest.raises(ForeignWorkTree):
        lgit.require_work_tree(link / "sub", "snapshot")


def test_a_git_dir_is_not_a_working_tree(repo: Path) -> None:
    """Inside `.git` git answers `false` (successfully) to "inside a working tree?". Kills the
    answer's check dropped from is_git_repo (a git dir would pass for a checkout)."""
    assert lgit.is_git_repo(repo)
    assert not lgit.is_git_repo(repo / ".git")

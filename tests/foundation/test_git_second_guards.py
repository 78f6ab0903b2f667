"""Second guards in loopctl's git (issue 27, item 1): each holds alone.

loopctl's git has two guards against several planted tricks, so dropping one of them fails no
test that leaves the other in place. Here the first is switched off in the test (said in each
test) and the behaviour is checked: a program planted in the repository's config never runs
(it would leave a marker file), what loopctl reads is the real history, and a URL that begins
with `-` is never an option. Each test names the one-line mutant of loopctl/git/ it kills.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.repos import git as plain

from loopctl import git as lgit
from loopctl.errors import GitError
from loopctl.git import remotes as git_remotes
from loopctl.git import runner as git_runner


def recorder(folder: Path, marker: Path, exit_code: int = 1) -> Path:
    """A program that appends its arguments to `marker`: proof that it ran."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "planted.sh"
    program.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\nexit {exit_code}\n')
    program.chmod(0o755)
    return program


def commit(repo: Path, message: str) -> str:
    plain(repo, "commit", "-q", "--allow-empty", "-m", message)
    return plain(repo, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("pin", ["GIT_SSH_COMMAND", "GIT_NO_LAZY_FETCH"])
def test_a_planted_ssh_command_never_runs_from_a_local_command(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pin: str
) -> None:
    """A partial clone whose promisor remote is reached over ssh, with `core.sshCommand`
    planted: reading a missing blob would fetch it lazily through that program. Either pin
    alone (the other removed here) keeps it from running. Kills `GIT_SSH_COMMAND` (or
    `GIT_NO_LAZY_FETCH`) dropped from git.runner._PINNED_ENV."""
    marker = tmp_path / "ran"
    (repo / "f.txt").write_text("content\n")
    plain(repo, "add", "f.txt")
    head = commit(repo, "a blob to lose")
    blob = plain(repo, "rev-parse", "HEAD:f.txt").strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    for key, value in {
        "core.repositoryformatversion": "1",
        "extensions.partialClone": "origin",
        "remote.origin.promisor": "true",
        "remote.origin.url": "ssh://127.0.0.1:1/project.git",
        "core.sshCommand": str(recorder(tmp_path, marker)),
    }.items():
        plain(repo, "config", key, value)
    other = "GIT_NO_LAZY_FETCH" if pin == "GIT_SSH_COMMAND" else "GIT_SSH_COMMAND"
    # The first guard off: `pin` stands alone (`raising=False`: a mutant may lack it already).
    monkeypatch.delitem(git_runner._PINNED_ENV, other, raising=False)

    assert lgit.read_blob(repo, head, "f.txt") is None
    assert not marker.exists(), marker.read_text()


def test_a_planted_graft_does_not_change_the_history_loopctl_reads(repo: Path) -> None:
    """`.git/info/grafts` (which an agent can write) gives a commit another parent. Kills
    `GIT_GRAFT_FILE` dropped from git.runner._PINNED_ENV (replace refs have their own pin and test:
    tests/reliability/test_git_steering.py)."""
    base = plain(repo, "rev-parse", "HEAD").strip()
    work = commit(repo, "the task's work")
    plain(repo, "checkout", "-q", "--orphan", "elsewhere")
    stranger = commit(repo, "unrelated")
    plain(repo, "checkout", "-q", "main")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "grafts").write_text(f"{work} {stranger}\n")
    # Plain git now believes the work does not descend from the base at all.
    assert plain(repo, "rev-list", "--count", work).strip() == "2"

    assert lgit.is_ancestor(repo, base, work)
    assert not lgit.is_ancestor(repo, stranger, work)
    assert lgit.merge_base(repo, base, work) == base


@pytest.fixture
def options_as_url(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`origin` whose configured URL is an option naming a program; returns its marker."""
    marker = tmp_path / "ran"
    program = recorder(tmp_path, marker)
    # Should the URL be taken as an option, the refspec becomes the repository: a push's
    # scp-like `sha:refs/...` is reached over ssh, and the user's own ssh command (a recorder
    # here, so nothing leaves the machine) would be handed the planted program to run.
    monkeypatch.setenv("GIT_SSH_COMMAND", str(recorder(tmp_path / "user", marker)))
    plain(repo, "config", "remote.origin.url", f"--upload-pack={program}")
    plain(repo, "config", "remote.origin.pushurl", f"--receive-pack={program}")
    return marker


def test_a_url_that_begins_with_a_dash_is_never_an_option(repo: Path, options_as_url: Path) -> None:
    """Kills `--` dropped before the URL in ls-remote, fetch (both) or push: each command
    refuses the odd path; no program the URL names runs."""
    head = plain(repo, "rev-parse", "HEAD").strip()
    with pytest.raises(GitError):
        lgit.remote_branch_sha(repo, "origin", "main")
    with pytest.raises(GitError):
        lgit.fetch_refs(repo, "origin", ["+refs/heads/main:refs/loopctl/fetched"])
    with pytest.raises(GitError):
        lgit.fetch_branch(repo, "origin", "main", "refs/loopctl/branch")
    with pytest.raises(GitError):
        lgit.push_commit(repo, "origin", head, "main", expect=None)
    assert not options_as_url.exists(), options_as_url.read_text()


def test_a_planted_receive_pack_for_the_url_never_runs(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remote section named after the push URL names its own receive-pack program. The
    first guard (refusing such a section, git.remotes._refuse_steering) is off here: the push still
    runs git's own receive-pack and lands. Kills `--receive-pack=git-receive-pack` dropped."""
    remote = tmp_path / "remote.git"
    plain(tmp_path, "init", "-q", "--bare", str(remote))
    url = remote.as_uri()  # git reads no remote section named after a path beginning with /
    marker = tmp_path / "ran"
    plain(repo, "config", f"remote.{url}.receivepack", str(recorder(tmp_path, marker)))
    monkeypatch.setattr(git_remotes, "_refuse_steering", lambda *args: None)
    head = plain(repo, "rev-parse", "HEAD").strip()

    lgit.push_commit(repo, url, head, "main", expect=None)

    assert not marker.exists(), marker.read_text()
    assert plain(remote, "rev-parse", "refs/heads/main").strip() == head


def test_git_speaks_english_to_loopctl_whatever_the_users_language(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills `LC_ALL=C` dropped from git's environment (or its name or value changed): with the
    user's LANGUAGE=de, git answers in German, and loopctl, which reads some of git's words
    (a bare repository's "must be run in a work tree"), would fail a plain read of a bare
    repository (a remote) instead of reading it. Git's own messages stay English too."""
    bare = tmp_path / "remote.git"
    plain(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("LANGUAGE", "de")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    head = plain(repo, "rev-parse", "HEAD").strip()
    assert lgit.git(["log", "-1", "--format=%H"], cwd=bare).stdout.strip() == head
    with pytest.raises(GitError) as failed:
        lgit.git(["log", "-1", "--format=%H", "no-such-branch"], cwd=bare)
    assert "unknown revision" in str(failed.value), failed.value


def test_an_argument_with_a_nul_byte_is_a_git_error_not_a_crash(repo: Path) -> None:
    """Kills the NUL check of every hardened command turned off: text from outside (a task's
    name, a path) with a NUL byte is refused as a GitError, which the CLI reports in one line
    with its exit code, never as a ValueError from deep in subprocess (a traceback)."""
    for args in (["log", "-1", "a\0b"], ["rev-parse", "--verify", "x\0"]):
        with pytest.raises(GitError, match="NUL byte"):
            lgit.git(args, cwd=repo, check=False)


def test_a_branch_name_with_a_nul_byte_is_simply_not_valid(repo: Path) -> None:
    """Kills valid_branch_name's own NUL check dropped: a name with a NUL byte (from a task's
    title) is an invalid name, answered False like any other, not a GitError raised from the
    command's guard."""
    assert lgit.valid_branch_name(repo, "loop/ok")
    assert not lgit.valid_branch_name(repo, "loop/a\0b")


def test_a_repository_naming_its_remotes_upload_pack_still_works_locally(repo: Path) -> None:
    """A user's own `remote.origin.uploadpack` (a server with git installed off PATH) makes
    loopctl refuse git's file transport (protocol.file.allow=never, against a planted one), and
    nothing else: reading history and the working tree works as before. Kills that pin's key
    emptied, which makes every content command fail ("empty config key")."""
    plain(repo, "config", "remote.origin.uploadpack", "/opt/git/bin/git-upload-pack")
    head = plain(repo, "rev-parse", "HEAD").strip()
    (repo / "new.txt").write_text("new\n")
    assert lgit.git(["log", "-1", "--format=%H"], cwd=repo).stdout.strip() == head
    status = lgit.git(["status", "--porcelain", "--untracked-files=all"], cwd=repo).stdout
    assert "?? new.txt" in status


def test_git_variables_of_loopctls_caller_never_steer_its_git(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """loopctl started from a git hook (git sets GIT_DIR and GIT_INDEX_FILE there) or a shell
    that exports GIT_DIR: its git still works on the repository it names by folder, never the
    one the variable points at. Kills the GIT_ prefix changed in the filter of git's
    environment."""
    other = tmp_path / "other"
    plain(tmp_path, "init", "-q", str(other))
    plain(other, "commit", "-q", "--allow-empty", "-m", "other")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    head = plain(repo, "--git-dir", str(repo / ".git"), "rev-parse", "HEAD").strip()
    assert lgit.git(["rev-parse", "HEAD"], cwd=repo).stdout.strip() == head


def test_git_still_reads_the_users_own_global_config(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only git's own variables and secrets are left out of git's environment: HOME stays, so
    the user's ~/.gitconfig (their credential helper, their proxy, their identity) still
    applies. Kills the filter emptied (every variable but two dropped)."""
    home = tmp_path / "home-with-config"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Ada From Home\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")
    name = lgit.git(["config", "user.name"], cwd=repo, check=False).stdout.strip()
    assert name == "Ada From Home"

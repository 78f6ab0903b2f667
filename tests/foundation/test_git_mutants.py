"""loopctl's git against hostile repositories: each test kills one-line mutants of loopctl/git/.

Every guard in loopctl/git/ is a word in an argument list, an entry in a constant table or an
environment pin, and dropping any one of them must fail a test. Each test here plants one trick in
a real repository (a program named in its config, a signed commit, an attribute, a remote
section), runs loopctl's own call, and checks behaviour: the planted program never ran (it would
leave a marker file), and what reached the remote is what loopctl meant to send. Where
loopctl/git/ has two guards against one trick, the test switches the first off (said in the test)
so that the second is seen to hold alone. Repositories live under /tmp and outside it (`place`).

Each test names the mutants it kills (issue 27: hand-made one-line mutants, a flag dropped from an
argument list, an entry from a constant table, a pin from the environment, a guard turned off).
"""

from __future__ import annotations

import functools
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import repos
from support.outside_tmp import Place
from support.repos import remote_refs
from support.unauthorized import unauthorized_remote

from loopctl import git as lgit
from loopctl.errors import GitError
from loopctl.git import command as git_command
from loopctl.git import neutralise as git_neutralise
from loopctl.git import remotes as git_remotes
from loopctl.git import runner as git_runner
from loopctl.git import worktrees as git_worktrees

# git for the test's own set-up, as a user runs it (planted traps live).
plain = functools.partial(repos.git, plain=True)


@dataclass(frozen=True)
class Scene:
    """A repository with one commit, a folder for planted programs, and their marker file."""

    repo: Path
    tools: Path
    marker: Path

    def program(self, name: str, exit_code: int = 1, then: str = "") -> str:
        """A program that records its name and arguments in the marker: proof that it ran."""
        path = self.tools / name
        path.write_text(
            f"#!/bin/sh\necho \"{name} $*\" >> '{self.marker}'\n{then}\nexit {exit_code}\n"
        )
        path.chmod(0o755)
        return str(path)

    def ran(self) -> list[str]:
        return self.marker.read_text().splitlines() if self.marker.exists() else []

    def head(self) -> str:
        return plain(self.repo, "rev-parse", "HEAD").strip()

    def commit(self, message: str, **files: str) -> str:
        for name, text in files.items():
            (self.repo / name).write_text(text)
        plain(self.repo, "add", "-A")
        plain(self.repo, "commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def config(self, **pairs: str) -> None:
        """Plant config in the repository's own .git/config (what an agent can write)."""
        for key, value in pairs.items():
            plain(self.repo, "config", key.replace("__", "."), value)

    def bare(self, name: str) -> Path:
        path = self.repo.parent / name
        plain(self.repo.parent, "init", "-q", "--bare", str(path))
        return path


@pytest.fixture
def scene(place: Place) -> Scene:
    repo = place.base / "repo"
    repos.make_repo(repo)
    tools = place.base / "tools"
    tools.mkdir()
    # An identity in the repository's config, as a user has one: signing needs a committer.
    plain(repo, "config", "user.name", "Someone")
    plain(repo, "config", "user.email", "someone@example.com")
    return Scene(repo, tools, place.base / "ran.txt")


def signed_commit(scene: Scene, message: str) -> str:
    """A child of HEAD carrying a (fake) PGP signature: verifying or showing it runs gpg."""
    tree = plain(scene.repo, "rev-parse", "HEAD^{tree}").strip()
    body = (
        f"tree {tree}\nparent {scene.head()}\n"
        "author A <a@example.com> 0 +0000\ncommitter A <a@example.com> 0 +0000\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n fake\n -----END PGP SIGNATURE-----\n"
        f"\n{message}\n"
    )
    done = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=scene.repo,
        input=body,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


# --- signing and signature checks: gpg.program never runs ---------------------------------------


def test_a_commit_made_through_git_signs_nothing(scene: Scene) -> None:
    """`loopctl demo` commits through `git.git` with no --no-gpg-sign of its own. Kills
    `"-c", "commit.gpgSign=false"` dropped from git.runner._HARDENING."""
    scene.config(commit__gpgSign="true", gpg__program=scene.program("gpg"))
    lgit.git(["commit", "-q", "--allow-empty", "-m", "work"], cwd=scene.repo)
    assert scene.ran() == []
    assert plain(scene.repo, "log", "-1", "--format=%s").strip() == "work"


@pytest.mark.parametrize("mutant", ["--no-gpg-sign in commit_all", "in commit_tree", "snapshot"])
def test_loopctls_own_commits_sign_nothing_with_the_config_pin_off(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, mutant: str
) -> None:
    """commit.gpgSign=false is off here: each commit loopctl makes still signs nothing. Kills
    `--no-gpg-sign` dropped in commit_all. commit_tree and commit_snapshot run `git commit-tree`,
    which reads no commit.gpgSign: dropping their flag is listed in bench/mutation.py's
    EQUIVALENT, and these two cases hold that reasoning to a real signing config."""
    monkeypatch.setattr(
        git_runner, "_HARDENING", _without(git_runner._HARDENING, "commit.gpgSign=false")
    )
    scene.config(commit__gpgSign="true", gpg__program=scene.program("gpg"))
    base = scene.head()
    if mutant.endswith("commit_all"):
        (scene.repo / "work.txt").write_text("work\n")
        made = lgit.commit_all(scene.repo, "work", author_name="Bot", author_email="b@x")
    elif mutant == "in commit_tree":
        tree = lgit.write_tree(scene.repo, {"f": lgit.write_blob(scene.repo, "x\n")})
        made = lgit.commit_tree(
            scene.repo, tree, [base], "data", author_name="Bot", author_email="b@x"
        )
    else:
        tree = lgit.tree_of(scene.repo, base)
        made = lgit.commit_snapshot(
            scene.repo,
            "loop/l/t",
            tree,
            base,
            "snapshot",
            author_name="Bot",
            author_email="b@x",
            date="1700000000 +0000",
            expect=None,
        )
    assert scene.ran() == []
    assert made
    assert "gpgsig" not in plain(scene.repo, "cat-file", "commit", made)


def _without(hardening: tuple[str, ...], entry: str) -> tuple[str, ...]:
    """git.runner._HARDENING without one `-c entry` pair."""
    at = hardening.index(entry)
    return hardening[: at - 1] + hardening[at + 1 :]


def test_an_annotated_tag_made_through_git_signs_nothing(scene: Scene) -> None:
    """Kills `"-c", "tag.gpgSign=false"` dropped from git.runner._HARDENING."""
    scene.config(tag__gpgSign="true", gpg__program=scene.program("gpg"))
    lgit.git(["tag", "-a", "-m", "release", "v1"], cwd=scene.repo)
    assert scene.ran() == []
    assert "gpgsig" not in plain(scene.repo, "cat-file", "tag", "v1")


def test_showing_a_signed_commit_verifies_nothing(scene: Scene) -> None:
    """`loopctl demo` shows the fixed commit with `git show --stat`. Kills
    `"-c", "log.showSignature=false"` dropped from git.runner._HARDENING."""
    sha = signed_commit(scene, "signed work")
    scene.config(log__showSignature="true", gpg__program=scene.program("gpg"))
    shown = lgit.git(["show", "--stat", "--format=%s", sha], cwd=scene.repo).stdout
    assert shown.startswith("signed work")
    assert scene.ran() == []


def test_a_fast_forward_to_a_signed_commit_verifies_nothing(scene: Scene) -> None:
    """fast_forward moves a checked-out branch with `merge --ff-only`. Kills
    `"-c", "merge.verifySignatures=false"` dropped from git.runner._HARDENING."""
    sha = signed_commit(scene, "signed work")
    scene.config(merge__verifySignatures="true", gpg__program=scene.program("gpg"))
    assert lgit.fast_forward(scene.repo, "main", sha)
    assert scene.ran() == []
    assert scene.head() == sha


def test_a_push_signs_no_certificate(scene: Scene) -> None:
    """The remote asks for signed pushes (receive.certNonceSeed) and the repository's config
    signs them with its own program. Kills `"-c", "push.gpgSign=false"` dropped."""
    remote = scene.bare("remote.git")
    plain(remote, "config", "receive.certNonceSeed", "nonce-seed")
    scene.config(push__gpgSign="true", gpg__program=scene.program("gpg"))
    lgit.push_commit(scene.repo, str(remote), scene.head(), "main", expect=None)
    assert scene.ran() == []
    assert remote_refs(remote) == {"refs/heads/main": scene.head()}


# --- transports and remote programs -------------------------------------------------------------


def test_a_remote_repointed_to_the_ext_transport_runs_nothing(scene: Scene) -> None:
    """origin repointed to an `ext::` URL (a command line), with every protocol allowed by the
    repository's config. Kills `"-c", "protocol.ext.allow=never"` dropped."""
    scene.config(
        protocol__allow="always",
        remote__origin__url=f"ext::{scene.program('ext')} %S",
    )
    with pytest.raises(GitError):
        lgit.remote_branch_sha(scene.repo, "origin", "main")
    with pytest.raises(GitError):
        lgit.fetch_branch(scene.repo, "origin", "main", "refs/loopctl/fetched")
    assert scene.ran() == []


@pytest.mark.parametrize("call", ["remote_branch_sha", "fetch_refs", "fetch_branch"])
def test_a_planted_upload_pack_for_the_url_never_runs(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """A remote section named after the URL names its own upload-pack program. The first
    guard (refusing such a section) is off here: each read still runs git's own upload-pack.
    Kills `_UPLOAD_PACK` dropped from ls-remote, fetch_refs' fetch or fetch_branch's fetch."""
    remote = scene.bare("remote.git")
    plain(scene.repo, "push", "-q", str(remote), "HEAD:refs/heads/main")
    url = remote.as_uri()  # git reads no remote section named after a path beginning with /
    plain(scene.repo, "config", f"remote.{url}.uploadpack", scene.program("upload"))
    monkeypatch.setattr(git_remotes, "_refuse_steering", lambda *args: None)
    if call == "remote_branch_sha":
        assert lgit.remote_branch_sha(scene.repo, url, "main") == scene.head()
    elif call == "fetch_refs":
        lgit.fetch_refs(scene.repo, url, ["+refs/heads/main:refs/loopctl/fetched"])
        assert lgit.resolve_commit(scene.repo, "refs/loopctl/fetched") == scene.head()
    else:
        assert lgit.fetch_branch(scene.repo, url, "main", "refs/loopctl/b") == scene.head()
    assert scene.ran() == []


def test_a_push_never_replaces_a_branch_it_did_not_expect(scene: Scene) -> None:
    """Someone pushed the branch (an ancestor of loopctl's commit) after loopctl looked and saw
    none: a plain push would fast-forward over it, the lease refuses. Kills the lease dropped
    from push_commit's argument list, or its expected value."""
    remote = scene.bare("remote.git")
    theirs = scene.head()
    plain(scene.repo, "push", "-q", str(remote), f"{theirs}:refs/heads/task")
    ours = scene.commit("loopctl's work", work="work\n")
    with pytest.raises(GitError, match=r"stale info|fetch first|rejected"):
        lgit.push_commit(scene.repo, str(remote), ours, "task", expect=None)
    assert remote_refs(remote) == {"refs/heads/task": theirs}
    # Expecting what is there, the same push lands.
    lgit.push_commit(scene.repo, str(remote), ours, "task", expect=theirs)
    assert remote_refs(remote) == {"refs/heads/task": ours}


# --- content programs the repository names ------------------------------------------------------


def test_a_filter_in_the_worktrees_own_config_never_runs(scene: Scene, place: Place) -> None:
    """`config.worktree` in a linked worktree's admin folder (read once extensions.worktreeConfig
    is on) is as writable by the agent as .git/config. Kills "worktree" dropped from
    git.neutralise._PLANTABLE_SCOPES."""
    worktree = place.base / "wt"
    lgit.worktree_add(scene.repo, worktree, "loop/l/t", scene.head())
    plain(scene.repo, "config", "extensions.worktreeConfig", "true")
    clean = scene.program("clean", exit_code=0, then="cat")
    plain(worktree, "config", "--worktree", "filter.evil.clean", clean)
    (worktree / ".gitattributes").write_text("*.txt filter=evil\n")
    (worktree / "work.txt").write_text("work\n")
    assert lgit.changed_paths(worktree, scene.head()) == [".gitattributes", "work.txt"]
    assert lgit.commit_all(worktree, "work", author_name="Bot", author_email="b@x")
    assert scene.ran() == []
    # The trap is live: plain git runs it.
    (worktree / "more.txt").write_text("more\n")
    plain(worktree, "add", "more.txt")
    assert scene.ran()


def test_a_long_running_filter_process_never_runs(scene: Scene) -> None:
    """`filter.<driver>.process` (git's long-running filter protocol) runs like clean and
    smudge. Kills `process` dropped from git.neutralise._DRIVER_KEY."""
    scene.config(filter__evil__process=scene.program("process"))
    (scene.repo / ".gitattributes").write_text("*.txt filter=evil\n")
    (scene.repo / "work.txt").write_text("work\n")
    assert lgit.commit_all(scene.repo, "work", author_name="Bot", author_email="b@x")
    assert scene.ran() == []


def test_a_merge_through_git_runs_no_planted_merge_driver(scene: Scene) -> None:
    """Kills `merge.<driver>.driver` dropped from git.neutralise._DRIVER_KEY (no other guard:
    --no-ext-diff and --no-textconv are diff options)."""
    base = scene.commit("attributes", **{".gitattributes": "*.txt merge=evil\n", "f.txt": "a\n"})
    plain(scene.repo, "checkout", "-q", "-b", "other")
    scene.commit("theirs", **{"f.txt": "theirs\n"})
    plain(scene.repo, "checkout", "-q", "main")
    scene.commit("ours", **{"f.txt": "ours\n"})
    scene.config(merge__evil__driver=scene.program("driver", exit_code=0))
    assert base
    lgit.git(["merge", "--no-edit", "-q", "other"], cwd=scene.repo, check=False)
    assert scene.ran() == []


@pytest.mark.parametrize(
    ("key", "command"),
    [("diff.evil.textconv", "show"), ("diff.evil.command", "diff"), ("diff.external", "diff")],
)
def test_a_diff_through_git_runs_no_planted_diff_program(
    scene: Scene, key: str, command: str
) -> None:
    """`git.git` runs any command, and a plain `git show` or `git diff` passes no --no-textconv
    or --no-ext-diff of its own: the blanked program fails the command loudly (check=False
    here) instead of running. Kills textconv, command or `diff.external` dropped from
    git.neutralise._DRIVER_KEY."""
    base = scene.commit("attributes", **{".gitattributes": "*.txt diff=evil\n", "f.txt": "a\n"})
    sha = scene.commit("change", **{"f.txt": "b\n"})
    plain(scene.repo, "config", key, scene.program("differ", exit_code=0, then='cat "$1"'))
    argv = ["show", sha] if command == "show" else ["diff", base, sha]
    lgit.git(argv, cwd=scene.repo, check=False)
    assert scene.ran() == []
    plain(scene.repo, *argv)  # the trap is live: plain git runs the program
    assert scene.ran()


@pytest.mark.parametrize("option", ["--no-ext-diff", "--no-textconv"])
def test_diffs_run_no_diff_program_with_the_config_pins_off(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, option: str
) -> None:
    """The first guard (blanking the repository's diff programs,
    git.neutralise._filter_neutralisers) is off here: git.diff._SAFE_DIFF's options alone keep
    them from running in every diff loopctl makes. Kills `--no-ext-diff` or `--no-textconv`
    dropped from git.diff._SAFE_DIFF."""
    monkeypatch.setattr(git_command, "_filter_neutralisers", lambda cwd, index=None: {})
    base = scene.commit("attributes", **{".gitattributes": "*.txt diff=evil\n", "f.txt": "a\n"})
    program = scene.program("differ", exit_code=0, then='cat "$1"')
    if option == "--no-ext-diff":
        scene.config(diff__external=program)
    else:
        scene.config(diff__evil__textconv=program)
    (scene.repo / "f.txt").write_text("b\n")
    assert "+b" in lgit.diff_text(scene.repo, base, 10_000)
    assert "f.txt" in lgit.diff_stat(scene.repo, base)
    sha = lgit.commit_all(scene.repo, "work", author_name="Bot", author_email="b@x")
    assert sha
    assert "f.txt" in lgit.diff_stat_between(scene.repo, base, sha)
    assert b"+b" in lgit.patch_between(scene.repo, base, sha)
    assert scene.ran() == []


def test_a_diff_shows_no_colour_the_repository_asks_for(scene: Scene) -> None:
    """color.diff=always in the repository's config beats color.ui: escape codes would reach
    the approver's diff and the prompt. Kills `--no-color` dropped from git.diff._SAFE_DIFF."""
    base = scene.head()
    scene.config(color__diff="always", color__ui="always")
    (scene.repo / "README.md").write_text("changed\n")
    for shown in (
        lgit.diff_text(scene.repo, base, 10_000),
        lgit.diff_stat(scene.repo, base),
    ):
        assert "changed" in shown or "README.md" in shown
        assert "\x1b" not in shown


# --- partial clones: a missing object is never fetched through what config names --------------


@pytest.fixture
def http_url() -> Iterator[str]:
    with unauthorized_remote() as (url, _):
        yield url


def lose_a_blob(scene: Scene, promisor: str, *, commit: bool = True) -> str:
    """Make the repository a partial clone of `promisor` missing one blob (committed first, as
    f.txt, unless `commit` is False); returns HEAD (reading the blob fetches it lazily)."""
    head = scene.commit("a blob to lose", **{"f.txt": "content\n"}) if commit else scene.head()
    blob = plain(scene.repo, "rev-parse", "HEAD:f.txt").strip()
    (scene.repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    scene.config(
        core__repositoryformatversion="1",
        extensions__partialClone="origin",
        remote__origin__promisor="true",
        remote__origin__url=promisor,
    )
    return head


@pytest.mark.parametrize("pin", ["GIT_ASKPASS", "credential.helper=", "GIT_PROXY_COMMAND"])
def test_a_lazy_fetch_runs_no_program_the_config_names(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, http_url: str, pin: str
) -> None:
    """GIT_NO_LAZY_FETCH (the first guard) is off here: reading a missing blob of a partial
    clone goes to its promisor, over http (which asks the credential helpers, then core.askPass,
    for a password) or git:// (which runs core.gitProxy). Kills GIT_ASKPASS or GIT_PROXY_COMMAND
    dropped from git.runner._PINNED_ENV, or git.runner._LOCAL_ONLY's empty credential.helper
    dropped."""
    monkeypatch.delitem(git_runner._PINNED_ENV, "GIT_NO_LAZY_FETCH")
    if pin == "GIT_ASKPASS":
        head = lose_a_blob(scene, http_url)
        scene.config(core__askPass=scene.program("askpass", exit_code=0, then="echo x"))
    elif pin == "credential.helper=":
        head = lose_a_blob(scene, http_url)
        helper = scene.program("helper", exit_code=0, then="echo username=u; echo password=p")
        scene.config(credential__helper=helper)
    else:
        head = lose_a_blob(scene, "git://127.0.0.1:1/project.git")
        scene.config(core__gitProxy=scene.program("proxy"))
    assert lgit.read_blob(scene.repo, head, "f.txt") is None
    assert scene.ran() == []


@pytest.mark.parametrize("reader", ["cat-file", "diff"])
def test_a_lazy_fetch_runs_no_upload_pack_the_config_names(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    """GIT_NO_LAZY_FETCH is off here. The promisor is a real repository on this machine that
    holds the blob, and `remote.origin.uploadpack` names a planted program, which the local
    transport would run. git keeps the first uploadpack it reads, so loopctl refuses that
    transport: the read fails and nothing runs. A blob is read by `cat-file` (a command that
    reads objects only) or by a diff. Kills the protocol.file.allow pin dropped from
    git.command._OBJECTS_ONLY_PINS, or from git.neutralise._filter_neutralisers (git.py pinned
    remote.<name>.uploadpack itself until issue 27, which git ignored: the planted program ran)."""
    monkeypatch.delitem(git_runner._PINNED_ENV, "GIT_NO_LAZY_FETCH")
    promisor = scene.bare("promisor.git")
    base = scene.head()
    head = scene.commit("a blob to lose", **{"f.txt": "content\n"})
    plain(scene.repo, "push", "-q", str(promisor), "HEAD:refs/heads/main")
    lose_a_blob(scene, promisor.as_uri(), commit=False)
    scene.config(remote__origin__uploadpack=scene.program("upload"))
    if reader == "cat-file":
        assert lgit.read_blob(scene.repo, head, "f.txt") is None
    else:
        with pytest.raises(GitError):
            lgit.patch_between(scene.repo, base, head)
    assert scene.ran() == []
    # The trap is live: plain git, asked to fetch lazily, runs the planted program.
    subprocess.run(["git", "cat-file", "-e", f"{head}:f.txt"], cwd=scene.repo, capture_output=True)
    assert scene.ran()


# --- editors and submodules ----------------------------------------------------------------------


def test_an_interactive_rebase_through_git_runs_no_planted_sequence_editor(scene: Scene) -> None:
    """`git.git` runs any command; one that opens the todo list gets `:` as its editor. Kills
    GIT_SEQUENCE_EDITOR dropped from git.runner._PINNED_ENV."""
    base = scene.head()
    scene.commit("one", **{"one.txt": "1\n"})
    scene.commit("two", **{"two.txt": "2\n"})
    scene.config(sequence__editor=scene.program("editor"))
    lgit.git(["rebase", "-q", "-i", "--force-rebase", base], cwd=scene.repo)
    assert scene.ran() == []
    assert plain(scene.repo, "log", "--format=%s", f"{base}..HEAD").split() == ["two", "one"]


def test_a_checkout_never_recurses_into_a_submodule(scene: Scene) -> None:
    """submodule.recurse planted: `reset --hard` (recycle_checkout) would check the submodule's
    files out too, through a smudge filter planted in the submodule's own config, which no pin
    of loopctl's names. Kills `"-c", "submodule.recurse=false"` dropped from
    git.runner._HARDENING."""
    library = scene.repo.parent / "library"
    repos.make_repo(library)
    first = plain(library, "rev-parse", "HEAD").strip()
    (library / ".gitattributes").write_text("*.txt filter=evil\n")
    (library / "data.txt").write_text("data\n")
    repos.commit_all(library, "data")
    second = plain(library, "rev-parse", "HEAD").strip()
    plain(library, "checkout", "-q", first)
    add = ("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    plain(scene.repo, *add)
    old = scene.commit("library at its first commit")
    plain(scene.repo / "lib", "checkout", "-q", second)
    new = scene.commit("library at its second commit")
    plain(scene.repo, "-c", "protocol.file.allow=always", "submodule", "update", "-q")
    plain(scene.repo, "checkout", "-q", old)
    plain(scene.repo, "-c", "protocol.file.allow=always", "submodule", "update", "-q")
    assert not (scene.repo / "lib" / "data.txt").exists()
    smudge = scene.program("smudge", exit_code=0, then="cat")
    plain(scene.repo / "lib", "config", "filter.evil.smudge", smudge)
    scene.config(submodule__recurse="true")

    lgit.recycle_checkout(scene.repo, "loop/l/t", new)

    assert scene.ran() == []
    assert not (scene.repo / "lib" / "data.txt").exists()
    # The trap is live: plain git recurses, and runs the submodule's smudge filter.
    plain(scene.repo, "reset", "-q", "--hard", new)
    assert (scene.repo / "lib" / "data.txt").exists()
    assert scene.ran()


# The child: a session leader that takes the pty on its stdin as its controlling terminal (as
# loopctl run by hand in a terminal has one), then asks a remote that wants a password.
_ASK_FROM_A_TERMINAL = """
import fcntl, sys, termios
from pathlib import Path
fcntl.ioctl(0, termios.TIOCSCTTY, 0)
from loopctl import git
from loopctl.errors import GitError
try:
    git.remote_branch_sha(Path(sys.argv[1]), sys.argv[2], "main")
except GitError:
    print("loopctl-test: refused", flush=True)
"""


def test_a_remote_that_wants_a_password_never_prompts_on_the_terminal(
    scene: Scene, http_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from a terminal, git would ask for a username there and wait for an answer that
    never comes (an unattended loop hangs). Kills GIT_TERMINAL_PROMPT=0 dropped from
    git.runner._base_env."""
    monkeypatch.delenv("SSH_ASKPASS", raising=False)
    leader, follower = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-c", _ASK_FROM_A_TERMINAL, str(scene.repo), http_url],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        start_new_session=True,
    )
    os.close(follower)
    seen = b""
    try:
        # Read until the child ends (EIO once the terminal has no writer left) or git asks.
        while b"Username for" not in seen:
            ready, _, _ = select.select([leader], [], [], 300)  # a safety net, not a deadline
            assert ready, f"no answer from the child in 300 s: {seen!r}"
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
        child.wait()
        os.close(leader)
    assert b"Username for" not in seen, seen
    assert b"loopctl-test: refused" in seen, seen


# --- second guards on hooks: --no-verify holds without core.hooksPath ----------------------------


@pytest.mark.parametrize("call", ["commit_all", "push_commit"])
def test_planted_hooks_never_run_with_the_hooks_path_pin_off(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """core.hooksPath=/dev/null (the first guard) is off here: `--no-verify` alone keeps the
    repository's pre-commit, commit-msg and pre-push hooks from running. Kills `--no-verify`
    dropped from commit_all's commit or push_commit's push."""
    monkeypatch.setattr(
        git_runner, "_HARDENING", _without(git_runner._HARDENING, "core.hooksPath=/dev/null")
    )
    hooks = scene.repo / ".git" / "hooks"
    for hook in ("pre-commit", "commit-msg", "pre-push"):
        (hooks / hook).write_text(f"#!/bin/sh\necho {hook} >> '{scene.marker}'\nexit 1\n")
        (hooks / hook).chmod(0o755)
    if call == "commit_all":
        (scene.repo / "work.txt").write_text("work\n")
        assert lgit.commit_all(scene.repo, "work", author_name="Bot", author_email="b@x")
    else:
        remote = scene.bare("remote.git")
        lgit.push_commit(scene.repo, str(remote), scene.head(), "main", expect=None)
        assert remote_refs(remote) == {"refs/heads/main": scene.head()}
    assert scene.ran() == []


# --- network commands: where they go, what they bring back ---------------------------------------


def alternates(scene: Scene) -> None:
    """Point the repository's object store at another one (objects/info/alternates, which an
    agent can write): fetches and pushes then list the other's refs, with
    core.alternateRefsCommand when config names one."""
    other = scene.repo.parent / "other"
    repos.make_repo(other)
    (scene.repo / ".git" / "objects" / "info" / "alternates").write_text(
        f"{other / '.git' / 'objects'}\n"
    )


@pytest.mark.parametrize("call", ["fetch_branch", "push_commit"])
def test_a_planted_alternate_refs_command_never_runs(scene: Scene, call: str) -> None:
    """Kills the core.alternateRefsCommand pin turned off in git.remotes._secure_network_env."""
    alternates(scene)
    scene.config(core__alternateRefsCommand=scene.program("alternates"))
    remote = scene.bare("remote.git")
    plain(scene.repo, "push", "-q", str(remote), "HEAD:refs/heads/main")
    pushed = scene.head()
    if call == "fetch_branch":
        assert lgit.fetch_branch(scene.repo, str(remote), "main", "refs/loopctl/b") == pushed
    else:
        work = scene.commit("work", work="work\n")
        lgit.push_commit(scene.repo, str(remote), work, "main", expect=pushed)
        assert remote_refs(remote)["refs/heads/main"] == work
    assert scene.ran() == []


def test_a_fetch_brings_back_no_tags(scene: Scene) -> None:
    """The remote tags the fetched commit: loopctl's fetches write only the refs it names.
    Kills `--no-tags` dropped from fetch_refs or fetch_branch."""
    remote = scene.bare("remote.git")
    plain(scene.repo, "tag", "-a", "-m", "theirs", "v1")
    plain(scene.repo, "push", "-q", str(remote), "HEAD:refs/heads/main", "refs/tags/v1")
    plain(scene.repo, "tag", "-d", "v1")
    lgit.fetch_refs(scene.repo, str(remote), ["+refs/heads/main:refs/loopctl/fetched"])
    lgit.fetch_branch(scene.repo, str(remote), "main", "refs/loopctl/branch")
    assert not any(ref.startswith("refs/tags/") for ref in lgit.ref_values(scene.repo))


def test_a_push_to_a_remote_name_goes_to_its_push_url(scene: Scene) -> None:
    """Kills `--push` dropped from the URL lookup of a configured remote (the push would go to
    the fetch URL)."""
    fetch_from, push_to = scene.bare("fetch.git"), scene.bare("push.git")
    scene.config(remote__origin__url=str(fetch_from), remote__origin__pushurl=str(push_to))
    lgit.push_commit(scene.repo, "origin", scene.head(), "main", expect=None)
    assert remote_refs(push_to) == {"refs/heads/main": scene.head()}
    assert remote_refs(fetch_from) == {}


def test_a_planted_push_rewrite_of_the_url_is_refused(scene: Scene) -> None:
    """url.<attacker>.pushInsteadOf=<the pinned URL> would send the push elsewhere. Kills
    "pushinsteadof" dropped from git.remotes._REWRITES."""
    origin, attacker = scene.bare("origin.git"), scene.bare("attacker.git")
    plain(scene.repo, "config", f"url.{attacker}.pushInsteadOf", str(origin))
    with pytest.raises(GitError, match="pushInsteadOf rewrites it"):
        lgit.push_commit(scene.repo, str(origin), scene.head(), "main", expect=None)
    assert remote_refs(attacker) == {}
    assert remote_refs(origin) == {}


@pytest.mark.parametrize(
    ("url", "key", "value"),
    [
        ("http://127.0.0.1:9/p.git", "http.sslCAPath", "/tmp/agent-certs"),
        ("http://127.0.0.1:9/p.git", "http.curloptResolve", "example.com:443:127.0.0.1"),
        ("https://127.0.0.1:9/p.git", "http.proxy", "http://127.0.0.1:9/"),
    ],
)
def test_repository_config_that_reroutes_https_is_refused(
    scene: Scene, url: str, key: str, value: str
) -> None:
    """Kills sslcapath or curloptresolve dropped from git.remotes._HTTP_TRUST, or https:// dropped
    from the http transport (its checks would be skipped)."""
    plain(scene.repo, "config", key, value)
    with pytest.raises(GitError, match="refusing to reach"):
        lgit.remote_branch_sha(scene.repo, url, "main")


# --- the one credential each transport needs ------------------------------------------------------


def user_program(scene: Scene, name: str, then: str) -> str:
    """A program of the user's own (global config or environment) that records its
    environment in `<marker>.<name>.env`."""
    return scene.program(name, exit_code=0, then=f"env > '{scene.marker}.{name}.env'\n{then}")


def env_of(scene: Scene, name: str) -> dict[str, str]:
    lines = Path(f"{scene.marker}.{name}.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


@pytest.mark.parametrize(
    "token", ["GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"]
)
def test_the_users_credential_helper_gets_each_github_token(
    scene: Scene, http_url: str, monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    """`gh auth git-credential` reads one of these: it reaches the user's helper over http
    (and nothing else secret does). Kills the name dropped from
    git.remotes._TRANSPORT_CREDENTIALS."""
    helper = user_program(scene, "helper", "cat > /dev/null; echo username=u; echo password=p")
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text(f"[credential]\n\thelper = {helper}\n")
    monkeypatch.setenv(token, "token-for-the-helper")
    monkeypatch.setenv("SSH_AUTH_SOCK", str(scene.tools / "agent.sock"))
    try:
        # Every answer of the server is 401: reading the remote cannot succeed. (One CI run
        # saw it return on a busy worker, not reproduced since: what it returned, if again.)
        got = lgit.remote_branch_sha(scene.repo, http_url, "main")
    except GitError:
        pass
    else:
        pytest.fail(f"ls-remote of {http_url} (401 to everything) answered {got!r}")
    env = env_of(scene, "helper")
    assert env.get(token) == "token-for-the-helper"
    assert "SSH_AUTH_SOCK" not in env


@pytest.mark.parametrize("scheme", ["git+ssh", "ssh+git"])
def test_ssh_spelled_otherwise_gets_the_ssh_agent(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    """git takes git+ssh:// and ssh+git:// as ssh. Kills either dropped from git.remotes._transport
    (ssh would run without the agent's socket)."""
    monkeypatch.setenv("GIT_SSH_COMMAND", user_program(scene, "ssh", "exit 1"))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(scene.tools / "agent.sock"))
    monkeypatch.setenv("GITHUB_TOKEN", "not-for-ssh")
    with pytest.raises(GitError):
        lgit.remote_branch_sha(scene.repo, f"{scheme}://127.0.0.1:1/project.git", "main")
    env = env_of(scene, "ssh")
    assert env.get("SSH_AUTH_SOCK") == str(scene.tools / "agent.sock")
    assert "GITHUB_TOKEN" not in env


# --- names are never options ---------------------------------------------------------------------


def test_an_existing_branch_named_like_an_option_is_checked_out_not_obeyed(
    scene: Scene, place: Place
) -> None:
    """A branch an agent named `--detach` (update-ref takes it): git would read it as the
    option and check out HEAD instead of the branch's commits. Kills `--` dropped before the
    path and branch in worktree_add's existing-branch form."""
    earlier = scene.head()
    plain(scene.repo, "update-ref", "refs/heads/--detach", earlier)
    scene.commit("later", later="later\n")
    worktree = place.base / "wt"
    lgit.worktree_add(scene.repo, worktree, "--detach", earlier, branch_is_new=False)
    assert lgit.head_sha(worktree) == earlier


# --- the user's own programs still apply to network commands -------------------------------------


def test_the_users_own_askpass_proxy_and_git_ssh_are_used(
    scene: Scene, http_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Network commands replace the repository's programs, never the user's own: core.askPass
    and core.gitProxy from the global config, GIT_SSH from the environment. Kills the askpass
    or GIT_SSH_COMMAND assignment dropped from git.remotes._secure_network_env (or their
    fallbacks to the user's config and GIT_SSH), and the deletion of the GIT_PROXY_COMMAND pin
    turned off."""
    askpass = user_program(scene, "askpass", "echo secret")
    proxy = user_program(scene, "proxy", "exit 1")
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text(
        f"[core]\n\taskPass = {askpass}\n\tgitProxy = {proxy}\n"
    )
    monkeypatch.setenv("GIT_SSH", user_program(scene, "git-ssh", "exit 1"))
    monkeypatch.delenv("SSH_ASKPASS", raising=False)
    for url in (http_url, "git://127.0.0.1:1/project.git", "ssh://127.0.0.1:1/project.git"):
        with pytest.raises(GitError):
            lgit.remote_branch_sha(scene.repo, url, "main")
    assert [line.split()[0] for line in scene.ran()] == ["askpass", "askpass", "proxy", "git-ssh"]


# --- replace refs: the second pin on the calls that build and compare snapshots -------------------


def test_snapshots_read_the_real_objects_with_the_global_pin_off(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, place: Place
) -> None:
    """GIT_NO_REPLACE_OBJECTS in git.runner._PINNED_ENV (the first guard) is off here; the calls
    that build, commit and compare snapshots pin it again themselves. A planted refs/replace/<base>
    points the base at a commit whose test is weakened. Kills git.refs._NO_REPLACE emptied, or
    dropped from snapshot_tree, tree_changes, recycle_checkout, reset_index, commits_between,
    tree_of_commit or tracked_under."""
    monkeypatch.delitem(git_runner._PINNED_ENV, "GIT_NO_REPLACE_OBJECTS")
    initial = scene.head()
    base = scene.commit("tests", **{"test_calc.py": "assert add(2, 3) == 5\n"})
    real_tree = plain(scene.repo, "rev-parse", f"{base}^{{tree}}").strip()
    plain(scene.repo, "checkout", "-q", "--orphan", "fake")
    plain(scene.repo, "commit", "-q", "-m", "a stranger to the base's history")
    (scene.repo / "test_calc.py").write_text("assert True\n")
    (scene.repo / "extra.txt").write_text("planted\n")
    plain(scene.repo, "add", "-A")
    plain(scene.repo, "commit", "-q", "-m", "weakened")
    fake = scene.head()
    plain(scene.repo, "checkout", "-q", "-f", "main")
    plain(scene.repo, "replace", base, fake)
    assert plain(scene.repo, "rev-parse", f"{base}^{{tree}}").strip() != real_tree  # live
    worktree = place.base / "wt"
    plain(scene.repo, "worktree", "add", "-q", "--no-checkout", "-b", "t", str(worktree), base)

    lgit.recycle_checkout(worktree, "loop/l/t", base, branch_is_new=True)
    assert (worktree / "test_calc.py").read_text() == "assert add(2, 3) == 5\n"
    assert not (worktree / "extra.txt").exists()
    lgit.reset_index(worktree, base)
    assert lgit.tree_of_commit(scene.repo, base) == real_tree
    assert lgit.snapshot_tree(worktree, base) == real_tree
    # A path kept at its version in the base (`exclude`) is the real base's.
    (worktree / "test_calc.py").write_text("assert True  # edited\n")
    kept = lgit.snapshot_tree(worktree, base, exclude=["test_calc.py"])
    assert plain(scene.repo, "cat-file", "-p", f"{kept}:test_calc.py") == "assert add(2, 3) == 5\n"
    assert lgit.tree_changes(scene.repo, real_tree, base) == []
    assert lgit.tracked_under(scene.repo, base, ["extra.txt", "test_calc.py"]) == {"test_calc.py"}
    assert lgit.commits_between(scene.repo, initial, base) == [base]
    # The index reset_index wrote is the real base's: nothing staged against it.
    assert plain(worktree, "--no-replace-objects", "diff", "--cached", "--name-only", base) == ""


# --- refs move only from what loopctl saw ---------------------------------------------------------


def test_a_recycled_branch_made_by_someone_else_meanwhile_is_not_overwritten(
    scene: Scene, place: Place
) -> None:
    """recycle_checkout creates a new branch only where none exists. Kills the all-zero old
    value dropped from its update-ref (the branch would be reset to the base)."""
    base = scene.head()
    worktree = place.base / "wt"
    lgit.worktree_add(scene.repo, worktree, "loop/l/first", base)
    theirs = scene.commit("someone's work", theirs="theirs\n")
    plain(scene.repo, "branch", "loop/l/second", theirs)
    with pytest.raises(GitError):
        lgit.recycle_checkout(worktree, "loop/l/second", base, branch_is_new=True)
    assert lgit.branch_head(scene.repo, "loop/l/second") == theirs


def test_a_snapshot_commit_never_moves_a_branch_that_moved(scene: Scene) -> None:
    """commit_snapshot points the branch at its commit only if it still points at `expect`.
    Kills the old value dropped from its update-ref."""
    base = scene.head()
    plain(scene.repo, "branch", "loop/l/t", base)
    theirs = scene.commit("moved meanwhile", moved="moved\n")
    plain(scene.repo, "branch", "-f", "loop/l/t", theirs)
    with pytest.raises(GitError, match="moved while loopctl committed"):
        lgit.commit_snapshot(
            scene.repo,
            "loop/l/t",
            lgit.tree_of(scene.repo, base),
            base,
            "snapshot",
            author_name="Bot",
            author_email="b@x",
            date="1700000000 +0000",
            expect=base,
        )
    assert lgit.branch_head(scene.repo, "loop/l/t") == theirs


def test_a_fast_forward_never_undoes_a_push_made_while_it_decided(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch (not checked out) moves after fast_forward read it and before it writes: the
    update is refused instead of dropping that commit. Kills the old value dropped from
    fast_forward's update-ref."""
    base = scene.head()
    plain(scene.repo, "checkout", "-q", "--detach")
    plain(scene.repo, "branch", "target", base)
    ours = scene.commit("ours", ours="ours\n")
    plain(scene.repo, "checkout", "-q", "--detach", base)
    theirs = scene.commit("theirs", theirs="theirs\n")
    real_list = lgit.worktree_list

    def moved_meanwhile(repo: Path) -> list[lgit.WorktreeEntry]:
        plain(scene.repo, "update-ref", "refs/heads/target", theirs)  # someone else's push
        return real_list(repo)

    monkeypatch.setattr(git_worktrees, "worktree_list", moved_meanwhile)
    with pytest.raises(GitError):
        lgit.fast_forward(scene.repo, "target", ours)
    assert lgit.branch_head(scene.repo, "target") == theirs


# --- what a worktree holds is seen whatever its config says ---------------------------------------


def test_untracked_files_count_whatever_status_show_untracked_files_says(
    scene: Scene,
) -> None:
    """status.showUntrackedFiles=no in the repository's config hides new files from `git
    status`. Kills `--untracked-files=normal` dropped from is_dirty, or `--untracked-files=all`
    and `--ignored=traditional` from status_outside."""
    scene.config(status__showUntrackedFiles="no")
    (scene.repo / ".gitignore").write_text("*.log\n")
    repos.commit_all(scene.repo, "ignore logs")
    (scene.repo / "build").mkdir()
    (scene.repo / "build" / "new.txt").write_text("new\n")
    assert lgit.is_dirty(scene.repo)
    before = lgit.status_outside(scene.repo, ["cache"])
    assert before == ["?? build/new.txt"]
    (scene.repo / "setup.log").write_text("written by setup\n")
    assert lgit.status_outside(scene.repo, ["cache"]) == ["!! setup.log", "?? build/new.txt"]


def test_a_diff_shows_an_untracked_file_whose_neighbour_is_named_like_pathspec_magic(
    scene: Scene,
) -> None:
    """An agent adds `secret.py` and a file named `:(exclude)secret.py`: read as pathspec magic,
    the second would keep the first out of the approver's diff. Kills `:(top,literal)` dropped
    from the untracked files' intent-to-add."""
    base = scene.head()
    (scene.repo / "secret.py").write_text("steal()\n")
    (scene.repo / ":(exclude)secret.py").write_text("decoy\n")
    shown = lgit.diff_text(scene.repo, base, 100_000)
    assert "+steal()" in shown
    assert "+decoy" in shown


def test_a_branch_name_that_begins_with_a_dash_is_not_valid(scene: Scene) -> None:
    """refs/heads/--upload-pack=x is a well-formed ref, yet as a branch name it is an option
    to any command it reaches. Kills the leading-dash check dropped from valid_branch_name."""
    assert not lgit.valid_branch_name(scene.repo, "--upload-pack=x")
    assert not lgit.valid_branch_name(scene.repo, "-b")
    assert lgit.valid_branch_name(scene.repo, "loop/l/t")


# --- a recycled worktree matches its new base, whatever stat data say -----------------------------


_OLD_NS = 1_600_000_000_000_000_000  # an mtime long before the index was written: not racy


def _put_back_mtime(path: Path) -> None:
    os.utime(path, ns=(_OLD_NS, _OLD_NS))


def _edits_stat_data_hide(worktree: Path) -> None:
    """Two same-size edits whose mtime is put back, made after git recorded the files' stat
    data (this git compares whole seconds only): `inplace.py` rewritten in place a second later
    (only its change time tells, when core.trustctime is on), and `replaced.py` replaced by a new
    file within the same second (only its inode tells, which core.checkStat=minimal skips)."""
    inplace, replaced = worktree / "inplace.py", worktree / "replaced.py"
    for _ in range(50):
        for path in (inplace, replaced):
            path.write_text("a + b\n")
            _put_back_mtime(path)
        plain(worktree, "update-index", "-q", "--really-refresh")
        second = os.stat(replaced).st_ctime_ns // 10**9
        fresh = worktree / "replaced.new"
        fresh.write_text("a - b\n")
        _put_back_mtime(fresh)
        fresh.rename(replaced)
        if os.stat(replaced).st_ctime_ns // 10**9 == second:
            break
    else:
        pytest.fail("could not replace the file within the second of git's refresh in 50 tries")
    # Touch `inplace.py` until the clock reaches the next second (an event, not a delay).
    recorded = os.stat(inplace).st_ctime_ns // 10**9
    while os.stat(inplace).st_ctime_ns // 10**9 == recorded:
        _put_back_mtime(inplace)
    inplace.write_text("a - b\n")
    _put_back_mtime(inplace)


def test_a_recycled_worktree_rewrites_edits_hidden_by_planted_stat_settings(
    scene: Scene, place: Place
) -> None:
    """A maker edits tracked files keeping size and mtime, and plants core.trustctime=false and
    core.checkStat=minimal: `reset --hard` would take the files as unchanged and leave the
    edits in the worktree the next task gets. Kills core.trustctime=true or
    core.checkStat=default dropped from git.worktrees._FULL_STAT."""
    base = scene.commit("calc", **{"inplace.py": "a + b\n", "replaced.py": "a + b\n"})
    worktree = place.base / "wt"
    lgit.worktree_add(scene.repo, worktree, "loop/l/first", base)
    scene.config(core__trustctime="false", core__checkStat="minimal")
    _edits_stat_data_hide(worktree)
    assert plain(worktree, "status", "--porcelain") == ""  # the edits are hidden from git

    lgit.recycle_checkout(worktree, "loop/l/second", base, branch_is_new=True)

    assert (worktree / "inplace.py").read_text() == "a + b\n"
    assert (worktree / "replaced.py").read_text() == "a + b\n"


def a_library(path: Path) -> Path:
    """A repository at `path` whose .gitattributes sends its .txt files through filter `evil`."""
    repos.make_repo(path)
    (path / ".gitattributes").write_text("*.txt filter=evil\n")
    (path / "data.txt").write_text("data\n")
    repos.commit_all(path, "data")
    return path


def with_submodule(scene: Scene) -> Path:
    """Add a populated submodule `lib` (a repository beside the scene's) and commit it; the
    submodule's own config (.git/modules/lib/config) is agent-writable like the rest."""
    library = a_library(scene.repo.parent / "library")
    add = ("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    plain(scene.repo, *add)
    scene.commit("the library")
    return library


def looks_modified(path: Path, step: int = 0) -> None:
    """Move `path`'s mtime (to one of its own per `step`): git must read it to know it is not."""
    os.utime(path, ns=(_OLD_NS + step * 10**9, _OLD_NS + step * 10**9))


def plant_filter(scene: Scene, repo: Path, driver: str) -> None:
    """A filter `evil` in `repo`'s own config: a clean command that passes content through, or
    a long-running process filter that records it started and quits."""
    if driver == "clean":
        plain(repo, "config", "filter.evil.clean", scene.program("clean", 0, "cat"))
    else:
        plain(repo, "config", "filter.evil.process", scene.program("process"))


def planted_in_a_submodule(scene: Scene, how: str = "registered", driver: str = "clean") -> str:
    """A populated submodule `lib` whose own config names a filter for its files, one of which
    looks modified; returns the superproject's HEAD. Asking whether the submodule is dirty runs
    `git status` inside it, which cleans that file through the filter. `how`: "registered" (git
    submodule add; its config is .git/modules/lib/config) or "nested" (a repository the agent
    made in the worktree, with its own .git folder, committed as a gitlink)."""
    if how == "registered":
        with_submodule(scene)
    else:
        a_library(scene.repo / "lib")
        scene.commit("the nested library")
    assert plain(scene.repo, "ls-files", "--stage", "lib").startswith("160000 ")
    plant_filter(scene, scene.repo / "lib", driver)
    looks_modified(scene.repo / "lib" / "data.txt")
    (scene.repo / "README.md").write_text("changed\n")
    return scene.head()


def status_asks_submodules(repo: Path) -> None:
    """The agent's .gitmodules says `ignore = none` for `lib`: that beats diff.ignoreSubmodules,
    so `git status` asks the submodule whether it is dirty again."""
    plain(repo, "config", "-f", ".gitmodules", "submodule.lib.path", "lib")
    plain(repo, "config", "-f", ".gitmodules", "submodule.lib.ignore", "none")


def the_trap_is_live(scene: Scene, folder: Path) -> None:
    """Plain git's `add -A` asks the submodule at `folder`, which runs the planted filter."""
    assert scene.ran() == []
    looks_modified(folder / "data.txt", step=1)
    subprocess.run(["git", "add", "-A"], cwd=scene.repo, capture_output=True, check=False)
    assert scene.ran()


def test_diffs_never_look_inside_a_submodules_files(scene: Scene) -> None:
    """No diff asks a dirty submodule, so its planted filter never runs (the diff.ignoreSubmodules
    pin alone holds this; the next test takes that pin's place away)."""
    base = planted_in_a_submodule(scene)
    assert lgit.changed_paths(scene.repo, base) == ["README.md"]
    assert "README.md" in lgit.diff_stat(scene.repo, base)
    assert "+changed" in lgit.diff_text(scene.repo, base, 10_000)
    assert scene.ran() == []
    # The trap is live: plain git's diff asks the submodule, which runs the filter.
    plain(scene.repo, "diff", "HEAD")
    assert scene.ran()


def test_diffs_never_look_inside_a_submodules_files_whatever_gitmodules_says(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first guard (blanking the submodules' drivers) is off here, and the agent's
    .gitmodules says `ignore = none`, which beats the diff.ignoreSubmodules pin: only the
    diffs' own --ignore-submodules=dirty keeps git out of the submodule, whose filter would run.
    Kills `--ignore-submodules=dirty` dropped from git.diff._SAFE_DIFF (the test above holds
    without it: the pin alone suffices there)."""
    monkeypatch.setattr(git_neutralise, "_submodule_config_keys", lambda cwd, index: set())
    base = planted_in_a_submodule(scene)
    status_asks_submodules(scene.repo)
    assert "README.md" in lgit.changed_paths(scene.repo, base)
    assert "README.md" in lgit.diff_stat(scene.repo, base)
    assert "+changed" in lgit.diff_text(scene.repo, base, 10_000)
    the_trap_is_live(scene, scene.repo / "lib")


def _stage(scene: Scene, call: str, base: str) -> list[str]:
    """Run loopctl's `call` in the scene's repository; the paths it found changed."""
    if call == "commit_all":
        made = lgit.commit_all(scene.repo, "work", author_name="Bot", author_email="b@x")
        assert made is not None
        return lgit.tree_changes(scene.repo, base, made)
    if call == "snapshot_tree":
        return lgit.tree_changes(scene.repo, base, lgit.snapshot_tree(scene.repo, base))
    return [line[3:] for line in lgit.status_outside(scene.repo, ["cache"])]


@pytest.mark.parametrize("driver", ["clean", "process"])
@pytest.mark.parametrize("how", ["registered", "nested"])
@pytest.mark.parametrize("call", ["commit_all", "snapshot_tree", "status_outside"])
def test_staging_runs_no_filter_a_submodules_own_config_names(
    scene: Scene, call: str, how: str, driver: str
) -> None:
    """`git add -A` always asks a populated submodule whether it is dirty (it ignores
    diff.ignoreSubmodules), and `git status` does when .gitmodules says `ignore = none`: git
    runs `git status` in the submodule with the submodule's own config. Kills the submodules'
    keys (`| _submodule_config_keys(...)`) dropped from git.neutralise._filter_neutralisers."""
    base = planted_in_a_submodule(scene, how, driver)
    if call == "status_outside":
        status_asks_submodules(scene.repo)
    changed = _stage(scene, call, base)
    assert "README.md" in changed
    assert "lib" not in changed
    the_trap_is_live(scene, scene.repo / "lib")


def test_a_snapshot_asks_the_submodules_of_its_own_index(scene: Scene) -> None:
    """The agent dropped `lib` from the worktree's index (the folder stays): the snapshot's
    private index, read from the parent commit, still has it, and `git add` asks it. Kills
    GIT_INDEX_FILE not passed from git.command._hardened to git.neutralise._filter_neutralisers."""
    with_submodule(scene)
    base = scene.head()
    plain(scene.repo, "rm", "-q", "--cached", "lib")  # (git rm asks lib too: plant after it)
    plant_filter(scene, scene.repo / "lib", "clean")
    looks_modified(scene.repo / "lib" / "data.txt")
    (scene.repo / "README.md").write_text("changed\n")
    tree = lgit.snapshot_tree(scene.repo, base)
    assert lgit.tree_changes(scene.repo, base, tree) == ["README.md"]
    assert scene.ran() == []
    # The trap is live: git adds as the snapshot does, in an index that has the submodule.
    index = scene.repo.parent / "private-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    looks_modified(scene.repo / "lib" / "data.txt", step=1)
    for args in (["read-tree", base], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=scene.repo, env=env, capture_output=True, check=False)
    assert scene.ran()


def test_staging_runs_no_filter_of_a_submodule_inside_a_submodule(scene: Scene) -> None:
    """`lib` holds a repository `inner` of its own (in its index as a gitlink), and lib's
    .gitmodules says `ignore = none` for it: the `git status` git runs in `lib` asks `inner`
    in turn, with inner's own config. Kills the nested gitlinks (`pending.extend(...)`)
    dropped from git.neutralise._submodule_config_keys."""
    with_submodule(scene)
    lib = scene.repo / "lib"
    inner = a_library(lib / "inner")
    plain(lib, "add", "inner")
    (lib / ".gitmodules").write_text(
        '[submodule "inner"]\n\tpath = inner\n\turl = ./inner\n\tignore = none\n'
    )
    plant_filter(scene, inner, "clean")
    looks_modified(inner / "data.txt")
    base = scene.head()
    (scene.repo / "README.md").write_text("changed\n")
    assert "README.md" in _stage(scene, "commit_all", base)
    the_trap_is_live(scene, inner)


def test_a_submodule_moved_to_another_commit_is_committed(scene: Scene) -> None:
    """The agent checked out another commit in the submodule: the new pointer is the task's
    work, committed and snapshotted (as before the submodules' drivers were blanked)."""
    library = with_submodule(scene)
    (library / "more.txt").write_text("more\n")
    repos.commit_all(library, "more")
    newer = plain(library, "rev-parse", "HEAD").strip()
    lib = scene.repo / "lib"
    plain(lib, "fetch", "-q", "origin")
    plain(lib, "checkout", "-q", newer)
    base = scene.head()

    tree = lgit.snapshot_tree(scene.repo, base)
    made = lgit.commit_all(scene.repo, "work", author_name="Bot", author_email="b@x")

    assert made is not None
    for commit in (tree, made):
        assert plain(scene.repo, "rev-parse", f"{commit}:lib").strip() == newer


def test_a_gitlink_leading_back_up_is_followed_once(scene: Scene) -> None:
    """lib's index has a gitlink `up` whose folder is a symlink to the superproject: following
    gitlinks blindly would go round for ever (git itself sees a type change there and asks
    nothing). Kills the `folder in seen` check dropped from
    git.neutralise._submodule_config_keys."""
    with_submodule(scene)
    lib = scene.repo / "lib"
    sha = plain(lib, "rev-parse", "HEAD").strip()
    plain(lib, "update-index", "--add", "--cacheinfo", f"160000,{sha},up")
    (lib / "up").symlink_to(scene.repo)
    base = scene.head()
    (scene.repo / "README.md").write_text("changed\n")
    assert "README.md" in _stage(scene, "commit_all", base)


def test_a_removed_submodule_is_committed_as_removed(scene: Scene) -> None:
    """The agent deleted the submodule's folder: the gitlink is still in the index, and its
    folder is not there to ask. Kills the `.git` presence check dropped from
    git.neutralise._submodule_config_keys (git cannot run in a missing folder)."""
    with_submodule(scene)
    base = scene.head()
    shutil.rmtree(scene.repo / "lib")
    made = lgit.commit_all(scene.repo, "work", author_name="Bot", author_email="b@x")
    assert made is not None
    assert lgit.tree_changes(scene.repo, base, made) == ["lib"]


def test_status_never_asks_a_submodule_whether_it_is_dirty(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first guard (blanking the submodules' drivers) is off here. Kills
    `"-c", "diff.ignoreSubmodules=dirty"` dropped from git.runner._HARDENING."""
    monkeypatch.setattr(git_neutralise, "_submodule_config_keys", lambda cwd, index: set())
    planted_in_a_submodule(scene)
    assert "README.md" in _stage(scene, "status_outside", scene.head())
    the_trap_is_live(scene, scene.repo / "lib")


def test_asking_whether_a_worktree_is_dirty_never_asks_a_submodule(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first guard (blanking the submodules' drivers) is off here, and the agent's
    .gitmodules says `ignore = none`, which beats the diff.ignoreSubmodules pin: only is_dirty's
    own --ignore-submodules=dirty keeps `git status` out of the submodule, whose filter would
    run. Kills `--ignore-submodules=dirty` dropped from is_dirty."""
    monkeypatch.setattr(git_neutralise, "_submodule_config_keys", lambda cwd, index: set())
    planted_in_a_submodule(scene)
    status_asks_submodules(scene.repo)
    assert lgit.is_dirty(scene.repo)  # README.md is changed
    the_trap_is_live(scene, scene.repo / "lib")


@pytest.mark.parametrize("first_guard", ["on", "off"])
def test_a_push_never_pushes_a_submodule(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, first_guard: str
) -> None:
    """push.recurseSubmodules=on-demand planted, the submodule's remote pointed at the agent's
    repository, and a commit in the submodule that the pushed commit records: git would push
    the submodule's branch there first, with the user's credentials (over ssh or https, or as
    here a path once the user allows the file transport for submodules, a common fix since git
    2.38.1). With submodule.recurse=false (the first guard, command scope) off too, kills
    `--recurse-submodules=no` dropped from push_commit."""
    if first_guard == "off":
        monkeypatch.setattr(
            git_runner, "_HARDENING", _without(git_runner._HARDENING, "submodule.recurse=false")
        )
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text('[protocol "file"]\n\tallow = always\n')
    with_submodule(scene)
    stolen, origin = scene.bare("stolen.git"), scene.bare("origin.git")
    plain(scene.repo / "lib", "config", "remote.origin.url", str(stolen))
    plain(scene.repo / "lib", "commit", "-q", "--allow-empty", "-m", "the agent's")
    scene.commit("the library moved")
    scene.config(push__recurseSubmodules="on-demand")
    lgit.push_commit(scene.repo, str(origin), scene.head(), "loop/l/t", expect=None)
    assert remote_refs(origin) == {"refs/heads/loop/l/t": scene.head()}
    assert remote_refs(stolen) == {}
    # The trap is live: git as a user runs it pushes the submodule's branch to the agent first.
    plain(scene.repo, "push", "-q", str(origin), "HEAD:refs/heads/by-hand")
    assert list(remote_refs(stolen)) == ["refs/heads/main"]


@pytest.mark.parametrize("call", ["fetch_refs", "fetch_branch"])
def test_a_fetch_never_recurses_into_a_submodule(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """The fetched commit moves a populated submodule to a commit it lacks: git's default
    (fetch on demand) would fetch inside the submodule, through the upload-pack program its
    own config names. submodule.recurse=false (the first guard) is off here. Kills
    `--recurse-submodules=no` dropped from fetch_refs or `--no-recurse-submodules` from
    fetch_branch."""
    monkeypatch.setattr(
        git_runner, "_HARDENING", _without(git_runner._HARDENING, "submodule.recurse=false")
    )
    library = with_submodule(scene)
    remote = scene.bare("remote.git")
    (library / "more.txt").write_text("more\n")
    repos.commit_all(library, "more")
    newer = plain(library, "rev-parse", "HEAD").strip()
    # A commit of the superproject with the submodule at `newer`, made without an index.
    listing = plain(scene.repo, "ls-tree", "HEAD").replace(
        plain(scene.repo, "rev-parse", "HEAD:lib").strip(), newer
    )
    moved_tree = subprocess.run(
        ["git", "mktree"], cwd=scene.repo, input=listing, capture_output=True, text=True, check=True
    ).stdout.strip()
    moved = plain(scene.repo, "commit-tree", "-p", "HEAD", "-m", "moved", moved_tree).strip()
    plain(scene.repo, "push", "-q", str(remote), f"{moved}:refs/heads/main")
    plain(scene.repo / "lib", "config", "remote.origin.uploadpack", scene.program("upload"))
    if call == "fetch_refs":
        lgit.fetch_refs(scene.repo, str(remote), ["+refs/heads/main:refs/loopctl/fetched"])
    else:
        lgit.fetch_branch(scene.repo, str(remote), "main", "refs/loopctl/fetched")
    assert lgit.resolve_commit(scene.repo, "refs/loopctl/fetched") == moved
    assert scene.ran() == []


def test_a_snapshot_commit_moves_the_task_branch_never_what_it_was_linked_to(
    scene: Scene,
) -> None:
    """An agent turned the task branch into a symbolic ref to main: committing the snapshot
    must replace the task branch, not move main. Kills `--no-deref` dropped from
    commit_snapshot's update-ref."""
    main = scene.head()
    plain(scene.repo, "symbolic-ref", "refs/heads/loop/l/t", "refs/heads/main")
    made = lgit.commit_snapshot(
        scene.repo,
        "loop/l/t",
        lgit.tree_of(scene.repo, main),
        main,
        "snapshot",
        author_name="Bot",
        author_email="b@x",
        date="1700000000 +0000",
        expect=main,
    )
    assert lgit.branch_head(scene.repo, "main") == main
    assert lgit.branch_head(scene.repo, "loop/l/t") == made


def test_a_planted_proxy_beside_the_users_own_is_refused(scene: Scene) -> None:
    """The user's global config names a proxy program for git://, and the repository's config
    another: the environment cannot give the user's back its place, so the command is refused
    rather than run without the user's proxy. Kills that refusal turned off in
    git.remotes._refuse_steering."""
    proxy = user_program(scene, "user-proxy", "exit 1")
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text(f"[core]\n\tgitProxy = {proxy}\n")
    scene.config(core__gitProxy=scene.program("planted-proxy"))
    with pytest.raises(GitError, match=r"core\.gitProxy names a proxy program"):
        lgit.remote_branch_sha(scene.repo, "git://127.0.0.1:1/project.git", "main")
    assert scene.ran() == []


def test_the_users_ssh_variant_is_kept(scene: Scene, monkeypatch: pytest.MonkeyPatch) -> None:
    """GIT_SSH_VARIANT tells git how to call the user's ssh command (here plain OpenSSH, so no
    `-G` probe first). Kills its pass-through dropped from git.remotes._secure_network_env."""
    monkeypatch.setenv("GIT_SSH_COMMAND", user_program(scene, "ssh", "exit 1"))
    monkeypatch.setenv("GIT_SSH_VARIANT", "ssh")
    with pytest.raises(GitError):
        lgit.remote_branch_sha(scene.repo, "ssh://127.0.0.1:1/project.git", "main")
    calls = scene.ran()
    assert calls
    assert not any(" -G " in f" {call} " for call in calls), calls
    assert env_of(scene, "ssh").get("GIT_SSH_VARIANT") == "ssh"


def test_diffs_for_people_show_non_ascii_names_as_they_are(scene: Scene) -> None:
    """The approver reads `café.txt`, not `"caf\\303\\251.txt"`. Kills core.quotePath=false
    changed in git.diff._READABLE."""
    base = scene.head()
    (scene.repo / "café.txt").write_text("new\n")
    assert "café.txt" in lgit.diff_text(scene.repo, base, 10_000)
    assert "café.txt" in lgit.diff_stat(scene.repo, base)


def test_an_error_names_the_subcommand_after_config_options(scene: Scene) -> None:
    """`-c key=value` before the subcommand (as commit_all and `loopctl demo` pass) is skipped
    when naming what failed. Kills "-c" dropped from git.runner._subcommand_at's options."""
    with pytest.raises(GitError, match=r"^git log failed: "):
        lgit.git(["-c", "user.name=Someone", "log", "no-such-thing"], cwd=scene.repo)


@pytest.mark.parametrize("variable", ["GIT_ASKPASS", "SSH_ASKPASS"])
def test_the_users_askpass_from_the_environment_is_used(
    scene: Scene, http_url: str, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """The user's askpass program named in the environment answers a remote that wants a
    password. Kills the GIT_ASKPASS or SSH_ASKPASS fallback dropped from
    git.remotes._user_askpass."""
    for name in ("GIT_ASKPASS", "SSH_ASKPASS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, user_program(scene, "askpass", "echo secret"))
    with pytest.raises(GitError):
        lgit.remote_branch_sha(scene.repo, http_url, "main")
    assert [line.split()[0] for line in scene.ran()] == ["askpass", "askpass"]


def test_a_tracked_file_that_a_pattern_matches_counts_as_ignored(scene: Scene) -> None:
    """Kills `--no-index` dropped from is_ignored (git would answer for untracked files only)."""
    (scene.repo / "agent.env").write_text("KEY=1\n")
    repos.commit_all(scene.repo, "tracked before the pattern")
    (scene.repo / ".gitignore").write_text("*.env\n")
    assert lgit.is_ignored(scene.repo, "agent.env")
    assert not lgit.is_ignored(scene.repo, "README.md")


def test_asking_whether_a_worktree_is_dirty_writes_nothing(scene: Scene) -> None:
    """is_dirty may run beside an agent's own git in that worktree: it takes no index lock and
    rewrites no index, even when stat data are stale. Kills `--no-optional-locks` dropped."""
    os.utime(scene.repo / "README.md", ns=(_OLD_NS, _OLD_NS))  # content unchanged, stat not
    index = scene.repo / ".git" / "index"
    before = index.read_bytes()
    assert not lgit.is_dirty(scene.repo)
    assert index.read_bytes() == before


def test_an_ignored_folder_is_walked_only_where_allowed(scene: Scene) -> None:
    """Kills `--directory` dropped from ignored_files (git would list every file of a wholly
    ignored folder, node_modules included, whatever `descend` says)."""
    (scene.repo / ".gitignore").write_text("node_modules/\nbuild/\n")
    for name in ("node_modules/pkg/index.py", "build/conftest.py"):
        (scene.repo / name).parent.mkdir(parents=True, exist_ok=True)
        (scene.repo / name).write_text("x\n")
    found = lgit.ignored_files(
        scene.repo,
        wanted=lambda path: path.endswith(".py"),
        descend=lambda folder: not folder.startswith("node_modules"),
    )
    assert found == ["build/conftest.py"]


def test_a_branch_name_is_a_name_never_a_shorthand(scene: Scene) -> None:
    """`@{-1}` is git's shorthand for the branch checked out before: as a branch name it would
    lead a delivery to another branch. Kills valid_branch_name's check of refs/heads/<name>
    changed to `check-ref-format --branch` (which expands the shorthand)."""
    plain(scene.repo, "checkout", "-q", "-b", "other")
    plain(scene.repo, "checkout", "-q", "main")
    assert not lgit.valid_branch_name(scene.repo, "@{-1}")


def test_content_an_attribute_rewrites_on_checkout_is_no_change(scene: Scene, place: Place) -> None:
    """`ident` expands $Id$ on checkout: the raw file hashes differently from the blob, and git,
    applying the attribute on the way back in, says it is unchanged. Kills git's own hashing
    (with the repository's attributes) replaced by a raw one in tracked_content_changes."""
    base = scene.commit(
        "ident", **{".gitattributes": "*.txt ident\n", "version.txt": "$Id$\n", "x.txt": "x\n"}
    )
    worktree = place.base / "wt"
    lgit.worktree_add(scene.repo, worktree, "loop/l/t", base)
    assert (worktree / "version.txt").read_text() != "$Id$\n"  # expanded on checkout
    (worktree / "x.txt").write_text("changed\n")
    changed = lgit.tracked_content_changes(worktree, base, wanted=lambda path: True)
    assert changed == ["x.txt"]


def test_a_patch_applies_whatever_the_repository_says_about_prefixes_and_binaries(
    scene: Scene, place: Place
) -> None:
    """patch_between's output is fed to `git apply`, in a repository that may hold only the
    base: a repository's diff.noPrefix (or mnemonicPrefix) must not change its paths, and a
    binary file must travel whole. Kills
    --src-prefix/--dst-prefix or --binary dropped from patch_between."""
    base = scene.head()
    scene.config(diff__noPrefix="true", diff__mnemonicPrefix="true")
    (scene.repo / "README.md").write_text("changed\n")
    (scene.repo / "logo.bin").write_bytes(b"\x00\x01binary\xff" * 20)
    sha = scene.commit("text and binary")
    patch = lgit.patch_between(scene.repo, base, sha)
    # Another repository holding the base only: the binary's new content must be in the patch.
    elsewhere = place.base / "elsewhere"
    plain(place.base, "init", "-q", str(elsewhere))
    plain(elsewhere, "fetch", "-q", str(scene.repo), base)
    plain(elsewhere, "checkout", "-q", "--detach", base)
    subprocess.run(
        ["git", "apply", "--index", "-"],
        cwd=elsewhere,
        input=patch,
        capture_output=True,
        check=True,
    )
    assert (elsewhere / "README.md").read_text() == "changed\n"
    assert (elsewhere / "logo.bin").read_bytes() == b"\x00\x01binary\xff" * 20


def test_names_are_never_patterns_or_options(scene: Scene) -> None:
    """A kept folder named `b*` excludes that folder only, never `build/`; a file named `-v` is
    asked about as a file. Kills `literal` dropped from status_outside's excludes, or `--`
    dropped before is_ignored's path."""
    (scene.repo / "build").mkdir()
    (scene.repo / "build" / "out.txt").write_text("setup output\n")
    assert lgit.status_outside(scene.repo, ["b*"]) == ["?? build/out.txt"]
    (scene.repo / ".gitignore").write_text("-v\n")
    assert lgit.is_ignored(scene.repo, "-v")


def test_changed_paths_from_a_subfolder_cover_the_whole_tree_whatever_diff_relative_says(
    scene: Scene,
) -> None:
    """diff.relative=true in the repository's config would limit a diff run in a subfolder to
    that folder. Kills `--no-relative` dropped from changed_paths, or the `:/` pathspec from
    its untracked files' listing."""
    base = scene.commit("a subfolder", **{"notes.txt": "notes\n"})
    (scene.repo / "src").mkdir()
    (scene.repo / "src" / "inside.py").write_text("x\n")
    (scene.repo / "README.md").write_text("edited outside src\n")
    (scene.repo / "new_outside.txt").write_text("untracked outside src\n")
    scene.config(diff__relative="true")
    assert lgit.changed_paths(scene.repo / "src", base) == [
        "README.md",
        "new_outside.txt",
        "src/inside.py",
    ]


def test_a_fast_forward_makes_no_merge_commit_whatever_merge_ff_says(scene: Scene) -> None:
    """merge.ff=false in the repository's config turns a plain merge into a merge commit: the
    branch would point at a commit nobody approved. Kills `--ff-only` dropped from
    fast_forward's merge."""
    base = scene.head()
    plain(scene.repo, "checkout", "-q", "-b", "work")
    work = scene.commit("approved work", work="work\n")
    plain(scene.repo, "checkout", "-q", "main")
    scene.config(merge__ff="false")
    assert lgit.fast_forward(scene.repo, "main", work)
    assert scene.head() == work
    assert base != work

"""The only module that runs git: hardened `git` calls and the few queries loopctl needs."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from loopctl.errors import ForeignWorkTree, GitError
from loopctl.secrets import is_secret_name

# Invariant 8: an agent can write hooks and config into the worktree it works in (the common
# .git/config included, and any file that config includes). These overrides sit at command
# scope, above any repository config, so nothing the agent planted runs inside loopctl's own
# git commands with loopctl's environment. Signing and signature checks would run gpg.program
# (or its ssh and x509 kin); a pager any pager.<command>.
_HARDENING = (
    "--no-pager",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "core.untrackedCache=false",
    "-c", "protocol.ext.allow=never",
    "-c", "core.pager=cat",
    "-c", "color.ui=false",
    "-c", "commit.gpgSign=false",
    "-c", "tag.gpgSign=false",
    "-c", "push.gpgSign=false",
    "-c", "merge.verifySignatures=false",
    "-c", "log.showSignature=false",
    "-c", "submodule.recurse=false",
    "-c", "diff.ignoreSubmodules=dirty",
)  # fmt: skip
# Commands that never reach a remote need no credential: an empty helper clears every helper
# configured before it, the repository's own included (network commands rebuild the list).
_LOCAL_ONLY = ("-c", "credential.helper=")
# Writing a whole tree (a new worktree, a recycled one moved far) is most of a task's wait for
# its worktree: one checkout worker per core (git's default is one in all), for trees of at
# least git's default 100 files.
_PARALLEL_CHECKOUT = ("-c", "checkout.workers=0")

# The environment beats any config, so these settle what config could otherwise steer.
_PINNED_ENV = {
    # Replace refs (and the old grafts file) in an agent-writable repository make git read
    # other objects than the ones named: a weakened test hidden from the protected-path check,
    # a false diff shown to the approver, a false ancestry for a fast-forward.
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_GRAFT_FILE": os.devnull,
    # Programs config could name (core.editor, sequence.editor, core.askPass, core.sshCommand,
    # core.gitProxy): local commands need none of them; network commands set their own.
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_ASKPASS": "",
    "GIT_SSH_COMMAND": "false",
    "GIT_PROXY_COMMAND": "",
    # A partial clone fetches missing objects from a remote config names (documented since
    # git 2.44; 2.39 honours it too).
    "GIT_NO_LAZY_FETCH": "1",
}
# Kept from the caller's environment so tests (and users) can isolate git's global config.
_KEPT_GIT_VARS = frozenset({"GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM"})
# The one credential each transport may need (withheld otherwise, like every secret-named
# variable): the ssh agent's socket, or the GitHub token a `gh auth git-credential` helper reads.
_TRANSPORT_CREDENTIALS = {
    "ssh": ("SSH_AUTH_SOCK",),
    "http": ("GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"),
}
# Config scopes the user controls; "local" and "worktree" (and what they include) are writable
# by the agent in a worktree of the repository.
_TRUSTED_SCOPES = frozenset({"system", "global"})
_PLANTABLE_SCOPES = frozenset({"local", "worktree"})
# Repository-config keys that would let a network command talk to someone in between: a proxy,
# or TLS checks switched off or pointed at another certificate authority.
_HTTP_TRUST = frozenset({"proxy", "sslverify", "sslcainfo", "sslcapath", "curloptresolve"})
# Network commands name the other end's programs themselves: a remote section that config has
# for the URL cannot swap in its own.
_UPLOAD_PACK = "--upload-pack=git-upload-pack"
_RECEIVE_PACK = "--receive-pack=git-receive-pack"
_REWRITES = {"insteadof": "insteadOf", "pushinsteadof": "pushInsteadOf"}
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_SCP_LIKE = re.compile(r"^(?:[^@/:]+@)?\[?[^/:\]]+\]?:(?!//)")

# Diffs must not run external diff programs or textconv drivers a repository configures.
_SAFE_DIFF = ("--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty")
# Diffs meant for people (and prompts) show non-ASCII names as they are.
_READABLE = ("-c", "core.quotePath=false")

# Subcommands that never read working-tree file content, so no clean/smudge filter can run.
_CONTENT_FREE = frozenset(
    {
        "--version",
        "branch",
        "check-ref-format",
        "clean",  # lists untracked files by name and deletes them: no content is read
        "config",
        "for-each-ref",
        "ls-files",
        "ls-remote",
        "merge-base",
        "push",
        "remote",
        "rev-parse",
        "show-ref",
        "symbolic-ref",
        "update-ref",
        "version",
    }
)
# Commands that make a repository: the worktree around their folder is not theirs (git refuses
# GIT_WORK_TREE without GIT_DIR for them).
_MAKES_A_REPOSITORY = frozenset({"init", "clone"})
# `git worktree` bookkeeping that reads no file content (`add` checks files out: not here).
_CONTENT_FREE_WORKTREE = frozenset({"list", "lock", "prune", "unlock"})

_DRIVER_KEY = re.compile(
    r"^(?:filter\..+\.(?:clean|smudge|process)|diff\..+\.(?:textconv|command)|diff\.external"
    r"|merge\..+\.driver)$",
    re.DOTALL,
)
_UPLOAD_PACK_KEY = re.compile(r"^remote\..+\.uploadpack$", re.DOTALL)
_FULL_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_TRUNCATED = "\n[diff truncated at {limit} bytes]\n"


@dataclass(frozen=True, slots=True)
class GitResult:
    """What a git command returned; text is decoded as UTF-8 with surrogate escapes."""

    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True, slots=True)
class WorktreeEntry:
    """One record of `git worktree list --porcelain`."""

    path: Path
    head: str
    branch: str | None  # short name (no refs/heads/); None when detached or bare
    detached: bool
    locked: bool
    prunable: bool
    lock_reason: str = ""


def git(
    args: Sequence[str],
    *,
    cwd: Path,
    check: bool = True,
    timeout: float = 120,
    input: str | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> GitResult:
    """Run one hardened git command in `cwd`; raise GitError on failure when `check`."""
    argv, env = _hardened(args, cwd, extra_env)
    result = _run(argv, cwd=cwd, env=env, timeout=timeout, input=input)
    if check and result.returncode != 0:
        raise GitError(f"git {_subcommand(args)} failed: {_first_line(result)}")
    return result


def _hardened(
    args: Sequence[str], cwd: Path, extra_env: Mapping[str, str] | None
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of one hardened git command."""
    subcommand = _subcommand(args)
    if any("\0" in arg for arg in args):
        raise GitError(f"git {subcommand} refused: an argument contains a NUL byte")
    env = _base_env()
    if subcommand not in _MAKES_A_REPOSITORY:
        env.update(_work_tree_env(cwd))
    if not _content_free(subcommand, args):
        env.update(_filter_neutralisers(cwd, (extra_env or {}).get("GIT_INDEX_FILE")))
    env.update(extra_env or {})
    return ["git", *_HARDENING, *_LOCAL_ONLY, *args], env


def is_git_repo(path: Path) -> bool:
    """True when `path` is inside a git working tree."""
    try:
        result = git(["rev-parse", "--is-inside-work-tree"], cwd=path, check=False)
    except GitError:
        return False
    return result.returncode == 0 and result.stdout.strip() == "true"


def toplevel(path: Path) -> Path:
    """The top folder of the working tree containing `path`."""
    return Path(git(["rev-parse", "--show-toplevel"], cwd=path).stdout.rstrip("\n"))


def require_work_tree(worktree: Path, doing: str) -> None:
    """Raise ForeignWorkTree unless git, run in `worktree`, takes that very folder as its
    working tree. What loopctl snapshots, resets or cleans must be the task's worktree, never
    the main checkout or another tree a rewritten `.git` file or `core.worktree` leads to."""
    result = git(["rev-parse", "--show-toplevel"], cwd=worktree, check=False)
    top = result.stdout.rstrip("\n")
    if result.returncode == 0 and os.path.realpath(top) == os.path.realpath(worktree):
        return
    found = f"git's working tree there is {top}" if result.returncode == 0 else _first_line(result)
    raise ForeignWorkTree(
        f"refusing to {doing} {worktree}: {found}, not the worktree itself (its `.git` file or"
        " its git admin folder was changed, maybe by the agent); loopctl left it alone"
    )


def resolve_commit(repo: Path, ref: str) -> str:
    """The full sha of the commit `ref` names; GitError "unknown ref" when there is none."""
    sha = ""
    if "\0" not in ref:
        result = git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
            cwd=repo,
            check=False,
        )
        sha = result.stdout.strip() if result.returncode == 0 else ""
    if not _FULL_SHA.match(sha):
        raise GitError(
            f"unknown ref {ref!r}: no branch, tag or commit by that name in {repo} "
            "(check the spelling, or fetch it first)"
        )
    return sha


def has_commits(repo: Path) -> bool:
    """True once HEAD points at a commit."""
    result = git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=repo, check=False)
    return result.returncode == 0


def current_branch(repo: Path) -> str | None:
    """The checked-out branch's short name, or None when HEAD is detached."""
    result = git(["symbolic-ref", "--quiet", "HEAD"], cwd=repo, check=False)
    ref = result.stdout.rstrip("\n")
    if result.returncode != 0 or not ref.startswith("refs/heads/"):
        return None
    return ref.removeprefix("refs/heads/")


def branch_exists(repo: Path, branch: str) -> bool:
    """True when refs/heads/<branch> exists."""
    # for-each-ref walks the ref store, so a hostile name is never used to open a file.
    wanted = f"refs/heads/{branch}"
    out = git(["for-each-ref", "--format=%(refname)", "--", wanted], cwd=repo).stdout
    return wanted in out.splitlines()


def worktree_add(
    repo: Path, path: Path, branch: str, base_sha: str, *, branch_is_new: bool | None = None
) -> None:
    """Add a worktree at `path` on `branch`, creating the branch at `base_sha` if needed.

    `branch_is_new` is what the caller already knows (None: ask git); a branch that exists
    after all makes `-b` fail rather than be overwritten.
    """
    if branch_is_new is None:
        branch_is_new = not branch_exists(repo, branch)
    if branch_is_new:
        sha = _require_sha(repo, base_sha)
        args = ["worktree", "add", "--quiet", "--no-track", "-b", branch, "--", str(path), sha]
    else:
        # An existing branch is checked out as it is: its commits are earlier work.
        args = ["worktree", "add", "--quiet", "--", str(path), branch]
    git([*_PARALLEL_CHECKOUT, *args], cwd=repo)


def new_worktree_git_dir(path: Path) -> Path:
    """The git dir of a linked worktree `git worktree add` has just made, read from its `.git`
    file (no git call): no agent has run in it yet, so the pointer is the one git wrote."""
    try:
        text = (path / ".git").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return git_dir(path)
    pointed = text.removeprefix("gitdir:").strip()
    if not text.startswith("gitdir:") or not Path(pointed).is_absolute():
        return git_dir(path)
    return Path(pointed)


def worktree_remove(repo: Path, path: Path, force: bool = True) -> None:
    """Remove the worktree at `path` (with `force`, even when it has uncommitted changes)."""
    git(["worktree", "remove", *(["--force"] if force else []), "--", str(path)], cwd=repo)


def worktree_unlock(repo: Path, path: Path) -> None:
    """Unlock the worktree at `path`."""
    git(["worktree", "unlock", "--", str(path)], cwd=repo)


def worktree_list(repo: Path) -> list[WorktreeEntry]:
    """Every worktree git knows for this repository, the main one first."""
    result = git(["worktree", "list", "--porcelain", "-z"], cwd=repo, check=False)
    if result.returncode == 0:
        return _parse_worktrees(result.stdout.split("\0"))
    # git < 2.36 has no -z; loopctl's own worktree paths never contain newlines.
    plain = git(["worktree", "list", "--porcelain"], cwd=repo)
    return _parse_worktrees(plain.stdout.split("\n"))


def worktree_prune(repo: Path) -> None:
    """Forget worktrees whose folders are gone."""
    git(["worktree", "prune"], cwd=repo)


def delete_branch(repo: Path, branch: str, force: bool = True) -> None:
    """Delete a local branch (with `force`, even when it is not merged)."""
    git(["branch", "-D" if force else "-d", "--", branch], cwd=repo)


def merge_base(repo: Path, a: str, b: str) -> str | None:
    """The best common ancestor of two commits, or None when they share no history."""
    result = git(["merge-base", "--end-of-options", a, b], cwd=repo, check=False)
    sha = result.stdout.strip()
    return sha if result.returncode == 0 and _FULL_SHA.match(sha) else None


def is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    """True when `ancestor` is reachable from `descendant` (or they are the same commit)."""
    result = git(
        ["merge-base", "--is-ancestor", "--end-of-options", ancestor, descendant],
        cwd=repo,
        check=False,
    )
    return result.returncode == 0


def branch_head(repo: Path, branch: str) -> str | None:
    """The commit a local branch points at, or None when it does not exist."""
    result = git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"refs/heads/{branch}^{{commit}}"],
        cwd=repo,
        check=False,
    )
    sha = result.stdout.strip()
    return sha if result.returncode == 0 and _FULL_SHA.match(sha) else None


def rename_branch(repo: Path, old: str, new: str) -> None:
    git(["branch", "-m", "--", old, new], cwd=repo)


def point_branch(repo: Path, branch: str, sha: str) -> None:
    """Move `branch` to `sha` (creating it), without touching any working tree."""
    git(["update-ref", "--", f"refs/heads/{branch}", sha], cwd=repo)


def switch_branch(worktree: Path, branch: str) -> None:
    """Attach the worktree's HEAD to `branch`, keeping uncommitted changes."""
    require_work_tree(worktree, "switch the branch of")
    git(["symbolic-ref", "HEAD", f"refs/heads/{branch}"], cwd=worktree)


def git_dir(worktree: Path) -> Path:
    """The absolute git dir of a worktree (for a linked one, <main>/.git/worktrees/<name>)."""
    return Path(git(["rev-parse", "--absolute-git-dir"], cwd=worktree).stdout.rstrip("\n"))


def common_dir(repo: Path) -> Path:
    """The absolute git dir shared by all worktrees of the repository."""
    out = git(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=repo).stdout
    return Path(out.rstrip("\n"))


def head_sha(worktree: Path) -> str:
    """The full sha HEAD points at."""
    return git(["rev-parse", "--verify", "HEAD^{commit}"], cwd=worktree).stdout.strip()


def is_dirty(worktree: Path) -> bool:
    """True when the worktree has staged, unstaged or untracked (not ignored) changes."""
    result = git(
        [
            "--no-optional-locks",
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=normal",
            "--ignore-submodules=dirty",
        ],
        cwd=worktree,
    )
    return result.stdout != ""


def changed_paths(worktree: Path, base_sha: str) -> list[str]:
    """Files that differ from `base_sha`: committed, staged, unstaged and untracked, sorted."""
    sha = _require_sha(worktree, base_sha)
    tracked = git(
        ["diff", "--name-only", "-z", "--no-renames", "--no-relative", *_SAFE_DIFF, sha, "--"],
        cwd=worktree,
    ).stdout
    return sorted({*_split_z(tracked), *_untracked(worktree)})


def ignored_files(
    worktree: Path, *, wanted: Callable[[str], bool], descend: Callable[[str], bool]
) -> list[str]:
    """Untracked files git ignores (.gitignore, info/exclude, core.excludesFile) that `wanted`
    accepts, sorted; `changed_paths` never lists them, yet a test runner reads them.

    git names a wholly ignored folder once; it is walked only where `descend(folder)` allows
    (symlinks are not followed), so node_modules or a virtualenv is skipped, not read.
    """
    out = git(
        [
            "ls-files", "--others", "--ignored", "--exclude-standard", "--directory",
            "-z", "--full-name", "--", ":/",
        ],
        cwd=worktree,
    ).stdout  # fmt: skip
    top = Path(git(["rev-parse", "--show-toplevel"], cwd=worktree).stdout.rstrip("\n"))
    found: list[str] = []
    for entry in _split_z(out):
        if not entry.endswith("/"):
            if wanted(entry):
                found.append(entry)
            continue
        folder = entry.rstrip("/")
        if not descend(folder):
            continue
        for root, dirs, files in os.walk(top / folder):
            relative = Path(root).relative_to(top).as_posix()
            dirs[:] = [d for d in dirs if descend(f"{relative}/{d}")]
            found += (f"{relative}/{name}" for name in files if wanted(f"{relative}/{name}"))
    return sorted(found)


def tracked_content_changes(
    worktree: Path, base_sha: str, *, wanted: Callable[[str], bool]
) -> list[str]:
    """Files of `base_sha` that `wanted` accepts whose working-tree content differs, sorted.

    Judged by hashing the files, not through the index: an entry marked assume-unchanged or
    skip-worktree, or with forged stat data, hides an edit from `git diff`, never from this.
    """
    sha = _require_sha(worktree, base_sha)
    out = git(["ls-tree", "-r", "-z", "--full-tree", sha], cwd=worktree).stdout
    top = Path(git(["rev-parse", "--show-toplevel"], cwd=worktree).stdout.rstrip("\n"))
    changed: list[str] = []
    suspects: dict[str, str] = {}
    for record in _split_z(out):
        meta, _, path = record.partition("\t")
        mode, kind, blob = meta.split(" ")
        if kind != "blob" or not wanted(path):
            continue  # submodules have no content here
        if blob in _worktree_blobs(top / path, symlink=mode == "120000", length=len(blob)):
            continue
        plain = mode != "120000" and "\n" not in path and (top / path).is_file()
        if plain and not (top / path).is_symlink():
            suspects[path] = blob
        else:
            changed.append(path)
    if suspects:
        # Content a clean filter or attribute rewrites on the way in (Git LFS, ident,
        # working-tree-encoding) hashes differently raw: ask git, which applies them. Filters
        # from the repository's own config stay off (see `git`), and a failure counts as changed.
        try:
            hashed = git(
                ["hash-object", "--stdin-paths"],
                cwd=top,
                input="".join(f"{path}\n" for path in suspects),
            ).stdout.split()
        except GitError:
            hashed = []
        if len(hashed) != len(suspects):
            hashed = [""] * len(suspects)
        changed += (
            path for (path, blob), got in zip(suspects.items(), hashed, strict=True) if got != blob
        )
    return sorted(changed)


def _worktree_blobs(path: Path, *, symlink: bool, length: int) -> set[str]:
    """The blob ids `path`'s content (a link's target, for a symlink) may stand for; empty
    when it is missing or of another kind than the commit's entry."""
    import hashlib

    try:
        if symlink:
            data = os.readlink(path).encode("utf-8", "surrogateescape")
        elif path.is_symlink() or not path.is_file():
            return set()  # a link or folder where the commit has a file
        else:
            data = path.read_bytes()
    except OSError:
        return set()
    digest = hashlib.sha1 if length == 40 else hashlib.sha256
    forms = {data}
    if not symlink and b"\r\n" in data:
        # A checkout that converts line endings (core.autocrlf, eol attributes) is no edit.
        forms.add(data.replace(b"\r\n", b"\n"))
    return {digest(b"blob %d\0" % len(form) + form).hexdigest() for form in forms}


def diff_text(worktree: Path, base_sha: str, max_bytes: int) -> str:
    """The patch from `base_sha` to the working tree, untracked files as added, truncated."""
    sha = _require_sha(worktree, base_sha)
    # Far bigger files would be cut anyway: git labels them binary instead of diffing them.
    threshold = f"core.bigFileThreshold={max(4 * max_bytes, 1 << 20)}"
    with _untracked_as_added(worktree) as env:
        out = git(
            ["-c", threshold, *_READABLE, "diff", "--no-relative", *_SAFE_DIFF, sha, "--"],
            cwd=worktree,
            extra_env=env,
        ).stdout
    return _truncate(_printable(out), max_bytes)


def diff_stat(worktree: Path, base_sha: str) -> str:
    """`git diff --stat` from `base_sha` to the working tree, untracked files as added."""
    sha = _require_sha(worktree, base_sha)
    with _untracked_as_added(worktree) as env:
        out = git(
            [*_READABLE, "diff", "--stat=200", "--no-relative", *_SAFE_DIFF, sha, "--"],
            cwd=worktree,
            extra_env=env,
        ).stdout
    return _printable(out)


def commit_all(
    worktree: Path,
    message: str,
    *,
    author_name: str,
    author_email: str,
    exclude: Sequence[str] = (),
) -> str | None:
    """Stage everything (deletions too) but `exclude`, and commit; None when nothing changed."""
    git(["add", "-A"], cwd=worktree)
    if exclude:
        # Files loopctl placed itself (copied .env files, setup output) are not the task's work.
        git(["reset", "--quiet", "--", *exclude], cwd=worktree, check=False)
    staged = git(["diff", "--cached", "--quiet", *_SAFE_DIFF], cwd=worktree, check=False)
    if staged.returncode == 0:
        return None
    if staged.returncode != 1:
        raise GitError(f"git diff failed: {_first_line(staged)}")
    identity = {
        "GIT_AUTHOR_NAME": author_name,
        "GIT_AUTHOR_EMAIL": author_email,
        "GIT_COMMITTER_NAME": author_name,
        "GIT_COMMITTER_EMAIL": author_email,
    }
    git(
        [
            "-c", f"user.name={author_name}",
            "-c", f"user.email={author_email}",
            "commit", "--quiet", "--no-verify", "--no-gpg-sign", "--file=-",
        ],
        cwd=worktree,
        input=message,
        extra_env=identity,
    )  # fmt: skip
    return head_sha(worktree)


def diff_stat_between(repo: Path, base_sha: str, sha: str) -> str:
    """`git diff --stat` between two commits (no working tree involved)."""
    a, b = _require_sha(repo, base_sha), _require_sha(repo, sha)
    out = git([*_READABLE, "diff", "--stat=200", *_SAFE_DIFF, a, b, "--"], cwd=repo).stdout
    return _printable(out)


def patch_between(repo: Path, base_sha: str, sha: str, *, timeout: float = 120) -> bytes:
    """The patch from `base_sha` to `sha`, byte for byte as `git apply` takes it.

    Bytes, not text: a file's CR LF endings or invalid UTF-8 must reach `git apply` unchanged.
    Prefixes are explicit so that a repository's diff.noPrefix or diff.mnemonicPrefix cannot
    make a patch `git apply` rejects; `--binary` carries binary files whole.
    """
    a, b = _require_sha(repo, base_sha), _require_sha(repo, sha)
    args = [
        "diff", "--binary", "--full-index", "--no-relative", "--src-prefix=a/",
        "--dst-prefix=b/", *_SAFE_DIFF, a, b, "--",
    ]  # fmt: skip
    argv, env = _hardened(args, repo, None)
    try:
        done = subprocess.run(
            argv,
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git diff failed: {exc}") from exc
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", "replace")
        raise GitError(f"git diff failed: {_first_line(GitResult(done.returncode, '', stderr))}")
    return done.stdout


def remote_branch_sha(repo: Path, remote: str, branch: str, *, timeout: float = 120) -> str | None:
    """The commit `branch` points at on `remote`, or None if absent.

    `remote` is a URL or path, best one read before any agent ran (loopctl.remotes); a remote's
    name is resolved to its fetch URL now. So for every network command here.
    """
    wanted = f"refs/heads/{branch}"
    url = _url_of(repo, remote, push=False)
    result = _network_git(
        ["ls-remote", "--heads", _UPLOAD_PACK, "--", url, wanted],
        cwd=repo,
        url=url,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise GitError(f"cannot read remote {_no_userinfo(url)!r}: {_first_line(result)}")
    for line in result.stdout.splitlines():
        sha, _, ref = line.partition("\t")
        if ref == wanted and _FULL_SHA.match(sha):
            return sha
    return None


def fetch_refs(repo: Path, remote: str, refspecs: Sequence[str], *, timeout: float = 300) -> None:
    """Fetch `refspecs` (each `+src:dst`, built by loopctl) from `remote`; no tags or submodules."""
    url = _url_of(repo, remote, push=False)
    result = _network_git(
        [
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--recurse-submodules=no",
            _UPLOAD_PACK,
            "--",
            url,
            *refspecs,
        ],
        cwd=repo,
        url=url,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise GitError(f"git fetch from {_no_userinfo(url)!r} failed: {_first_line(result)}")


def valid_branch_name(repo: Path, name: str) -> bool:
    """Whether git accepts `name` as a branch name (checked as refs/heads/NAME: never an option)."""
    if not name or "\0" in name or name.startswith("-"):
        return False
    result = git(["check-ref-format", f"refs/heads/{name}"], cwd=repo, check=False)
    return result.returncode == 0


def push_commit(
    repo: Path, remote: str, sha: str, branch: str, *, expect: str | None, timeout: float = 300
) -> None:
    """Point `branch` on `remote` at `sha`, only if it still points at `expect` (None: absent).

    The lease makes the push exact: it replaces what loopctl saw on the remote and nothing a
    person pushed in between. No hook runs (hooksPath is /dev/null, and --no-verify).
    """
    sha = _require_sha(repo, sha)
    target = f"refs/heads/{branch}"
    lease = f"--force-with-lease={target}:{expect or ''}"
    url = _url_of(repo, remote, push=True)
    result = _network_git(
        ["push", "--porcelain", "--no-verify", _RECEIVE_PACK, lease, "--", url, f"{sha}:{target}"],
        cwd=repo,
        url=url,
        timeout=timeout,
    )
    if result.returncode == 0:
        return
    # Porcelain marks a refused ref with "!" and gives git's reason in brackets.
    reasons = [
        line.split("\t")[-1].strip()
        for line in result.stdout.splitlines()
        if line.startswith("!\t")
    ]
    why = "; ".join(reasons) or _first_line(result)
    raise GitError(f"git push to {_no_userinfo(url)!r} failed: {_no_userinfo(why)}")


def fast_forward(repo: Path, branch: str, sha: str) -> bool:
    """Move local `branch` forward to `sha`; False when it already contains `sha`.

    Refuses anything but a fast-forward. A branch checked out in a working tree is moved with
    `merge --ff-only` there, so that checkout's files follow; otherwise only the ref moves.
    """
    sha = _require_sha(repo, sha)
    head = branch_head(repo, branch)
    if head is None:
        raise GitError(f"there is no local branch {branch!r} to fast-forward")
    if head == sha or is_ancestor(repo, sha, head):
        return False
    if not is_ancestor(repo, head, sha):
        raise GitError(
            f"{branch} has moved on to {head[:12]}: {sha[:12]} is not a fast-forward of it"
            " (rebase the task branch, or merge by hand)"
        )
    for entry in worktree_list(repo):
        if entry.branch == branch and entry.path.exists():
            git(["merge", "--ff-only", "--quiet", sha], cwd=entry.path)
            return True
    git(["update-ref", "--", f"refs/heads/{branch}", sha, head], cwd=repo)
    return True


# --- plumbing for data branches (state sync): no working tree, index or HEAD is involved ---------


def fetch_branch(repo: Path, remote: str, branch: str, into: str, *, timeout: float = 300) -> str:
    """Fetch `branch` of `remote` into the private ref `into` (forced); return its commit."""
    url = _url_of(repo, remote, push=False)
    result = _network_git(
        [
            "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
            _UPLOAD_PACK, "--", url, f"+refs/heads/{branch}:{into}",
        ],
        cwd=repo,
        url=url,
        timeout=timeout,
    )  # fmt: skip
    if result.returncode != 0:
        raise GitError(f"cannot fetch {branch} from {_no_userinfo(url)!r}: {_first_line(result)}")
    return resolve_commit(repo, into)


def remote_url(repo: Path, remote: str) -> str | None:
    """The fetch URL of a configured remote, without any user:password part; None if unset."""
    url = _configured_url(repo, remote, push=False)
    return _URL_USERINFO.sub("", url) if url else None


def remote_urls(repo: Path, remote: str) -> tuple[str | None, str | None]:
    """(push URL, fetch URL) where `remote` leads now, user:password parts included.

    For a configured remote these are what git itself would use (pushurl, insteadOf and
    pushInsteadOf applied); a value that is itself a URL or path is both; None when neither.
    """
    if "\0" in remote or not remote or remote.startswith("-"):
        return None, None
    if _is_url(remote):
        return remote, remote
    return _configured_url(repo, remote, push=True), _configured_url(repo, remote, push=False)


def display_url(url: str) -> str:
    """`url` with any user:password part masked: fit for messages and the event log."""
    return _no_userinfo(url)


def read_blob(repo: Path, commit: str, path: str) -> str | None:
    """The content of `path` in `commit` (surrogate-escaped text), or None when it has none."""
    sha = _require_sha(repo, commit)
    # cat-file never applies filters: what comes back is the stored bytes.
    result = git(["cat-file", "blob", f"{sha}:{path}"], cwd=repo, check=False)
    return result.stdout if result.returncode == 0 else None


def paths_in_commit(repo: Path, commit: str, paths: Sequence[str]) -> set[str]:
    """Which of `paths` (repository-relative files) `commit` holds."""
    if not paths:
        return set()
    sha = _require_sha(repo, commit)
    # Literal pathspecs: a name with `*` or a leading `:(` is a file name, never a pattern.
    specs = [f":(literal){p}" for p in paths]
    out = git(["ls-tree", "-r", "-z", "--name-only", "--full-tree", sha, "--", *specs], cwd=repo)
    wanted = set(paths)
    return {name for name in _split_z(out.stdout) if name in wanted}


def is_ignored(repo: Path, path: str) -> bool:
    """Whether git ignores `path` (relative to `repo`) in `repo`'s working tree."""
    # --no-index: a tracked file that a pattern matches counts too.
    done = git(["check-ignore", "-q", "--no-index", "--", path], cwd=repo, check=False)
    return done.returncode == 0


def write_blob(repo: Path, content: str) -> str:
    """Store `content` as a blob (no filters) and return its sha."""
    out = git(["hash-object", "-w", "--no-filters", "--stdin"], cwd=repo, input=content).stdout
    return out.strip()


def write_tree(repo: Path, files: Mapping[str, str]) -> str:
    """A tree of regular files at the top level (name -> blob sha), built without an index."""
    for name in files:
        if not name or "/" in name or "\t" in name or "\n" in name or name in (".", ".."):
            raise ValueError(f"not a top-level file name: {name!r}")
    listing = "".join(f"100644 blob {sha}\t{name}\n" for name, sha in sorted(files.items()))
    return git(["mktree"], cwd=repo, input=listing).stdout.strip()


def tree_of(repo: Path, commit: str) -> str:
    """The sha of the tree a commit records."""
    sha = _require_sha(repo, commit)
    return git(["rev-parse", "--verify", f"{sha}^{{tree}}"], cwd=repo).stdout.strip()


def commit_tree(
    repo: Path,
    tree: str,
    parents: Sequence[str],
    message: str,
    *,
    author_name: str,
    author_email: str,
) -> str:
    """A commit of `tree` on `parents`; no ref, index or working tree changes."""
    identity = {
        "GIT_AUTHOR_NAME": author_name,
        "GIT_AUTHOR_EMAIL": author_email,
        "GIT_COMMITTER_NAME": author_name,
        "GIT_COMMITTER_EMAIL": author_email,
    }
    args = ["commit-tree", "--no-gpg-sign"]
    for parent in parents:
        args += ["-p", _require_sha(repo, parent)]
    if not _FULL_SHA.match(tree):
        raise GitError(f"not a tree sha: {tree!r}")
    args += ["-F", "-", tree]
    return git(args, cwd=repo, input=message, extra_env=identity).stdout.strip()


# --- running git -------------------------------------------------------------------------------


def _is_url(remote: str) -> bool:
    # A remote's name is a single word; anything with a slash or colon git reads as a URL or a
    # path (unless config has a remote of that very name, which _refuse_steering rejects).
    return "/" in remote or ":" in remote


def _configured_url(repo: Path, remote: str, *, push: bool) -> str | None:
    if "\0" in remote or not remote or remote.startswith("-"):
        return None
    which = ["--push"] if push else []
    result = git(["remote", "get-url", *which, "--", remote], cwd=repo, check=False)
    url = result.stdout.strip()
    return url if result.returncode == 0 and url else None


def _url_of(repo: Path, remote: str, *, push: bool) -> str:
    """The URL a network command goes to: `remote` itself, or the URL its name leads to now."""
    if "\0" in remote or not remote or remote.startswith("-"):
        raise GitError(f"not a remote: {remote!r}")
    if _is_url(remote):
        return remote
    url = _configured_url(repo, remote, push=push)
    if url is None:
        raise GitError(f"no remote named {remote!r} in {repo} (`git remote -v` lists them)")
    return url


def _network_git(args: list[str], *, cwd: Path, url: str, timeout: float) -> GitResult:
    """Run a network command against `url` (never a name config could repoint)."""
    env = {**_base_env(), **_work_tree_env(cwd)}
    _secure_network_env(env, cwd, url)
    return _run(["git", *_HARDENING, *args], cwd=cwd, env=env, timeout=timeout, input=None)


def _secure_network_env(env: dict[str, str], cwd: Path, url: str) -> None:
    """Give a network command the credential its transport needs and the user's own programs
    (ssh command, askpass, credential helpers, proxy), never ones the repository's config names.

    Refuses (GitError) when that config would steer the command somewhere else than `url`.
    """
    entries = _config_entries(cwd)
    trusted = [(key, value) for scope, key, value in entries if scope in _TRUSTED_SCOPES]
    planted = [(key, value) for scope, key, value in entries if scope in _PLANTABLE_SCOPES]
    transport = _transport(url)
    _refuse_steering(url, transport, planted, trusted)
    for name in _TRANSPORT_CREDENTIALS.get(transport, ()):
        if name in os.environ:
            env[name] = os.environ[name]
    # The environment outranks config: core.sshCommand and core.askPass from the repository
    # never run. Precedence among the user's own settings is git's.
    env["GIT_SSH_COMMAND"] = _user_ssh_command(trusted)
    env["GIT_ASKPASS"] = _user_askpass(trusted)
    if "GIT_SSH_VARIANT" in os.environ:
        env["GIT_SSH_VARIANT"] = os.environ["GIT_SSH_VARIANT"]
    if not any(key == "core.gitproxy" for key, _ in planted):
        del env["GIT_PROXY_COMMAND"]  # the user's own core.gitProxy applies as configured
    pins: list[tuple[str, str]] = []
    if any(_is_helper_key(key) for key, _ in planted):
        # Command scope is read last: clear the helper list, then rebuild it from the user's
        # own config in its order (an empty value there is a reset too).
        pins.append(("credential.helper", ""))
        pins += [
            (key, value) for key, value in trusted if _is_helper_key(key) and value is not None
        ]
    if any(key == "core.alternaterefscommand" for key, _ in planted):
        own = [value for key, value in trusted if key == "core.alternaterefscommand" and value]
        pins.append(("core.alternateRefsCommand", own[-1] if own else "true"))
    env.update(_config_env(pins))


def _refuse_steering(
    url: str,
    transport: str,
    planted: Sequence[tuple[str, str | None]],
    trusted: Sequence[tuple[str, str | None]],
) -> None:
    for key, value in planted:
        section, _, rest = key.partition(".")
        subsection, _, name = rest.rpartition(".")
        if section == "url" and name in _REWRITES and value and url.startswith(value):
            why = f"url.{subsection}.{_REWRITES[name]} rewrites it"
        elif section == "remote" and subsection == url:
            why = f"a remote named after that URL ({key}) takes it over"
        elif section == "http" and transport == "http" and name in _HTTP_TRUST:
            why = f"{key} changes how it is reached"
        elif key == "core.gitproxy" and any(k == "core.gitproxy" for k, _ in trusted):
            why = "core.gitProxy names a proxy program"
        else:
            continue
        raise GitError(
            f"refusing to reach {_no_userinfo(url)}: the repository's own git config (which an"
            f" agent can write) says {_no_userinfo(why)}; remove that from .git/config (or the"
            " file it includes), or set it in your global git config"
        )


def _transport(url: str) -> str:
    lower = url.lower()
    if lower.startswith(("http://", "https://")):
        return "http"
    if lower.startswith(("ssh://", "git+ssh://", "ssh+git://")) or _SCP_LIKE.match(url):
        return "ssh"
    return "other"


def _is_helper_key(key: str) -> bool:
    return key.startswith("credential.") and key.endswith(".helper")


def _user_ssh_command(trusted: Sequence[tuple[str, str | None]]) -> str:
    if "GIT_SSH_COMMAND" in os.environ:
        return os.environ["GIT_SSH_COMMAND"]
    own = [value for key, value in trusted if key == "core.sshcommand" and value]
    if own:
        return own[-1]
    if os.environ.get("GIT_SSH"):
        return shlex.quote(os.environ["GIT_SSH"])
    return "ssh"


def _user_askpass(trusted: Sequence[tuple[str, str | None]]) -> str:
    if "GIT_ASKPASS" in os.environ:
        return os.environ["GIT_ASKPASS"]
    own = [value for key, value in trusted if key == "core.askpass" and value is not None]
    if own:
        return os.path.expanduser(own[-1])
    return os.environ.get("SSH_ASKPASS", "")


def _no_userinfo(text: str) -> str:
    """A remote URL's user:password part never goes into a message (or from there, the log)."""
    return _URL_USERINFO.sub("***@", text)


def _base_env() -> dict[str, str]:
    # No secret reaches git: whatever it might run despite the hardening gets none of them.
    env = {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith("GIT_") or k in _KEPT_GIT_VARS) and not is_secret_name(k)
    }
    env.update(_PINNED_ENV)
    env["GIT_TERMINAL_PROMPT"] = "0"
    # loopctl parses some of git's words (a lock reason, error lines): keep them untranslated.
    env["LC_ALL"] = "C"
    return env


def _run(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float, input: str | None
) -> GitResult:
    try:
        completed = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            encoding="utf-8",
            errors="surrogateescape",
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        if shutil.which("git", path=env.get("PATH")) is None:
            raise GitError("git is not installed or not on PATH") from exc
        raise GitError(f"cannot run git in {cwd}: the folder does not exist") from exc
    except NotADirectoryError as exc:
        raise GitError(f"cannot run git in {cwd}: not a folder") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {_subcommand(argv[1:])} timed out after {timeout:g}s") from exc
    return GitResult(completed.returncode, completed.stdout, completed.stderr)


def _work_tree_env(cwd: Path) -> dict[str, str]:
    """GIT_WORK_TREE for a command run in a linked worktree: the folder holding its `.git` file.

    git takes a working tree from `core.worktree` when config sets one, and a linked worktree's
    own `config.worktree` (read once `extensions.worktreeConfig` is on, as `git sparse-checkout`
    sets it) sits in its admin folder, where the agent writes. Pointed at the main checkout, it
    would make loopctl snapshot, clean or reset the user's files. `-c core.worktree` does not
    override it (git reads the repository's own files for that); the environment does.
    The main checkout (a `.git` folder) keeps whatever its user configured.
    """
    folder = Path(os.path.realpath(cwd))
    for top in (folder, *folder.parents):
        dot_git = top / ".git"
        if dot_git.is_file():
            return {"GIT_WORK_TREE": str(top)}
        if dot_git.is_dir() or _is_git_dir(top):
            return {}
    return {}


def _is_git_dir(folder: Path) -> bool:
    """Whether `folder` is itself a git dir (a bare repository, or inside `.git`): git's own
    discovery stops there, and so does `_work_tree_env`."""
    return (folder / "HEAD").is_file() and (folder / "objects").is_dir()


def _filter_neutralisers(cwd: Path, index: str | None = None) -> dict[str, str]:
    """Environment that blanks every content program (filter, textconv, diff or merge driver)
    the repository's own config names, or the own config of any submodule in it."""
    # A driver from repository config (local or worktree scope, or a file either includes)
    # could be agent-planted, and `.gitattributes` is in the agent's hands. An empty command
    # disables a filter; a filter marked `required` then makes git fail loudly rather than
    # stage unfiltered content. Diffs also pass --no-ext-diff and --no-textconv.
    keys = sorted(
        {key for scope, key, _ in _config_entries(cwd) if scope in _PLANTABLE_SCOPES}
        | _submodule_config_keys(cwd, index)
    )
    pins = [(key, "") for key in keys if _DRIVER_KEY.match(key)]
    # A partial clone fetches a missing object through the remote config names, running its
    # upload-pack program: a second guard next to GIT_NO_LAZY_FETCH. The program runs here only
    # over the local transport (ssh is pinned to `false`), and git keeps the *first*
    # remote.<name>.uploadpack it reads ("more than one uploadpack given, using the first"), so
    # a command-scope value cannot override the repository's: refuse that transport instead.
    if any(_UPLOAD_PACK_KEY.match(key) for key in keys):
        pins.append(("protocol.file.allow", "never"))
    return _config_env(pins)


def _submodule_config_keys(cwd: Path, index: str | None) -> set[str]:
    """Keys of the own config (local and worktree scope) of every populated submodule git
    would ask whether it is dirty, nested ones included.

    `git add` always asks (it ignores diff.ignoreSubmodules), and `git status` does when a
    `.gitmodules` the agent wrote says `ignore = none`: git runs `git status` inside each
    gitlink of the index whose folder holds a `.git` (a registered submodule under
    .git/modules, or a repository the agent made itself), with that repository's own config,
    both agent-writable. That child git inherits the command-scope pins (git passes
    GIT_CONFIG_PARAMETERS and GIT_CONFIG_COUNT on to it), so blanking these keys in the
    superproject's command blanks them there too.
    """
    keys: set[str] = set()
    # As git runs its child: GIT_DIR=.git in the submodule's folder, no index of the parent's.
    child_env = {**_base_env(), "GIT_DIR": ".git"}
    pending = _gitlink_folders(cwd, {**_base_env(), **_work_tree_env(cwd)}, index)
    seen: set[Path] = set()
    while pending:
        folder = pending.pop()
        if folder in seen or not os.path.lexists(folder / ".git"):
            continue  # an unpopulated submodule: git asks nothing of it
        seen.add(folder)
        # A `.git` git cannot read makes git's own check die too: failing here loses nothing.
        entries = _config_entries(folder, child_env)
        keys |= {key for scope, key, _ in entries if scope in _PLANTABLE_SCOPES}
        pending.extend(_gitlink_folders(folder, child_env, None))
    return keys


def _gitlink_folders(cwd: Path, env: dict[str, str], index: str | None) -> list[Path]:
    """The folders of the gitlinks (mode 160000) in the index of the repository at `cwd`."""
    if index is not None:
        env = {**env, "GIT_INDEX_FILE": index}
    top = _run(
        ["git", *_HARDENING, "rev-parse", "--show-toplevel"],
        cwd=cwd, env=env, timeout=30, input=None,
    )  # fmt: skip
    if top.returncode != 0:
        if "must be run in a work tree" in top.stderr or "not a git repository" in top.stderr:
            return []  # no working tree (a bare repository, a git dir, no repository yet)
        raise GitError(f"cannot find the working tree of {cwd}: {_first_line(top)}")
    staged = _run(
        ["git", *_HARDENING, "ls-files", "--stage", "-z", "--full-name", "--", ":(top)"],
        cwd=cwd, env=env, timeout=60, input=None,
    )  # fmt: skip
    if staged.returncode != 0:
        raise GitError(f"cannot list the index in {cwd}: {_first_line(staged)}")
    root = Path(top.stdout.rstrip("\n"))
    folders: list[Path] = []
    for record in _split_z(staged.stdout):
        info, _, path = record.partition("\t")
        if info.startswith("160000 "):
            folders.append(Path(os.path.realpath(root / path)))
    return folders


def _config_entries(
    cwd: Path, env: dict[str, str] | None = None
) -> list[tuple[str, str, str | None]]:
    """Every config entry git sees in `cwd` as (scope, key, value), includes expanded."""
    # Failing to list them fails the command (no silent fallback to running what they name).
    listed = _run(
        ["git", *_HARDENING, "config", "--list", "--show-scope", "--null"],
        cwd=cwd,
        env=env if env is not None else {**_base_env(), **_work_tree_env(cwd)},
        timeout=30,
        input=None,
    )
    if listed.returncode != 0:
        raise GitError(f"cannot read the git config in {cwd}: {_first_line(listed)}")
    fields = listed.stdout.split("\0")
    entries: list[tuple[str, str, str | None]] = []
    for scope, record in zip(fields[::2], fields[1::2], strict=False):
        key, newline, value = record.partition("\n")
        entries.append((scope, key, value if newline else None))
    return entries


def _config_env(pins: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Command-scope config as environment: GIT_CONFIG_KEY_n carries any key exactly, even a
    driver or URL name containing "=", which `-c` would split."""
    env = {"GIT_CONFIG_COUNT": str(len(pins))} if pins else {}
    for i, (key, value) in enumerate(pins):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _subcommand(args: Sequence[str]) -> str:
    at = _subcommand_at(args)
    return args[at] if at is not None else "command"


def _subcommand_at(args: Sequence[str]) -> int | None:
    skip = False
    for index, arg in enumerate(args):
        if skip:
            skip = False
        elif arg in ("-c", "-C"):
            skip = True
        elif not arg.startswith("-") or arg == "--version":
            return index
    return None


def _content_free(subcommand: str, args: Sequence[str]) -> bool:
    """True when the command reads no working-tree file content (no filter can run)."""
    if subcommand == "worktree":
        at = _subcommand_at(args)
        action = args[at + 1] if at is not None and at + 1 < len(args) else ""
        return action in _CONTENT_FREE_WORKTREE
    return subcommand in _CONTENT_FREE


def _first_line(result: GitResult) -> str:
    """What went wrong, in one line: git's first `fatal:` or `error:` line, else its first line
    that is not a hint (GIT_GRAFT_FILE alone makes git print a deprecation hint first)."""
    lines = [line.strip() for line in _printable(result.stderr).splitlines()]
    lines = [line for line in lines if line and not line.startswith("hint:")]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line.removeprefix(prefix)
    return lines[0] if lines else f"exit status {result.returncode}"


# --- helpers for the queries -------------------------------------------------------------------


def _require_sha(repo: Path, ref: str) -> str:
    return ref if _FULL_SHA.match(ref) else resolve_commit(repo, ref)


def _split_z(out: str) -> list[str]:
    return [item for item in out.split("\0") if item]


def _untracked(worktree: Path) -> list[str]:
    out = git(
        ["ls-files", "--others", "--exclude-standard", "-z", "--full-name", "--", ":/"],
        cwd=worktree,
    ).stdout
    return _split_z(out)


@contextlib.contextmanager
def _untracked_as_added(worktree: Path) -> Iterator[dict[str, str]]:
    """Environment for a diff that shows untracked files as added, leaving the index alone."""
    # A nested repository is listed as "dir/"; it has no file content to show.
    untracked = [name for name in _untracked(worktree) if not name.endswith("/")]
    if not untracked:
        yield {}
        return
    # Intent-to-add entries go into a copy of the index; the worktree's own index is untouched.
    index = Path(git(["rev-parse", "--git-path", "index"], cwd=worktree).stdout.rstrip("\n"))
    index = index if index.is_absolute() else worktree / index
    with tempfile.TemporaryDirectory(prefix="loopctl-index-") as tmp:
        copy = Path(tmp) / "index"
        if index.is_file():
            # copy2 keeps the index's mtime: git's "racily clean" check compares file mtimes
            # with it, and a fresh mtime would hide an edit made in the same second as a
            # checkout (same size, same mtime second), leaving it out of the diff.
            shutil.copy2(index, copy)
        env = {"GIT_INDEX_FILE": str(copy)}
        # ":(top,literal)" keeps names like "*" or ":(exclude)x" from acting as pathspec magic.
        git(
            ["add", "--intent-to-add", "--pathspec-from-file=-", "--pathspec-file-nul"],
            cwd=worktree,
            input="".join(f":(top,literal){name}\0" for name in untracked),
            extra_env=env,
        )
        yield env


def _parse_worktrees(lines: list[str]) -> list[WorktreeEntry]:
    entries: list[WorktreeEntry] = []
    record: dict[str, str] = {}
    for line in [*lines, ""]:
        if line:
            key, _, value = line.partition(" ")
            record[key] = value
            continue
        if "worktree" in record:
            branch = record.get("branch")
            entries.append(
                WorktreeEntry(
                    path=Path(record["worktree"]),
                    head=record.get("HEAD", ""),
                    branch=branch.removeprefix("refs/heads/") if branch else None,
                    detached="detached" in record,
                    locked="locked" in record,
                    prunable="prunable" in record,
                    lock_reason=record.get("locked", ""),
                )
            )
        record = {}
    return entries


def _printable(text: str) -> str:
    # Undecodable bytes become U+FFFD so the text can go into logs, JSON and prompts.
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _truncate(text: str, max_bytes: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    kept = data[: max(max_bytes, 0)].decode("utf-8", "ignore")
    return kept + _TRUNCATED.format(limit=max_bytes)


# --- snapshots and refs for invariant 12: commit exactly what was checked ------------------------

# Replacement refs would let a planted refs/replace/* swap the commits loopctl reads.
_NO_REPLACE = {"GIT_NO_REPLACE_OBJECTS": "1"}


def snapshot_tree(
    worktree: Path, parent: str, *, exclude: Sequence[str] = (), seed: Path | None = None
) -> str:
    """The worktree's files as a tree object, built in a private index started from `parent`.

    Untracked files are included and ignored ones are not (as `git add -A`); each path in
    `exclude` keeps its version in `parent` (absent there: absent here). The worktree's own index
    is never read: an agent can set flags in it (assume-unchanged, skip-worktree) that hide a
    changed file from `git add`.

    `seed`, when it exists, is an index of `parent` that loopctl took from a worktree it had
    just created (no flags, every file's stat data): starting from a copy of it, `git add`
    hashes only the files that changed instead of every file, with the same result.
    """
    sha = _require_sha(worktree, parent)
    require_work_tree(worktree, "snapshot")
    with tempfile.TemporaryDirectory(prefix="loopctl-snapshot-") as tmp:
        index = Path(tmp) / "index"
        env = {**_NO_REPLACE, "GIT_INDEX_FILE": str(index)}
        if seed is not None and seed.is_file():
            # copy2 keeps the index file's mtime, on which git's racy-clean check relies: an
            # entry as new as the index is re-read, not trusted by its stat data.
            shutil.copy2(seed, index)
        else:
            git(["read-tree", sha], cwd=worktree, extra_env=env)
        git(["add", "-A"], cwd=worktree, extra_env=env)
        if exclude:
            # ":(top,literal)" keeps names like "*" from acting as pathspec magic.
            git(
                ["reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul", sha],
                cwd=worktree,
                input="".join(f":(top,literal){name}\0" for name in exclude),
                extra_env=env,
            )
        return git(["write-tree"], cwd=worktree, extra_env=env).stdout.strip()


def tree_changes(repo: Path, old: str, new: str) -> list[str]:
    """Paths that differ between two trees (or commits), sorted."""
    for sha in (old, new):
        if not _FULL_SHA.match(sha):
            raise GitError(f"not an object sha: {sha!r}")
    out = git(
        ["diff-tree", "-r", "--name-only", "-z", "--no-renames", *_SAFE_DIFF, old, new, "--"],
        cwd=repo,
        extra_env=_NO_REPLACE,
    ).stdout
    return sorted(set(_split_z(out)))


def commit_snapshot(
    repo: Path,
    branch: str,
    tree: str,
    parent: str,
    message: str,
    *,
    author_name: str,
    author_email: str,
    date: str,
    expect: str | None,
) -> str:
    """Commit `tree` on `parent` and point `branch` at it, only if it still points at `expect`.

    `date` ("<unix seconds> +0000") makes the commit the same object when a resumed run makes
    it again; `expect` None means the branch must not exist.
    """
    if not _FULL_SHA.match(tree):
        raise GitError(f"not a tree sha: {tree!r}")
    parent_sha = _require_sha(repo, parent)
    identity = {
        **_NO_REPLACE,
        "GIT_AUTHOR_NAME": author_name,
        "GIT_AUTHOR_EMAIL": author_email,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": author_name,
        "GIT_COMMITTER_EMAIL": author_email,
        "GIT_COMMITTER_DATE": date,
    }
    sha = git(
        ["commit-tree", "--no-gpg-sign", "-p", parent_sha, "-F", "-", tree],
        cwd=repo,
        input=message,
        extra_env=identity,
    ).stdout.strip()
    if expect != sha:
        old = expect if expect is not None else "0" * len(sha)
        # --no-deref: a task branch an agent turned into a symbolic ref must not move its target.
        result = git(
            ["update-ref", "--no-deref", "--", f"refs/heads/{branch}", sha, old],
            cwd=repo,
            check=False,
        )
        if result.returncode != 0:
            raise GitError(
                f"{branch} moved while loopctl committed to it ({_first_line(result)});"
                " nothing was committed"
            )
    return sha


def seed_snapshot_index(worktree: Path, seed: Path, *, git_dir: Path | None = None) -> None:
    """Keep a copy of a just-created worktree's index as the seed of its snapshots (`git_dir`:
    the worktree's git dir when the caller knows it)."""
    if git_dir is not None:
        index = git_dir / "index"
    else:
        index = Path(
            git(
                ["rev-parse", "--path-format=absolute", "--git-path", "index"], cwd=worktree
            ).stdout.strip()
        )
    seed.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(index, seed)  # mtime kept: see snapshot_tree


def reset_index(worktree: Path, commit: str) -> None:
    """Make the worktree's index match `commit` (its files stay as they are)."""
    require_work_tree(worktree, "reset the index of")
    git(["read-tree", _require_sha(worktree, commit)], cwd=worktree, extra_env=_NO_REPLACE)


def commits_between(repo: Path, old: str, new: str, *, limit: int = 100) -> list[str]:
    """Commits reachable from `new` but not from `old`, newest first (at most `limit`)."""
    a, b = _require_sha(repo, old), _require_sha(repo, new)
    out = git(
        ["rev-list", f"--max-count={limit}", "--end-of-options", b, f"^{a}"],
        cwd=repo,
        extra_env=_NO_REPLACE,
    ).stdout
    return [line for line in out.split() if _FULL_SHA.match(line)]


def tree_of_commit(repo: Path, commit: str) -> str:
    """The tree `commit` records, replacement refs ignored."""
    sha = _require_sha(repo, commit)
    return git(
        ["rev-parse", "--verify", f"{sha}^{{tree}}"], cwd=repo, extra_env=_NO_REPLACE
    ).stdout.strip()


def ref_values(repo: Path) -> dict[str, str]:
    """Every ref of the repository (branches, tags, remote-tracking, notes, stash…) -> sha."""
    out = git(["for-each-ref", "--format=%(objectname) %(refname)"], cwd=repo).stdout
    values: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, name = line.partition(" ")
        if name:
            values[name] = sha
    return values


# --- recycled worktrees (loopctl.worktree_pool) ------------------------------------------------

# A recycled worktree's index is loopctl's own copy, so its stat data are trusted; these make
# sure git compares all of it (a maker cannot set a file's change time back) before it skips a
# file as unchanged.
_FULL_STAT = ("-c", "core.trustctime=true", "-c", "core.checkStat=default")


def recycle_checkout(
    worktree: Path, branch: str, base_sha: str, *, branch_is_new: bool | None = None
) -> None:
    """Put a recycled worktree on `branch` (made at `base_sha` when new), its files matching it.

    `reset --hard` rewrites only the files whose content or stat data differ from the index, so
    a worktree moved to a nearby commit costs the files that changed, not the whole tree.
    """
    ref = f"refs/heads/{branch}"
    sha = _require_sha(worktree, base_sha)
    require_work_tree(worktree, "check out")
    if branch_is_new is None:
        branch_is_new = not branch_exists(worktree, branch)
    if branch_is_new:
        # Created only if absent (the all-zero old value), so it is at `sha` once this returns.
        git(["update-ref", "--no-deref", "--", ref, sha, "0" * len(sha)], cwd=worktree)
        target = sha
    else:
        target = git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
            cwd=worktree,
            extra_env=_NO_REPLACE,
        ).stdout.strip()
    git(["symbolic-ref", "HEAD", ref], cwd=worktree)
    git(
        [
            *_FULL_STAT,
            *_PARALLEL_CHECKOUT,
            "reset",
            "--hard",
            "--quiet",
            _require_sha(worktree, target),
        ],
        cwd=worktree,
        extra_env=_NO_REPLACE,
    )


def clean_worktree(worktree: Path, keep: Sequence[str]) -> None:
    """Delete every untracked and ignored file (nested repositories too) except under `keep`."""
    excludes = [arg for name in keep for arg in ("-e", "/" + name.strip("/"))]
    require_work_tree(worktree, "clean")
    git(["clean", "-ffdxq", *excludes], cwd=worktree)


def tracked_under(repo: Path, commit: str, paths: Sequence[str]) -> set[str]:
    """Those of `paths` that `commit` tracks a file in (or at)."""
    if not paths:
        return set()
    out = git(
        [
            "ls-tree",
            "-r",
            "--name-only",
            "-z",
            _require_sha(repo, commit),
            "--",
            *(f":(top,literal){p.strip('/')}" for p in paths),
        ],
        cwd=repo,
        extra_env=_NO_REPLACE,
    ).stdout
    found = _split_z(out)
    return {
        p
        for p in paths
        if any(f == p.strip("/") or f.startswith(p.strip("/") + "/") for f in found)
    }


def status_outside(worktree: Path, skip: Sequence[str]) -> list[str]:
    """`git status` lines (untracked and ignored included) for everything outside `skip`."""
    out = git(
        [
            "status",
            "--porcelain=v1",
            "-z",
            "--ignored=traditional",
            "--untracked-files=all",
            "--no-renames",
            "--",
            ".",
            *(f":(top,exclude,literal){p.strip('/')}" for p in skip),
        ],
        cwd=worktree,
    ).stdout
    return sorted(_split_z(out))

"""What changed: a worktree's status, changed and ignored files, and diffs and patches, with no
external diff program or textconv driver run."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from loopctl.errors import GitError
from loopctl.git.command import _hardened, git
from loopctl.git.refs import _FULL_SHA, _NO_REPLACE, _require_sha
from loopctl.git.runner import GitResult, _first_line, _printable, _run_bytes, _split_z

# Diffs must not run external diff programs or textconv drivers a repository configures.
_SAFE_DIFF = ("--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=dirty")

# Diffs meant for people (and prompts) show non-ASCII names as they are.
_READABLE = ("-c", "core.quotePath=false")

_TRUNCATED = "\n[diff truncated at {limit} bytes]\n"


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


def is_ignored(repo: Path, path: str) -> bool:
    """Whether git ignores `path` (relative to `repo`) in `repo`'s working tree."""
    # --no-index: a tracked file that a pattern matches counts too.
    done = git(["check-ignore", "-q", "--no-index", "--", path], cwd=repo, check=False)
    return done.returncode == 0


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
    returncode, out, stderr = _run_bytes(argv, cwd=repo, env=env, timeout=timeout)
    if returncode != 0:
        raise GitError(f"git diff failed: {_first_line(GitResult(returncode, '', stderr))}")
    return out


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


def _truncate(text: str, max_bytes: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    kept = data[: max(max_bytes, 0)].decode("utf-8", "ignore")
    return kept + _TRUNCATED.format(limit=max_bytes)

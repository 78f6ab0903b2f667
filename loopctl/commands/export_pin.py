"""Which loopctl an exported job installs: exactly the code that wrote the file, never a bare
name from the package index (the name `loopctl` there belongs to another project, and any
unclaimed name can be claimed): a git URL pinned to a commit, a wheel URL pinned to its sha256,
or a path in the repository.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import tomllib
from pathlib import Path

import loopctl
from loopctl import git
from loopctl.commands.export import DIST_NAME
from loopctl.definitions.project import Project
from loopctl.errors import LoopctlError, UsageError

# --- installing loopctl itself ------------------------------------------------------------------

_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SHA256 = re.compile(r"sha256=([0-9a-f]{64})")
_NAMED = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[A-Za-z0-9_.,\s-]*\])?\s+@\s+(\S+)")
_SCP_URL = re.compile(r"(?:[^@/:\s]+@)?([^/:\s]+):(?!//)([^\s]+)")
_SSH_URL = re.compile(r"ssh://(?:[^@/\s]+@)?([^/:\s]+)(?::\d+)?/([^\s]+)")
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip")


def install_spec(project: Project, given: str | None) -> tuple[str, list[str]]:
    """What the generated `pip install` installs, pinned to exact code: (spec, warnings).

    `given` (--loopctl-spec) must itself be pinned; without it, the loopctl running now: `.`
    when it is the project's own checkout, else its clone's origin at HEAD, else the git commit
    or hashed archive pip recorded when installing it. Anything else is refused (exit 1).
    """
    if given is not None:
        problem = unpinned_reason(given)
        if problem:
            raise UsageError(f"--loopctl-spec {given!r} {problem}")
        return given.strip(), []
    package = Path(loopctl.__file__).resolve().parent
    checkout = _source_checkout(package)
    if checkout is not None:
        if checkout == project.root.resolve():
            return ".", []  # the job has this very checkout: install loopctl from it
        return _pin_checkout(checkout)
    recorded, how = _recorded_origin(package)
    if recorded is None:
        raise LoopctlError(
            f"cannot pin the loopctl this runs from ({how}) for the generated install step: pass"
            " --loopctl-spec 'git+https://…/loopctl.git@<full commit sha>' (or a wheel URL"
            " with #sha256=…); a bare package name is refused"
        )
    return recorded, []


def unpinned_reason(spec: str) -> str | None:
    """Why `spec` does not name exact code for pip (None when it does)."""
    text = spec.strip()
    named = _NAMED.fullmatch(text)
    if named:
        if _canonical(named.group(1)) != DIST_NAME:
            return f"names the distribution {named.group(1)!r}: loopctl's is {DIST_NAME!r}"
        text = named.group(3)
    if text == "." or (text.startswith("./") and ".." not in Path(text).parts):
        return None  # a folder of the checked-out repository
    url, _, fragment = text.partition("#")
    if url.startswith(("git+https://", "git+ssh://")):
        host_end = url.find("/", url.index("://") + 3)
        base, at, ref = url.rpartition("@")
        if host_end != -1 and at and len(base) > host_end and _FULL_SHA.fullmatch(ref):
            if not fragment or fragment.startswith("subdirectory="):
                return None
            return "has a URL fragment pip would not check: keep only #subdirectory=…"
        return "is not pinned: end the git URL with @<full commit sha>"
    if url.startswith("https://") and url.endswith(_ARCHIVE_SUFFIXES):
        if _SHA256.fullmatch(fragment):
            return None
        return "is not pinned: end the archive URL with #sha256=<its hash>"
    return (
        "is not pinned to exact code (a name on the package index can be claimed by anyone;"
        " `loopctl` there is another project): give 'git+https://…@<full commit sha>',"
        " 'https://….whl#sha256=<hash>' or a path in the repository such as '.'"
    )


def _source_checkout(package: Path) -> Path | None:
    """The top of the git clone the running loopctl package lives in (as its source), if any."""
    top = package.parent
    try:
        pyproject = tomllib.loads((top / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    name = pyproject.get("project", {}).get("name")
    if not isinstance(name, str) or _canonical(name) != DIST_NAME:
        return None
    if not git.is_git_repo(top) or git.toplevel(top).resolve() != top:
        return None
    return top


def _pin_checkout(top: Path) -> tuple[str, list[str]]:
    """`git+https://<origin>@<HEAD>` for a clone of loopctl, read with the hardened git helpers."""
    warnings: list[str] = []
    url = git.remote_url(top, "origin")
    if not url:
        raise LoopctlError(
            f"loopctl runs from the clone {top}, which has no remote 'origin' a job could"
            " install it from: add and push one, or pass --loopctl-spec SPEC pinned to a commit"
        )
    https = _https_url(url)
    if https is None:
        raise LoopctlError(
            f"loopctl's clone {top} has origin {git.display_url(url)!r}, which a job cannot"
            " install from: pass --loopctl-spec 'git+https://…@<full commit sha>'"
        )
    if https != url:
        warnings.append(
            f"loopctl's origin {url!r} is not https: the job installs it from {https!r}"
            " (pass --loopctl-spec if that is not reachable)"
        )
    sha = git.head_sha(top)
    if git.is_dirty(top):
        warnings.append(
            f"loopctl's clone {top} has uncommitted changes: the job installs commit"
            f" {sha[:12]} without them"
        )
    fetched = git.git(
        ["branch", "--remotes", "--contains", sha, "--format=%(refname)"], cwd=top, check=False
    )
    if fetched.returncode != 0 or not fetched.stdout.strip():
        warnings.append(
            f"loopctl's commit {sha[:12]} is on no branch fetched from a remote: push it, or the"
            " job cannot install it"
        )
    return f"git+{https}@{sha}", warnings


def _recorded_origin(package: Path) -> tuple[str | None, str]:
    """The pinned source pip recorded for this installed loopctl (PEP 610), or (None, why not)."""
    try:
        dist = importlib.metadata.distribution(DIST_NAME)
    except importlib.metadata.PackageNotFoundError:
        return None, f"{package} is neither a git clone of loopctl nor an installed {DIST_NAME}"
    installed = Path(str(dist.locate_file("loopctl/__init__.py")))
    if not installed.exists() or installed.resolve() != package / "__init__.py":
        return None, f"{package} is not where the installed {DIST_NAME} {dist.version} is"
    recorded = dist.read_text("direct_url.json")
    if not recorded:
        return None, f"{DIST_NAME} {dist.version} was installed from a package index"
    try:
        origin = json.loads(recorded)
    except json.JSONDecodeError:
        return None, f"{DIST_NAME}'s direct_url.json does not parse"
    url = str(origin.get("url", "")) if isinstance(origin, dict) else ""
    https = _https_url(url) if url else None
    vcs = origin.get("vcs_info") if isinstance(origin, dict) else None
    if isinstance(vcs, dict) and vcs.get("vcs") == "git":
        commit = str(vcs.get("commit_id", ""))
        if https and _FULL_SHA.fullmatch(commit):
            return f"git+{https}@{commit}", ""
        return None, f"it was installed from the git URL {url!r}, which a job cannot reach"
    archive = origin.get("archive_info") if isinstance(origin, dict) else None
    if isinstance(archive, dict):
        hashes = archive.get("hashes")
        digest = hashes.get("sha256") if isinstance(hashes, dict) else None
        if digest is None:
            legacy = _SHA256.fullmatch(str(archive.get("hash", "")))
            digest = legacy.group(1) if legacy else None
        if url.startswith("https://") and isinstance(digest, str) and _HEX64.fullmatch(digest):
            return f"{url}#sha256={digest}", ""
    return None, f"it was installed from {url!r}, which a job cannot reach"


def _https_url(url: str) -> str | None:
    """An https URL a job can clone for a remote URL (ssh forms rewritten); None if none."""
    if url.startswith("https://"):
        return _USERINFO.sub("", url)  # a token in the URL must not go into the file
    for pattern in (_SSH_URL, _SCP_URL):
        match = pattern.fullmatch(url)
        if match and "." in match.group(1):  # a host name, not a Windows drive or alias
            return f"https://{match.group(1)}/{match.group(2).lstrip('/')}"
    return None


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()

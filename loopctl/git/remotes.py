"""Network commands (ls-remote, fetch, push with a lease): each goes to a URL read before any
agent ran, with the user's own credentials and programs, never ones the repository's config
names; a config that would steer it elsewhere is refused."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from loopctl.errors import GitError
from loopctl.git.command import git
from loopctl.git.neutralise import _PLANTABLE_SCOPES, _TRUSTED_SCOPES, _config_entries, _config_env
from loopctl.git.refs import _FULL_SHA, _require_sha, resolve_commit
from loopctl.git.runner import GitResult, _base_env, _first_line, _git_argv, _run, _work_tree_env

# The one credential each transport may need (withheld otherwise, like every secret-named
# variable): the ssh agent's socket, or the GitHub token a `gh auth git-credential` helper reads.
_TRANSPORT_CREDENTIALS = {
    "ssh": ("SSH_AUTH_SOCK",),
    "http": ("GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"),
}

# Repository-config keys that would let a network command talk to someone in between: a proxy,
# or TLS checks switched off or pointed at another certificate authority.
_HTTP_TRUST = frozenset({"proxy", "sslverify", "sslcainfo", "sslcapath", "curloptresolve"})
# ... and keys that have git (as the user, outside any sandbox) read a file the config names, and
# with http.saveCookies write the server's cookies over it: any file the user can write.
_HTTP_FILES = frozenset({"cookiefile", "savecookies"})

# Network commands name the other end's programs themselves: a remote section that config has
# for the URL cannot swap in its own.
_UPLOAD_PACK = "--upload-pack=git-upload-pack"
_RECEIVE_PACK = "--receive-pack=git-receive-pack"
_REWRITES = {"insteadof": "insteadOf", "pushinsteadof": "pushInsteadOf"}
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_SCP_LIKE = re.compile(r"^(?:[^@/:]+@)?\[?[^/:\]]+\]?:(?!//)")


def remote_branch_sha(repo: Path, remote: str, branch: str, *, timeout: float = 120) -> str | None:
    """The commit `branch` points at on `remote`, or None if absent.

    `remote` is a URL or path, best one read before any agent ran (loopctl.delivery.remotes);
    a remote's name is resolved to its fetch URL now. So for every network command here.
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
    # Only that ref: no tag config would follow it (push.followTags), no push option
    # (push.pushOption: a merge request opened, CI skipped) rides along (an empty value resets),
    # and no submodule is pushed first to the remote its own config names (push.recurseSubmodules;
    # the runner's submodule.recurse=false stops it too, this is the second guard).
    result = _network_git(
        [
            "-c", "push.pushOption=", "push", "--porcelain", "--no-verify", "--no-follow-tags",
            "--recurse-submodules=no", _RECEIVE_PACK, lease, "--", url, f"{sha}:{target}",
        ],
        cwd=repo,
        url=url,
        timeout=timeout,
    )  # fmt: skip
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
    return _run(_git_argv(*args), cwd=cwd, env=env, timeout=timeout, input=None)


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
        # An empty insteadOf is a prefix of every URL: git prepends its base to each one.
        if section == "url" and name in _REWRITES and value is not None and url.startswith(value):
            why = f"url.{subsection}.{_REWRITES[name]} rewrites it"
        elif section == "remote" and subsection == url:
            why = f"a remote named after that URL ({key}) takes it over"
        elif section == "http" and transport == "http" and name in _HTTP_TRUST:
            why = f"{key} changes how it is reached"
        elif section == "http" and transport == "http" and name in _HTTP_FILES:
            why = f"{key} sets a file git reads cookies from and saves them to"
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

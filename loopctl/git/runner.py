"""How one git process runs: the hardening every command carries (invariant 8), the pinned
environment, and the few words loopctl reads back from git."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loopctl.errors import GitError
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


@dataclass(frozen=True, slots=True)
class GitResult:
    """What a git command returned; text is decoded as UTF-8 with surrogate escapes."""

    returncode: int
    stdout: str
    stderr: str


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


def _git_argv(*args: str) -> list[str]:
    """The argv of a git command with the hardening every command carries."""
    return ["git", *_HARDENING, *args]


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


def _run_bytes(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int, bytes, str]:
    """(exit status, output as bytes, stderr as text) of a git command whose output must stay
    byte for byte (a patch); GitError "git <subcommand> failed" when it cannot run in time."""
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {_subcommand(argv[1:])} failed: {exc}") from exc
    return done.returncode, done.stdout, done.stderr.decode("utf-8", "replace")


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


def _printable(text: str) -> str:
    # Undecodable bytes become U+FFFD so the text can go into logs, JSON and prompts.
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _split_z(out: str) -> list[str]:
    return [item for item in out.split("\0") if item]

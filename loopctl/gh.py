"""The only place loopctl runs the GitHub CLI: a scrubbed environment, no prompts, output redacted.

loopctl never reads or stores a GitHub token: `gh` finds its own login, in its config or in the
variables of `GH_ALLOW`. Callers turn `ProgramNotFound` and a failed `Completed` into their own
one-line errors, since what to tell the user differs (a task source or a delivery step).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from loopctl import process
from loopctl.process import Completed, ProgramNotFound
from loopctl.secrets import Redactor, build_env, withheld_values

__all__ = ["GH_ALLOW", "Completed", "ProgramNotFound", "run"]

# gh finds its login in its own config or these variables; every gh call needs them.
GH_ALLOW = (
    "GH_*",
    "GITHUB_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "XDG_CONFIG_HOME",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
)


def run(
    args: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    allow: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
    stdin: str | None = None,
    stdout_path: Path | None = None,
    stderr_path: Path | None = None,
    tail_bytes: int = 64_000,
    redactor: Redactor | None = None,
) -> Completed:
    """Run `gh args…` in `cwd`; a non-zero exit is data. Raises ProgramNotFound without `gh`.

    The child sees the base environment, `GH_ALLOW`, the caller's `allow` patterns and `extra`,
    with `GH_PROMPT_DISABLED=1` so gh never waits on a terminal. Every secret loopctl can see is
    withheld from the captured output (by `redactor` when the caller already holds one).
    """
    env = build_env(allow=(*allow, *GH_ALLOW), extra={"GH_PROMPT_DISABLED": "1", **(extra or {})})
    return process.run(
        ["gh", *args],
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdin=stdin,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        tail_bytes=tail_bytes,
        redactor=redactor or Redactor(withheld_values(allow=())),
    )

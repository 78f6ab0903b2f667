"""What the `pr` and `merge` steps share: `gh` calls, finding the task's pull request, and
what to say when `gh` is missing."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from loopctl import gh
from loopctl.delivery.steps.base import GH_HINT, Tool
from loopctl.errors import LoopctlError

if TYPE_CHECKING:
    from loopctl.delivery.gates import Plan
    from loopctl.journal.recorder import Recorder
    from loopctl.process import Completed

GH_TIMEOUT = 120.0


def gh_tool(what: str) -> Tool:
    """`gh`, as the step `what` ("`pr`") needs it."""
    return Tool("gh", f"{what} needs the GitHub CLI `gh`, which is not on PATH: {GH_HINT}")


def gh_call(rec: Recorder, plan: Plan, args: list[str], stdin: str | None = None) -> Completed:
    """Run `gh` for a delivery; a missing `gh` or a failed call raises LoopctlError."""
    folder = rec.paths.runs_dir / plan.run / plan.task
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = gh.run(
            args,
            cwd=rec.paths.root,
            allow=rec.project.config.env_allow,
            timeout=GH_TIMEOUT,
            stdin=stdin,
            stdout_path=folder / "deliver-gh.out",
            stderr_path=folder / "deliver-gh.err",
            redactor=rec.redactor,
        )
    except gh.ProgramNotFound as exc:
        raise LoopctlError(
            "the `gh` CLI is not installed or not on PATH (https://cli.github.com), and the"
            f" `pr`/`merge` actions need it: {exc}"
        ) from None
    if not done.ok:
        tail = " ".join(done.stderr_tail.split())[-300:] or f"exit {done.exit_code}"
        raise LoopctlError(f"gh {' '.join(args[:2])} failed: {tail}")
    return done


def find_pr(rec: Recorder, plan: Plan, state: str = "open") -> dict[str, Any] | None:
    """The pull request whose head is the plan's branch, in `state`, if there is one."""
    done = gh_call(
        rec,
        plan,
        [
            "pr",
            "list",
            f"--head={plan.branch}",
            f"--state={state}",
            "--json=number,url,headRefOid,state",
            "--limit=5",
        ],
    )
    try:
        found = json.loads(done.stdout_tail or "[]")
    except ValueError:
        raise LoopctlError("gh pr list printed something that is not JSON") from None
    if not isinstance(found, list):
        return None
    for pr in found:
        if isinstance(pr, dict) and isinstance(pr.get("number"), int):
            return pr
    return None

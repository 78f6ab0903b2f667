"""What a human is shown of an attempt beyond its verdict: the diff read for tampering with the
test run (checks.sabotage) and the maker's summary beside what loopctl measured (checks.claims).

Both are recorded on the attempt's `attempt_finished` (`sabotage`, `claims`). A passing attempt
with sabotage findings is delivered behind a `review` gate (delivery.gates.REVIEW_STEP): its
checked snapshot is committed on the task's branch, but the task is not done until a human
approves the item that quotes the lines (or rejects it). In place nothing is committed, so the
task fails with the quoted lines instead of reporting the goal met.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loopctl import git
from loopctl.checks import claims, runners, sabotage
from loopctl.checks import verdicts as checks
from loopctl.checks.counts import parse_test_counts, report_counts
from loopctl.checks.runner_detection import runner_of
from loopctl.engine.agents import run_agent
from loopctl.engine.commit import maker_summary
from loopctl.engine.context import RunContext, ctx_events, wall_capped
from loopctl.engine.prompts import judge_prompt
from loopctl.engine.task_rules import task_rules
from loopctl.errors import LoopctlError
from loopctl.journal.events import EventType
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import Workspace

# A diff bigger than this is not read whole in place (a worktree's is read from git objects).
IN_PLACE_DIFF_BYTES = 20_000_000


def change_patch(ctx: RunContext, workspace: Workspace, tree: str | None) -> str:
    """The change as a unified diff: base to the checked snapshot's tree, or (in place, or with
    no snapshot) base to the working tree, untracked files as added."""
    if tree is not None:
        try:
            data = git.patch_between(workspace.path, workspace.base_sha, tree)
            return data.decode("utf-8", "replace")
        except LoopctlError:
            pass  # read it from the working tree, which the snapshot was taken of
    return git.diff_text(workspace.path, workspace.base_sha, IN_PLACE_DIFF_BYTES)


def attempt_review(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    number: int,
    verdict: checks.Verdict,
    ran: Sequence[Mapping[str, Any]],
    baseline: checks.Baseline | None,
    tree: str | None,
) -> dict[str, Any]:
    """The `attempt_finished` fields of this review: `claims` always, `sabotage` for a pass."""
    try:
        patch = change_patch(ctx, workspace, tree)
    except LoopctlError:
        return {}  # nothing to read: the verdict stands as it is
    fields: dict[str, Any] = {}
    if verdict.passed:
        found = sabotage.scan_diff(patch)
        cleared = judge_clears(ctx, spec, workspace, number, found, patch) if found else None
        if cleared is not None:
            # The checker agent looked at the quoted lines and judged them ordinary code.
            fields["sabotage_cleared"] = {**cleared, "findings": [f.to_json() for f in found]}
        elif found:
            fields["sabotage"] = [f.to_json() for f in found]
    said = maker_summary(
        ctx_events(ctx.log.read(), ctx.run_id, spec.id, EventType.AGENT_FINISHED), number
    )
    fields["claims"] = claims.compare(said, measure(ctx, verdict, ran, baseline, patch)).to_json()
    return fields


def judge_clears(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    number: int,
    found: Sequence[sabotage.Finding],
    patch: str,
) -> dict[str, str] | None:
    """Ask the checker agent, when the run has one, whether the flagged lines tamper with the
    test run; its `met` clears them (by whom, and why), anything else leaves them to a human."""
    judge = ctx.judge
    if judge is None:
        return None
    quoted = "\n".join(f.describe() for f in found)
    condition = (
        "The change does not tamper with the test run: each line quoted below is ordinary code"
        " for the task, not a way to forge, hide or change what the test runner reports (its"
        f" summary, its exit status, its report file).\n{quoted}"
    )
    block = task_rules(ctx, spec)
    prompt = judge_prompt(
        condition=condition,
        task_prompt=spec.prompt,
        instructions=judge.instructions,
        diff=patch,
        check_output="",
        rules=block.text,
    )
    result = run_agent(
        ctx, spec, workspace, number, wall_capped(ctx, judge), "checker", prompt, None, rules=block
    )
    answer = checks.parse_judge_answer(result.text) or checks.parse_judge_answer(result.output_tail)
    if answer is None or not answer[0]:
        return None
    return {"by": judge.name, "reason": answer[1] or "the checker agent judged it ordinary code"}


def measure(
    ctx: RunContext,
    verdict: checks.Verdict,
    ran: Sequence[Mapping[str, Any]],
    baseline: checks.Baseline | None,
    patch: str,
) -> claims.Measured:
    files = tuple(dict.fromkeys(a.path for a in sabotage.added_lines(patch)) | _touched(patch))
    added, removed = claims.diff_size(patch)
    tests = base = None
    if ran:
        last = ran[-1]
        argv = tuple(str(a) for a in last.get("argv") or ())
        counts = _report(last.get("report")) or parse_test_counts(
            runner_of(argv), verdict.output_tail
        )
        if counts is not None:
            tests = claims.from_counts(counts.passed, counts.failed, counts.errors, counts.skipped)
        before = baseline.counts.get(argv) if baseline is not None else None
        if before is not None:
            base = claims.from_counts(before.passed, before.failed, before.errors, before.skipped)
    return claims.Measured(
        check_passed=verdict.passed if ran or verdict.source != "none" else None,
        tests=tests,
        base=base,
        files=tuple(sorted(files)),
        added=added,
        removed=removed,
        out_of_scope=claims.out_of_scope(files, ctx.loop.maker.scope),
    )


def _report(data: Any) -> Any:
    """The counts of loopctl's own report of the run, when it has one (checks.runners)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("counts"), Mapping):
        return None
    return report_counts(runners.Report(str(data.get("state")), dict(data["counts"])))


def _touched(patch: str) -> dict[str, None]:
    """Every path a diff names on its `diff --git` lines (deleted and binary files too)."""
    found: dict[str, None] = {}
    for line in patch.splitlines():
        if line.startswith("+++ ") or line.startswith("--- "):
            path = sabotage.diff_path(line[4:])
            if path is not None:
                found[path] = None
    return found

"""Checks: the baseline on the base commit, the verdict on a snapshot, the judge agent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopctl import git, process
from loopctl.backends.base import auth_failure
from loopctl.backends.output_tail import last_line
from loopctl.checks import integrity, runners
from loopctl.checks import verdicts as checks
from loopctl.checks.bytecode import check_bytecode_env
from loopctl.checks.counts import (
    TestCounts,
    parse_test_counts,
    report_counts,
    unproven_pass,
)
from loopctl.checks.fingerprint import fingerprint
from loopctl.checks.import_roots import checkout_program, import_roots, redirected_env
from loopctl.checks.runner_detection import runner_of
from loopctl.engine.agents import run_agent
from loopctl.engine.containment import record_refused, sandbox_for
from loopctl.engine.context import (
    RunContext,
    attempt_dir,
    check_commands,
    check_env,
    ctx_events,
    out_of_wall,
    task_view,
    wall_cap,
    wall_capped,
)
from loopctl.engine.liveness import STALLED_SOURCE, idle_limit, record_stall
from loopctl.engine.pausing import CheckerPaused, pause_on_limit
from loopctl.engine.prompts import judge_prompt
from loopctl.engine.snapshot import take_snapshot
from loopctl.engine.task_rules import task_rules
from loopctl.engine.workspace import changed_in_place, placed_unchanged
from loopctl.errors import ForeignWorkTree, LoopctlError
from loopctl.journal.events import EventType
from loopctl.journal.overnight import Stalled
from loopctl.journal.schema import BaselineChecked, Note, read
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import Workspace

if TYPE_CHECKING:
    from loopctl.backends.base import AgentResult


@dataclass(frozen=True, slots=True)
class BaseRun:
    """One check command's run on the base commit, kept so that the goal's first check reuses
    it instead of running the same suite again."""

    started: str
    duration_s: float
    exit_code: int | None
    timed_out: bool
    capped: bool  # its timeout was what was left of `max_wall`
    output: str
    report: runners.Report | None = None  # what loopctl's reporter wrote, for an armed run
    stalled: str | None = None  # why it was ended for making no progress (engine.liveness)


def check_first(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    baseline: checks.Baseline | None,
    base_runs: Mapping[tuple[str, ...], BaseRun] | None = None,
    ran: list[dict[str, Any]] | None = None,
) -> checks.Verdict | None:
    """The goal's checks on the base, before any agent runs: a passing verdict (the goal
    already holds) or a fatal one (it cannot be checked) ends the task; None: work it.

    A goal is each task's success condition, for `loopctl goal` and for a loop's `goal`
    alike: a task whose goal holds on its base has nothing left to do, and a heartbeat loop
    would otherwise pay a maker turn on every green tick. Without a goal, checker commands
    only verify the maker's work, so the maker works the task; a judged goal is not checked
    first either, as deciding it would call an agent. Tasks from a `[tasks]` source (a PR
    with new review comments, an issue) carry work of their own beyond the goal, so they
    are always worked.

    `base_runs` are the baseline's runs of this very base: they stand for their commands
    instead of running each again. Each command's run is appended to `ran`.
    """
    condition = ctx.condition
    if condition is None or condition.judged or ctx.judge is not None:
        return None
    if ctx.loop.tasks is not None:
        return None
    recorded = ctx_events(ctx.log.read(), ctx.run_id, spec.id, EventType.BASELINE_CHECKED)
    runs = read(BaselineChecked, recorded[0]).commands if recorded else ()
    if any(run.get("exit_code") != 0 for run in runs):
        return None  # a counted check already failed on the base: nothing to run again
    ran = [] if ran is None else ran
    verdict = verdict_of(ctx, spec, workspace, 0, baseline, None, ran, base_runs=base_runs)
    if not verdict.passed:
        return verdict if verdict.fatal else None
    shown = " && ".join(" ".join(run["argv"]) for run in ran)
    reason = f"the goal already holds: `{shown}` passes on the base; no agent was called"
    ctx.record(spec.id, Note(what="goal_already_holds", reason=reason, extra={"commands": ran}))
    return replace(verdict, reason=reason)


def worktree_check(
    ctx: RunContext, workspace: Workspace, argv: Sequence[str], folder: Path
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The argv and environment a check runs with so that it tests the worktree's code: a
    program named relative to the checkout that only the checkout has (an ignored venv) runs
    from there, and the project's import roots that point into the main checkout (an
    editable install, PYTHONPATH) point into the worktree instead. No bytecode a maker could
    have planted is read (checks.bytecode)."""

    cached = check_bytecode_env(workspace.path, workspace.base_sha, folder / "pycache")
    env = {**check_env(ctx.rec), **cached}
    checkout = ctx.paths.root
    program = checkout_program(argv, checkout, workspace.path)
    roots = import_roots(program, checkout, workspace.path, env)
    return program, redirected_env(roots, env, checkout)


def check_baseline(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    keep: dict[tuple[str, ...], BaseRun] | None = None,
) -> checks.Baseline | None:
    """What the task's checks are held to (a `checks.verdicts.Baseline`), recorded before its first
    maker turn: test counts on the base commit, so a maker cannot pass by running fewer
    tests, and the protected files `git diff` does not show that already differ from the
    base (ignored files a setup step made, an in-place run's own), so only new ones fail.
    Each command run now is put in `keep`, under its argv."""
    recorded = ctx_events(ctx.log.read(), ctx.run_id, spec.id, EventType.BASELINE_CHECKED)
    if recorded:
        return checks.baseline_from(recorded[0].data, ctx.condition)
    view = task_view(ctx.rec, ctx.run_id, spec.id)
    if view is not None and view.attempts:
        return None  # attempts already ran against this worktree; the base is gone
    folder = attempt_dir(ctx, spec.id, 0)
    runs: list[tuple[tuple[str, ...], int | None, TestCounts | None]] = []
    for index, argv in enumerate(checks.counted_commands(ctx.loop.checker, ctx.condition)):
        done = run_check(
            ctx,
            workspace,
            argv,
            folder,
            "baseline" if index == 0 else f"baseline-{index + 1}",
            task=spec.id,
            attempt=0,
        )
        # The base's counts as its report has them, else as it printed them.
        counts = report_counts(done.report) or parse_test_counts(runner_of(argv), done.output)
        runs.append((argv, done.exit_code, counts))
        if keep is not None:
            keep[tuple(argv)] = done
    # After the base's own test run: what that run leaves behind is not the maker's doing.
    hidden = checks.hidden_changes(workspace.path, workspace.base_sha, ctx.protected)
    if not runs and not hidden:
        return None
    data = checks.baseline_data(runs, hidden)
    first = {key: value for key, value in data.items() if key not in ("commands", "hidden")}
    ctx.record(
        spec.id,
        BaselineChecked(commands=tuple(data["commands"]), hidden=data["hidden"], extra=first),
    )
    return checks.baseline_from(data, ctx.condition)


def verdict_of(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    number: int,
    baseline: checks.Baseline | None,
    maker_result: AgentResult | None,
    ran: list[dict[str, Any]] | None = None,
    snapshot: integrity.Snapshot | None = None,
    base_runs: Mapping[tuple[str, ...], BaseRun] | None = None,
) -> checks.Verdict:
    """The attempt's verdict; each check command run is appended to `ran` (for traces).
    A command in `base_runs` (the baseline's runs of this same base) is not run again."""
    changed = git.changed_paths(workspace.path, workspace.base_sha)
    if ctx.in_place:
        changed = changed_in_place(ctx, spec, changed)
    placed = set(placed_unchanged(ctx, spec, workspace))
    changed = [path for path in changed if path not in placed]
    if snapshot is not None:  # what would be committed, whatever the worktree's index says
        changed += [path for path in snapshot.changed if path not in changed]
    # What git does not list (ignored files, edits an index entry hides) counts as well,
    # unless it was already so before the first maker turn.
    base = baseline if isinstance(baseline, checks.Baseline) else checks.Baseline()
    hidden = checks.hidden_changes(workspace.path, workspace.base_sha, ctx.protected)
    changed += [
        path
        for path, digest in hidden.items()
        if path not in changed and (path not in base.hidden or base.hidden[path] != digest)
    ]
    violations = checks.protected_violations(
        changed, protected=ctx.protected, scope=ctx.loop.maker.scope
    )
    if violations:
        return checks.protection_verdict(violations)
    folder = attempt_dir(ctx, spec.id, number)
    outputs: list[str] = []
    commands = check_commands(ctx)
    for index, argv in enumerate(commands, start=1):
        done = (base_runs or {}).get(tuple(argv))
        if done is None:
            try:
                done = run_check(
                    ctx, workspace, argv, folder, f"check-{index}", task=spec.id, attempt=number
                )
            except LoopctlError as exc:  # the check itself cannot run: no attempt can fix that
                return checks.Verdict(
                    False,
                    f"the check cannot run: {exc}",
                    "check-cannot-run",
                    source="environment",
                    fatal=True,
                )
        if ran is not None:
            ran.append(
                {
                    "argv": list(argv),
                    "started": done.started,
                    "duration_s": round(done.duration_s, 3),
                    "exit_code": done.exit_code,
                    "timed_out": done.timed_out,
                    **({"stalled": True} if done.stalled else {}),
                    # What loopctl's reporter counted, for an armed run (checks.runners).
                    **(
                        {"report": {"state": done.report.state, "counts": dict(done.report.counts)}}
                        if done.report is not None
                        else {}
                    ),
                }
            )
        output = done.output
        outputs.append(output)
        if done.timed_out and done.capped:
            why = out_of_wall(ctx, spec, f"the check `{' '.join(argv)}`")
            return checks.Verdict(False, why, None, None, output[-4000:], "budget", fatal=True)
        if done.stalled:
            # A hung check hangs again on the next attempt: the task stops, as `stalled`.
            digest = fingerprint(None, "stalled " + " ".join(argv)).digest
            return checks.Verdict(
                False, done.stalled, digest, None, output[-4000:], STALLED_SOURCE, fatal=True
            )
        verdict = checks.command_verdict(argv, done.exit_code, done.timed_out, output)
        if not verdict.passed:
            return replace(verdict, output_tail=output[-4000:])
        # The code under test can force the exit status: a test run's counts decide too.
        unproven = unproven_pass(
            argv,
            output,
            base.counts.get(tuple(argv)),
            baselined=tuple(argv) in base.counts,
            repo=ctx.paths.root,
            report=done.report,
        )
        if unproven is not None:
            source, reason = unproven
            return checks.Verdict(
                False,
                reason,
                fingerprint(1, reason).digest,
                done.exit_code,
                output[-4000:],
                source,
            )
    if ctx.judge is not None:
        return ask_judge(ctx, spec, workspace, number, "\n".join(outputs))
    if not commands:
        if maker_result is not None and maker_result.status != "ok":
            return checks.Verdict(
                False,
                f"the maker's turn ended with {maker_result.status} and no check is configured",
                f"agent-{maker_result.status}",
                maker_result.exit_code,
                maker_result.output_tail,
                "agent",
            )
        return checks.Verdict(
            True, "no check configured; the maker finished its turn", None, 0, "", "none"
        )
    return checks.Verdict(
        True, "every check passed", None, 0, outputs[-1][-4000:] if outputs else "", "command"
    )


def run_check(
    ctx: RunContext,
    workspace: Workspace,
    argv: Sequence[str],
    folder: Path,
    name: str,
    *,
    task: str,
    attempt: int,
) -> BaseRun:
    """One run of a check command in the worktree, confined, its output kept under `name`;
    what the proxy refused it is noted against `task` and `attempt`."""

    started = ctx.clock().astimezone(UTC).isoformat(timespec="microseconds")
    timeout, capped = wall_cap(ctx, ctx.loop.checker.timeout_s)
    program, env = worktree_check(ctx, workspace, argv, folder)
    # A known test runner writes its counts to a fresh folder outside the worktree too, and
    # starts so that the worktree cannot stand in for it (checks.runners).
    armed = runners.arm(program, env)
    try:
        box = sandbox_for(ctx, workspace, None, report=armed.folder if armed else None)
        run_env = {**env, **armed.env} if armed else env
        done = process.run(
            list(armed.argv if armed else program),
            cwd=workspace.path,
            env=run_env,
            timeout=timeout,
            stdout_path=folder / f"{name}.out",
            stderr_path=folder / f"{name}.err",
            redactor=ctx.rec.redactor,
            cancel=ctx.stop,
            sandbox=box,
            idle=idle_limit(ctx, workspace.path, box, run_env),
        )
        report = runners.read_report(armed) if armed else None
    finally:
        if armed:
            runners.disarm(armed)
    record_refused(ctx, task, box, attempt=attempt, check=True, command=argv)
    if done.interrupted:
        raise KeyboardInterrupt
    stalled = None
    if done.stalled:
        note = Stalled(
            attempt=attempt,
            idle_s=ctx.loop.budget.max_idle_s,
            last=last_line(done.stdout_path, done.stderr_path),
            command=tuple(argv),
        )
        stalled = record_stall(ctx, task, note)
    return BaseRun(
        started,
        done.duration_s,
        done.exit_code,
        done.timed_out,
        capped,
        done.output_tail(200_000),
        report,
        stalled,
    )


def ask_judge(
    ctx: RunContext, spec: TaskSpec, workspace: Workspace, number: int, check_output: str
) -> checks.Verdict:

    judge = ctx.judge
    assert judge is not None
    condition = ctx.condition.text if ctx.condition else (ctx.loop.goal or spec.prompt)
    diff = git.diff_text(workspace.path, workspace.base_sha, 40_000)
    block = task_rules(ctx, spec)
    prompt = judge_prompt(
        condition=condition,
        task_prompt=spec.prompt,
        instructions=judge.instructions,
        diff=diff,
        check_output=check_output,
        rules=block.text,
    )
    limited = wall_capped(ctx, judge)
    result = run_agent(ctx, spec, workspace, number, limited, "checker", prompt, None, rules=block)
    if result.status == "timeout" and limited.timeout_s < judge.timeout_s:
        why = out_of_wall(ctx, spec, f"the checker {judge.name!r}'s turn")
        return checks.Verdict(False, why, None, None, result.output_tail, "budget", fatal=True)
    stalled = result.extra.get("stalled")
    if isinstance(stalled, str) and stalled:
        return checks.Verdict(
            False, stalled, None, None, result.output_tail, STALLED_SOURCE, fatal=True
        )

    paused = pause_on_limit(ctx, spec, number, judge, result)
    if paused is not None:
        raise CheckerPaused(paused)  # its attempt ends as rate-limited (engine.attempt)
    refused = auth_failure(result)
    if refused is not None:
        # As for a maker: a refused credential fails every verdict alike, so no maker turn
        # is spent again; the task stops at once and a human is asked.
        return checks.Verdict(
            False,
            f"the checker {judge.name!r} could not authenticate: {refused}"
            " (fix its credentials, then `loopctl inbox retry`)",
            None,
            result.exit_code,
            result.output_tail,
            "judge",
            fatal=True,
        )
    answer = checks.parse_judge_answer(result.text) or checks.parse_judge_answer(result.output_tail)
    if answer is None:
        # An answer loopctl cannot read is never taken as "met".
        said = " ".join(result.text.split())[-160:]
        return checks.Verdict(
            False,
            f"not met: the checker agent {judge.name!r} gave no parsable verdict"
            f' ({result.status}); it must end with {{"met": true or false, "reason": …}}'
            + (f"; it said: {said!r}" if said else ""),
            fingerprint(result.exit_code, "no verdict").digest,
            result.exit_code,
            result.output_tail,
            "judge",
        )
    met, reason = answer
    if met:
        return checks.Verdict(
            True, reason or "the checker judged the condition met", None, 0, "", "judge"
        )

    return checks.Verdict(
        False,
        f"not met: {reason}",
        fingerprint(1, reason).digest,
        1,
        result.output_tail,
        "judge",
    )


def check_turn(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    number: int,
    baseline: checks.Baseline | None,
    maker_result: AgentResult | None,
    ran: list[dict[str, Any]],
) -> tuple[integrity.Snapshot | None, checks.Verdict]:
    """The verdict on one snapshot of the worktree, taken once the maker's tree has ended.

    The checks run in the worktree itself (tools expect their caches and installed
    dependencies there). A passing verdict stands only if the worktree is still that snapshot
    afterwards: a process the agent left behind may have changed it meanwhile, and then the
    verdict is about something else. Failing the attempt says so plainly, where checking out a
    clean copy would hide the process still at work.
    """
    if ctx.in_place:  # nothing is committed in place: the checkout is the human's
        return None, verdict_of(ctx, spec, workspace, number, baseline, maker_result, ran)

    try:
        snapshot = take_snapshot(ctx, spec, workspace)
    except ForeignWorkTree as exc:
        # Another tree than the task's (the main checkout, most likely): no attempt can be
        # checked or committed from it, so the task stops and the inbox says why.
        why = str(exc)
        return None, checks.Verdict(
            False, why, fingerprint(1, why).digest, source="snapshot", fatal=True
        )
    except LoopctlError as exc:
        why = f"cannot snapshot the worktree: {exc}"
        return None, checks.Verdict(False, why, fingerprint(1, why).digest, source="snapshot")
    verdict = verdict_of(
        ctx, spec, workspace, number, baseline, maker_result, ran, snapshot=snapshot
    )
    if not verdict.passed:
        return snapshot, verdict
    try:
        moved = integrity.snapshot_changes(
            workspace.path, snapshot, take_snapshot(ctx, spec, workspace)
        )
    except LoopctlError as exc:
        moved = [f"(it cannot be read again: {exc})"]
    if not moved:
        return snapshot, verdict
    shown = ", ".join(moved[:10]) + (f" and {len(moved) - 10} more" if len(moved) > 10 else "")
    why = (
        f"the worktree changed while it was being checked ({shown}): the verdict is not about"
        " what would be committed, so nothing is (a process the agent started may still be"
        " running; if the check itself writes these files, add them to .gitignore)"
    )
    return snapshot, checks.Verdict(
        False, why, fingerprint(1, why).digest, verdict.exit_code, "", "snapshot"
    )

"""One attempt of the maker on a task: prompt, turn, early endings, then the verdict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loopctl.backends.base import auth_failure
from loopctl.checks import verdicts as checks
from loopctl.definitions.scope import rule_lines
from loopctl.delivery.gates import asked_question
from loopctl.engine import footprint, sessions
from loopctl.engine.agents import exec_failure, run_agent
from loopctl.engine.context import (
    RunContext,
    check_commands,
    out_of_wall,
    wall_capped,
)
from loopctl.engine.pausing import CheckerPaused, pause_on_limit
from loopctl.engine.prompts import AttemptSummary, MakerContext, maker_prompt
from loopctl.engine.proposals import harvest
from loopctl.engine.review import attempt_review
from loopctl.engine.rules import RulesBlock
from loopctl.engine.snapshot import integrity_baseline, tampered, watched_turn
from loopctl.engine.task_rules import task_rules
from loopctl.engine.verdict import check_turn
from loopctl.engine.workspace import earlier_changes, reattach
from loopctl.journal import history
from loopctl.journal.events import EventType
from loopctl.journal.history import human_answers
from loopctl.journal.pauses import Pause
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import (
    AgentFinished,
    AttemptFinished,
    AttemptStarted,
    CheckFinished,
    Note,
    read,
)
from loopctl.journal.statuses import Verdict
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import Workspace


def maker_context(
    ctx: RunContext,
    spec: TaskSpec,
    number: int,
    summaries: Sequence[AttemptSummary],
    changed: Sequence[str],
) -> MakerContext:
    """Everything the maker's prompt is assembled from, for attempt `number` of `spec`."""
    loop = ctx.loop
    check = " && ".join(" ".join(c) for c in check_commands(ctx)) or None
    return MakerContext(
        task_id=spec.id,
        task_prompt=spec.prompt,
        goal=loop.goal,
        check=check,
        instructions=ctx.maker.instructions,
        rules=loop.rules,
        protected=ctx.protected,
        scope=loop.maker.scope,
        skills=list(ctx.project.skills.values()),
        full_skills=[ctx.project.skills[n] for n in loop.maker.skills if n in ctx.project.skills],
        attempts=summaries,
        attempt_number=number,
        human=human_answer(ctx.rec, ctx.run_id, spec.id),
        changed=changed,
        declared=rule_lines(footprint.task_scope(ctx, spec)),
    )


def run_attempt(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    number: int,
    earlier: list[history.AttemptView],
    baseline: checks.Baseline | None,
) -> Pause | None:
    """Run attempt `number`; the backend's pause when its turn ended on a rate limit."""
    ctx.record(spec.id, AttemptStarted(attempt=number))
    summaries = [
        AttemptSummary(a.number, a.verdict or "interrupted", a.reason, a.fingerprint, a.output_tail)
        for a in earlier
        if a.number < number
    ]
    changed = earlier_changes(ctx, spec, workspace) if earlier else ()
    context = maker_context(ctx, spec, number, summaries, changed)
    prompt = maker_prompt(context)
    # The same block the checker's prompt carries: were the two ever to differ, the maker's
    # prompt would not carry it and every attempt would refuse to start.
    block = task_rules(ctx, spec)
    # Which rules this attempt runs under, on record before its turn (issue 31).
    ctx.record(
        spec.id,
        Note(
            what="rules",
            attempt=number,
            role="maker",
            extra={"sha256": block.sha256, "version": block.version},
        ),
    )
    if not block.carried_by(prompt):
        # A prompt cut short (huge pinned parts) would run the maker without its rules.
        _stop_attempt(ctx, spec, number, rules_missing(block, len(prompt.encode())))
        return None
    session, cold_prompt = None, prompt
    # A turn lost with loopctl (kill -9) continues its own session (issue 31, item 4).
    lost = sessions.lost_session(ctx, spec, number, ctx.maker)
    if lost is not None:
        session, prompt = lost, sessions.resume_prompt(block.text)
        sessions.resumed(ctx, spec, number, ctx.maker, lost)
    elif ctx.maker.resume:
        session = next((s for s in reversed(maker_sessions(ctx.rec, ctx.run_id, spec.id))), None)
    before = integrity_baseline(ctx, spec, number)
    if before is None:
        return None
    # Interrupted, the turn is compared as it stops: its resumption starts a fresh baseline.
    with watched_turn(ctx, spec, number, before):
        maker = wall_capped(ctx, ctx.maker)
        maker_result = run_agent(
            ctx, spec, workspace, number, maker, "maker", prompt, session, rules=block
        )
        if lost is not None and sessions.gone(ctx, spec, number, maker, lost, maker_result):
            maker_result = run_agent(
                ctx, spec, workspace, number, maker, "maker", cold_prompt, None, rules=block
            )
        if maker_result.status == "interrupted" or ctx.stop.is_set():
            raise KeyboardInterrupt
        if tampered(ctx, spec, number, before):
            return None
        # Invariant 10: its edits of the loop's own definitions become proposals, out of the
        # worktree before anything is checked, archived or committed (issue 31, item 3).
        harvest(ctx, spec, workspace, number)
        paused = pause_on_limit(ctx, spec, number, ctx.maker, maker_result)
        if paused is not None:
            return paused
        if maker_result.status == "timeout" and maker.timeout_s < ctx.maker.timeout_s:
            # Cut short by max_wall, not by its own timeout: what it left is not checked.
            ctx.record(
                spec.id,
                AttemptFinished(
                    attempt=number,
                    verdict=Verdict.FAILED,
                    reason=out_of_wall(ctx, spec, f"the maker {ctx.maker.name!r}'s turn"),
                    fingerprint=None,
                    fatal=True,
                ),
            )
            ctx.rec.refresh_projections()
            return None
        stalled = maker_result.extra.get("stalled")
        if isinstance(stalled, str) and stalled:
            # It hung: another attempt would most likely hang alike; a human looks (issue 30).
            _stop_attempt(ctx, spec, number, stalled)
            return None

        question = asked_question(maker_result.escalate, maker_result.text)
        if question:
            # The maker asked for a human: no check runs; the task waits for `inbox reply`.
            ctx.record(
                spec.id,
                AttemptFinished(
                    attempt=number,
                    verdict=Verdict.ESCALATED,
                    reason=f"the maker asks: {question}",
                    fingerprint=None,
                    question=question,
                ),
                keep=("question",),
            )
            ctx.rec.refresh_projections()
            return None
        if maker_result.status == "approval":
            # The maker stopped before a command that needs a human (its inbox item is open):
            # nothing to check yet, and not a failure to count against the task.
            waits = " ".join(maker_result.text.split())[:200]
            ctx.record(
                spec.id,
                AttemptFinished(
                    attempt=number,
                    verdict=Verdict.AWAITING_APPROVAL,
                    reason=f"the maker waits for approval: {waits}",
                    fingerprint=None,
                ),
            )
            ctx.rec.refresh_projections()
            return None
        refused = auth_failure(maker_result)
        if refused is not None:
            # A refused credential fails every attempt the same way: stop, and ask a human.
            _stop_attempt(
                ctx,
                spec,
                number,
                f"the maker {ctx.maker.name!r} could not authenticate: {refused}"
                " (fix its credentials, then `loopctl inbox retry`)",
            )
            return None
        limit = maker_result.extra.get("limit")
        if isinstance(limit, str) and limit:
            # A resource limit ended the turn: the next attempt would reach it again. Its
            # worktree and log stay as they are; a human decides (raise the limit, retry).
            _stop_attempt(
                ctx,
                spec,
                number,
                f"the maker {ctx.maker.name!r}'s turn ended: {limit}"
                " (raise it in the agent's [sandbox], then `loopctl inbox retry`)",
            )
            return None
        unstarted = exec_failure(ctx.maker, maker_result, ctx.paths.root)
        if unstarted is not None:
            # Its program never ran: no check, and no second attempt that would fail alike.
            _stop_attempt(ctx, spec, number, unstarted)
            return None
        reattach(ctx, spec, workspace)
        ran: list[dict[str, Any]] = []
        try:
            snapshot, verdict = check_turn(
                ctx, spec, workspace, number, baseline, maker_result, ran
            )
        except CheckerPaused as paused_checker:
            return paused_checker.pause
        # The diff read for tampering with the test run (a checker agent may be asked about
        # it, so before the integrity check), and the summary set beside the counts.
        tree = snapshot.tree if snapshot is not None else None
        review = attempt_review(ctx, spec, workspace, number, verdict, ran, baseline, tree)
        if tampered(ctx, spec, number, before):
            # The checks and the checker agent ran after the maker: they are watched too.
            return None
        # What the attempt touched, measured, against its scope (issue 31): before its
        # verdict, which a passing delivery reads it after (engine.drift_gate).
        footprint.record(ctx, spec, workspace, number, tree)
        ctx.record(
            spec.id,
            CheckFinished(
                attempt=number,
                passed=verdict.passed,
                reason=verdict.reason,
                fingerprint=verdict.fingerprint,
                exit_code=verdict.exit_code,
                source=verdict.source,
                failing_tests=tuple(verdict.failing_tests),
                output_tail=verdict.output_tail[-2000:],
                commands=tuple(ran),
            ),
        )
        ctx.record(
            spec.id,
            AttemptFinished(
                attempt=number,
                verdict=Verdict.PASSED if verdict.passed else Verdict.FAILED,
                reason=verdict.reason,
                fingerprint=verdict.fingerprint,
                output_tail=verdict.output_tail[-1500:],
                fatal=verdict.fatal,
                tree=snapshot.tree if snapshot is not None else None,  # what passing commits
                extra=review,
            ),
            keep=("output_tail", "fatal", "tree"),
        )
        ctx.rec.refresh_projections()
    return None


def _stop_attempt(ctx: RunContext, spec: TaskSpec, number: int, reason: str) -> None:
    """Finish the attempt as failed and fatal: the next one would fail the same way, so the
    task stops and a human decides."""
    ctx.record(
        spec.id,
        AttemptFinished(
            attempt=number, verdict=Verdict.FAILED, reason=reason, fingerprint=None, fatal=True
        ),
    )
    ctx.rec.refresh_projections()


def rules_missing(block: RulesBlock, size: int) -> str:
    """Why an attempt refused to start: its composed prompt lacks the loop's current rules."""
    return (
        f"the maker's prompt ({size} bytes) lacks the loop's current rules ({block.marker}):"
        " shorten the task prompt, the agent's instructions or the loop's rules"
        " (the prompt is capped), then `loopctl inbox retry`"
    )


def maker_sessions(rec: Recorder, run_id: str, task_id: str) -> list[str]:
    turns = [
        read(AgentFinished, e)
        for e in rec.log.read()
        if e.run == run_id and e.task == task_id and e.type == EventType.AGENT_FINISHED
    ]
    return [t.session_id for t in turns if t.role == "maker" and t.session_id]


def human_answer(rec: Recorder, run_id: str, task_id: str) -> tuple[str, str] | None:
    """The answer `loopctl inbox reply` gave to this task's question, for this run."""

    return human_answers(rec.log.read()).get((run_id, task_id))

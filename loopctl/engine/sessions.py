"""A maker turn lost with loopctl resumes its CLI session (issue 31, item 4).

When loopctl is killed mid-turn (`kill -9`, a crash, the machine's power) the log holds an
`agent_started` and no `agent_finished`. The attempt is redone (`steps.next_step`), but the CLI's
conversation is still on disk in its private state (`sandbox.cli_state`, kept per loop and role
across attempts and runs): the redone attempt continues that session (Claude's `--resume ID`,
Codex's `exec resume ID`) instead of starting cold, so the model sees its earlier tool calls and
results. First the lost turn gets the `agent_finished` it never had — status interrupted, the
session, and the usage its model calls spent as the CLI's session files count it, less what the
log already holds for that session — so spend continues and is never reset. A CLI that no longer
has the session (expired, deleted) fails the resumed turn; a `session_gone` note says so and the
attempt starts cold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from loopctl.backends import AgentResult, AgentStatus, backend_for
from loopctl.backends.base import checked
from loopctl.backends.presets import CliPreset, safe_session_id
from loopctl.backends.pricing import priced
from loopctl.backends.sessions import Resumable, SessionUsage, resumable
from loopctl.definitions import Agent
from loopctl.definitions.sandbox import SandboxMode
from loopctl.engine.containment import cli_layer
from loopctl.engine.context import RunContext, agent_allow, attempt_dir
from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import AgentFinished, AgentStarted, Note, read
from loopctl.sandbox import cli_state
from loopctl.sandbox.places import home_of
from loopctl.secrets import build_env
from loopctl.tasks.spec import TaskSpec

# The `what` of the notes this module writes.
SESSION_RESUMED = "session_resumed"
SESSION_GONE = "session_gone"

# What the resumed session is told: the conversation it continues already holds the task.
RESUME_PROMPT = (
    "loopctl stopped while you were working on this task and has restarted: the conversation"
    " above is your turn so far. Continue the same task from where you stopped; the worktree"
    " still holds every change you made. Finish it as the task asks."
)


def resume_prompt(rules: str) -> str:
    """What the resumed session is told: the resume notice, and the loop's rules block (every
    prompt carries it, `engine.rules`)."""
    return f"{RESUME_PROMPT}\n\n{rules}" if rules else RESUME_PROMPT


def backend_of(agent: Agent) -> Resumable | None:
    """`agent`'s backend when its sessions can be resumed after loopctl died."""
    return resumable(backend_for(agent))


def lost_session(ctx: RunContext, spec: TaskSpec, number: int, agent: Agent) -> str | None:
    """The session to resume for attempt `number`'s maker: its turn lost with loopctl (closed
    here with the `agent_finished` it never had) or interrupted; None to start cold."""
    backend = backend_of(agent)
    if backend is None:
        return None
    events = ctx.log.read()
    turns: list[AgentStarted | AgentFinished] = []
    for event in events:
        if event.run != ctx.run_id or event.task != spec.id:
            continue
        if event.type == EventType.AGENT_STARTED:
            turns.append(read(AgentStarted, event))
        elif event.type == EventType.AGENT_FINISHED:
            turns.append(read(AgentFinished, event))
    mine = [t for t in turns if (t.attempt, t.role) == (number, "maker")]
    if not mine:
        return None
    started = mine[-1]
    if isinstance(started, AgentFinished):
        if started.status != AgentStatus.INTERRUPTED.value:
            return None
        return safe_session_id(started.session_id)
    session = safe_session_id(started.session_id) or backend.session_in_output(
        _output(attempt_dir(ctx, spec.id, number) / "maker.out")
    )
    if session is None:
        return None
    _close_lost_turn(ctx, spec, number, agent, backend, session, events)
    return session


def _close_lost_turn(
    ctx: RunContext,
    spec: TaskSpec,
    number: int,
    agent: Agent,
    backend: Resumable,
    session: str,
    events: Sequence[Event],
) -> None:
    """Record the `agent_finished` a killed loopctl never wrote, with what the turn spent."""
    spent = unrecorded_usage(ctx, agent, backend, session, events)
    extra: dict[str, object] = {"lost_with_loopctl": True}
    if spent is not None and spent.model:
        extra["model"] = spent.model
    result = AgentResult(
        status=AgentStatus.INTERRUPTED,
        exit_code=None,
        duration_s=0.0,
        input_tokens=spent.input_tokens if spent else None,
        output_tokens=spent.output_tokens if spent else None,
        cached_tokens=spent.cached_tokens if spent else None,
        session_id=session,
        text="loopctl stopped during this turn; its session is resumed",
        extra=extra,
    )
    result = priced(checked(result), agent, dict(ctx.project.config.prices))
    ctx.record(
        spec.id,
        AgentFinished(
            attempt=number,
            role="maker",
            agent=agent.name,
            backend=agent.backend.value,
            request_model=agent.model,
            status=result.status.value,
            exit_code=None,
            duration_s=0.0,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            cached_tokens=result.cached_tokens,
            cost_usd=result.cost_usd,
            session_id=session,
            text=result.text,
            extra=dict(result.extra),
        ),
    )


def interrupted_usage(ctx: RunContext, agent: Agent, result: AgentResult) -> AgentResult:
    """`result` of a turn loopctl stopped (Ctrl-C, `loopctl stop`), with the usage its CLI
    never got to report read from the session's files: its spend is kept when it resumes."""
    backend = backend_of(agent)
    session = safe_session_id(result.session_id)
    unreported = result.input_tokens is None and result.output_tokens is None
    if result.status is not AgentStatus.INTERRUPTED or not unreported or session is None:
        return result
    if backend is None:
        return result
    spent = unrecorded_usage(ctx, agent, backend, session, ctx.log.read())
    if spent is None:
        return result
    return replace(
        result,
        input_tokens=spent.input_tokens,
        output_tokens=spent.output_tokens,
        cached_tokens=spent.cached_tokens,
        extra={**result.extra, **({"model": spent.model} if spent.model else {})},
    )


def unrecorded_usage(
    ctx: RunContext, agent: Agent, backend: Resumable, session: str, events: Sequence[Event]
) -> SessionUsage | None:
    """What `session` spent that no `agent_finished` in the log counts yet: its files' total
    less every finished turn of that session (a resumed turn reports only its own calls)."""
    total = backend.session_usage(session, state_places(ctx, agent))
    if total is None:
        return None
    turns = session_turns(events, session)
    return SessionUsage(
        max(0, total.input_tokens - sum(t.input_tokens or 0 for t in turns)),
        max(0, total.output_tokens - sum(t.output_tokens or 0 for t in turns)),
        max(0, total.cached_tokens - sum(t.cached_tokens or 0 for t in turns)),
        total.model,
    )


def own_usage(
    ctx: RunContext, agent: Agent, session: str | None, result: AgentResult
) -> AgentResult:
    """`result` of a turn that resumed `session`, counting only its own calls: a CLI that
    reports the whole session's usage (Codex) has what the log already holds taken off, so
    spend adds up instead of counting earlier turns twice."""
    backend = backend_of(agent)
    if session is None or backend is None or not backend.reports_session_totals:
        return result
    turns = session_turns(ctx.log.read(), session)

    def less(value: int | None, name: str) -> int | None:
        if value is None:
            return None
        return max(0, value - sum(getattr(t, name) or 0 for t in turns))

    return replace(
        result,
        input_tokens=less(result.input_tokens, "input_tokens"),
        output_tokens=less(result.output_tokens, "output_tokens"),
        cached_tokens=less(result.cached_tokens, "cached_tokens"),
    )


def session_turns(events: Sequence[Event], session: str) -> list[AgentFinished]:
    """Every finished turn of `session` the log holds, in any run."""
    finished = [read(AgentFinished, e) for e in events if e.type == EventType.AGENT_FINISHED]
    return [t for t in finished if t.session_id == session]


def state_places(ctx: RunContext, agent: Agent) -> list[Path]:
    """Where the maker's CLI keeps its sessions as loopctl sees them: the loop's private copy
    when sandboxed (`containment.cli_layer`), else the places themselves."""
    backend = backend_for(agent)
    env = build_env(allow=agent_allow(ctx.rec, agent))
    if isinstance(backend, CliPreset):
        env = backend.environment(agent, env)  # CLAUDE_CONFIG_DIR, CODEX_HOME, …
    cli = agent.backend.value
    found = cli_state.places(cli, env)
    if ctx.project.config.sandbox is SandboxMode.OFF or not cli_state.has_state(cli):
        return found
    layer, home = cli_layer(ctx, "maker"), home_of(env)
    return [cli_state.private_copy(layer, place, home) for place in found]


def resumed(ctx: RunContext, spec: TaskSpec, number: int, agent: Agent, session: str) -> None:
    ctx.record(
        spec.id,
        Note(
            what=SESSION_RESUMED,
            attempt=number,
            role="maker",
            extra={"agent": agent.name, "session_id": session},
        ),
    )


def gone(
    ctx: RunContext, spec: TaskSpec, number: int, agent: Agent, session: str, result: AgentResult
) -> bool:
    """Whether the resumed turn failed for want of its session; if so a note says so (the
    attempt then starts cold)."""
    backend = backend_of(agent)
    if backend is None or not backend.session_gone(result):
        return False
    ctx.record(
        spec.id,
        Note(
            what=SESSION_GONE,
            attempt=number,
            role="maker",
            reason=f"the CLI no longer has session {session}: starting the attempt afresh",
            extra={"agent": agent.name, "session_id": session},
        ),
    )
    return True


def _output(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""

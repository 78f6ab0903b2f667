"""One agent turn (maker or checker): its environment, request, sandbox, run and record."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from loopctl.definitions import Agent
from loopctl.engine.containment import forget_private_objects, sandbox_for
from loopctl.engine.context import (
    RunContext,
    agent_allow,
    attempt_dir,
    open_item,
)
from loopctl.journal.events import EventType
from loopctl.journal.inbox import ItemKind
from loopctl.journal.recorder import Recorder
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import Workspace

if TYPE_CHECKING:
    from loopctl.backends.base import AgentResult


def run_agent(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    number: int,
    agent: Agent,
    role: str,
    prompt: str,
    session: str | None,
) -> AgentResult:
    from loopctl.atomicfile import write_atomic
    from loopctl.backends import AgentRequest, backend_for

    folder = attempt_dir(ctx, spec.id, number)
    prompt_file = folder / f"{role}-prompt.md"
    write_atomic(prompt_file, prompt)
    # The one place outside the worktree a sandboxed agent may write for this attempt.
    state_dir = folder / f"{role}-state"
    state_dir.mkdir(exist_ok=True)
    env = agent_env(ctx, spec, workspace, number, agent, role, prompt_file)
    request = AgentRequest(
        agent=agent,
        role=role,
        prompt=prompt,
        worktree=workspace.path,
        prompt_file=prompt_file,
        env=env,
        stdout_path=folder / f"{role}.out",
        stderr_path=folder / f"{role}.err",
        redactor=ctx.rec.redactor,
        loop=ctx.loop.name,
        task=spec.id,
        attempt=number,
        session_id=session,
        cancel=ctx.stop,
        on_start=lambda pid: agent_started(ctx, spec, number, role, agent, pid),
        approved_commands=approved_commands(ctx.rec, ctx.loop.name, spec.id)
        if role == "maker"
        else {},
        skills=tuple(ctx.project.skills.values()),
        sandbox=sandbox_for(ctx, workspace, agent, state_dir),
        state_dir=state_dir,
        request_approval=lambda summary, evidence: open_item(
            ctx.rec,
            ctx.run_id,
            ctx.loop.name,
            spec.id,
            ItemKind.APPROVAL,
            summary,
            {**evidence, "agent": agent.name, "role": role, "attempt": number},
        ),
    )
    from loopctl.backends.base import checked
    from loopctl.backends.output_tail import agent_output_tail
    from loopctl.backends.pricing import priced

    # Checked before pricing: a reported 10**400 tokens would overflow the price arithmetic.
    result = priced(
        checked(backend_for(agent).run(request)), agent, dict(ctx.project.config.prices)
    )
    if request.sandbox is not None and not ctx.in_place:
        forget_private_objects(ctx.rec, workspace)
        request.sandbox.discard_scratch()
    if result.extra.get("usage_warning"):
        ctx.event(
            spec.id,
            EventType.NOTE,
            what="usage_clamped",
            attempt=number,
            role=role,
            agent=agent.name,
            warning=result.extra["usage_warning"],
        )
    ctx.event(
        spec.id,
        EventType.AGENT_FINISHED,
        attempt=number,
        role=role,
        agent=agent.name,
        backend=agent.backend.value,
        request_model=agent.model,  # what was asked for; `model` is what answered, if told
        output_tail=agent_output_tail(request),
        **result.event_data(),
    )
    return result


def agent_env(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    number: int,
    agent: Agent,
    role: str,
    prompt_file: Path,
) -> dict[str, str]:
    """The scrubbed environment of one agent turn, with the agent protocol's variables."""
    from loopctl.secrets import build_env

    return build_env(
        allow=agent_allow(ctx.rec, agent),
        extra={
            "LOOPCTL_LOOP": ctx.loop.name,
            "LOOPCTL_TASK": spec.id,
            "LOOPCTL_ATTEMPT": str(number),
            "LOOPCTL_WORKTREE": str(workspace.path),
            "LOOPCTL_PROMPT_FILE": str(prompt_file),
            "LOOPCTL_ROLE": role,
            "LOOPCTL_RUN": ctx.run_id,
            "PYTHONDONTWRITEBYTECODE": "1",
        },
    )


def approved_commands(rec: Recorder, loop: str, task: str) -> dict[str, tuple[str, ...]]:
    """Commands this task's maker asked to run and a human approved, not yet used."""
    from loopctl.journal.inbox import items

    events = rec.log.read()
    used = {
        item
        for event in events
        if event.type == EventType.AGENT_FINISHED and event.loop == loop and event.task == task
        for item in event.data.get("approvals_used") or ()
    }
    approved: dict[str, tuple[str, ...]] = {}
    for item in items(events):
        argv = item.evidence.get("argv")
        if (
            item.kind == ItemKind.APPROVAL
            and (item.loop, item.task) == (loop, task)
            and item.approved
            and item.id not in used
            and isinstance(argv, list)
            and all(isinstance(arg, str) for arg in argv)
        ):
            approved[item.id] = tuple(argv)
    return approved


def agent_started(
    ctx: RunContext, spec: TaskSpec, number: int, role: str, agent: Agent, pid: int
) -> None:
    ctx.event(
        spec.id,
        EventType.AGENT_STARTED,
        attempt=number,
        role=role,
        agent=agent.name,
        pid=pid,
    )

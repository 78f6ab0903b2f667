"""One agent turn (maker or checker): its environment, request, sandbox, run and record."""

from __future__ import annotations

import errno
import os
import re
import shutil
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl.atomicfile import write_atomic
from loopctl.backends import AgentRequest, AgentResult, AgentStatus, backend_for
from loopctl.backends.base import checked
from loopctl.backends.endpoints import model_endpoints
from loopctl.backends.output_tail import agent_output_tail, last_line
from loopctl.backends.pricing import priced
from loopctl.backends.sessions import resumable
from loopctl.checks import import_roots
from loopctl.definitions import Agent
from loopctl.definitions.agents import HTTP_BACKENDS, Backend, argv_files, runs_script
from loopctl.engine import sessions
from loopctl.engine.cassettes import with_tape
from loopctl.engine.containment import forget_private_objects, record_refused, sandbox_for
from loopctl.engine.context import (
    RunContext,
    agent_allow,
    attempt_dir,
    open_item,
)
from loopctl.engine.liveness import idle_limit, record_stall
from loopctl.engine.rules import RulesBlock
from loopctl.git import is_ignored
from loopctl.journal.events import EventType
from loopctl.journal.inbox import ItemKind, items
from loopctl.journal.overnight import Stalled
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import AgentFinished, AgentStarted, Note
from loopctl.process import ProgramNotFound
from loopctl.secrets import build_env
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import Workspace

if TYPE_CHECKING:
    from loopctl.backends.base import AgentRequest, AgentResult


def run_agent(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    number: int,
    agent: Agent,
    role: str,
    prompt: str,
    session: str | None,
    *,
    rules: RulesBlock | None = None,
) -> AgentResult:
    """One turn of `agent` as `role`; `rules`, the task's rules block, is what a CLI that
    compacts its context is given again after a compaction (backends.rules_hook)."""

    folder = attempt_dir(ctx, spec.id, number)
    prompt_file = folder / f"{role}-prompt.md"
    write_atomic(prompt_file, prompt)
    # The one place outside the worktree a sandboxed agent may write for this attempt.
    state_dir = folder / f"{role}-state"
    state_dir.mkdir(exist_ok=True)
    env = agent_env(ctx, spec, workspace, number, agent, role, prompt_file)
    sandbox = sandbox_for(ctx, workspace, agent, state_dir, role, env)
    # What its proxy forwards is recorded (or, replaying offline, answered from the recording).
    api = agent.backend in HTTP_BACKENDS
    taped = with_tape(ctx, sandbox, spec.id, number, role, workspace.path, folder, api=api)
    sandbox = taped.sandbox
    # Named before it runs where the CLI allows: a turn lost with loopctl can be resumed.
    backend = resumable(backend_for(agent))
    named = str(uuid.uuid4()) if session is None and backend and backend.names_sessions else None
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
        new_session_id=named,
        cancel=ctx.stop,
        on_start=lambda pid: agent_started(ctx, spec, number, role, agent, pid, session or named),
        approved_commands=approved_commands(ctx.rec, ctx.loop.name, spec.id)
        if role == "maker"
        else {},
        skills=tuple(ctx.project.skills.values()),
        sandbox=sandbox,
        cassette=taped.tape,
        state_dir=state_dir,
        rules=rules.text if rules is not None else "",
        rules_marker=rules.marker if rules is not None else "",
        stream=role == "maker" and ctx.loop.scope.declared,
        idle=idle_limit(ctx, workspace.path, sandbox, env, (state_dir,)),
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

    # Checked before pricing: a reported 10**400 tokens would overflow the price arithmetic.
    try:
        ran = _run_turn(request)
    finally:
        taped.end()
    turn = sessions.own_usage(ctx, agent, session, checked(ran))
    turn = checked(sessions.interrupted_usage(ctx, agent, turn))  # read from session files
    result = priced(turn, agent, dict(ctx.project.config.prices))
    record_refused(ctx, spec.id, request.sandbox, attempt=number, role=role, agent=agent.name)
    asked = _hosts_asked(request, env)
    if asked:
        result = replace(result, extra={**result.extra, "hosts_asked": asked})
    if request.sandbox is not None and request.sandbox.reached:
        result = limit_reached(result, request.sandbox.reached[0])
    if result.status is AgentStatus.STALLED and request.idle is not None:
        note = Stalled(
            attempt=number,
            idle_s=request.idle.seconds,
            last=last_line(request.stdout_path, request.stderr_path, agent.backend.value),
            role=role,
            agent=agent.name,
        )
        # Why the attempt stops, as a resource limit's reason is (engine.attempt).
        result = replace(
            result, extra={**result.extra, "stalled": record_stall(ctx, spec.id, note)}
        )
    if request.sandbox is not None and not ctx.in_place:
        forget_private_objects(ctx.rec, workspace)
        request.sandbox.discard_scratch()
    if result.extra.get("usage_warning"):
        ctx.record(
            spec.id,
            Note(
                what="usage_clamped",
                attempt=number,
                role=role,
                warning=result.extra["usage_warning"],
                extra={"agent": agent.name},
            ),
        )
    if result.extra.get("rules_warning"):
        # The CLI compacted its context and the loop's rules did not come back (issue 31).
        ctx.record(
            spec.id,
            Note(
                what="rules_not_reinjected",
                attempt=number,
                role=role,
                warning=str(result.extra["rules_warning"]),
                extra={"agent": agent.name, "sha256": rules.sha256 if rules else None},
            ),
        )
    ctx.record(
        spec.id,
        AgentFinished(
            attempt=number,
            role=role,
            agent=agent.name,
            backend=agent.backend.value,
            request_model=agent.model,  # what was asked for; `model` is what answered, if told
            output_tail=agent_output_tail(request),
            # AgentResult.event_data, field by field: the same keys in the same order.
            escalate=result.escalate or None,
            status=result.status.value,
            exit_code=result.exit_code,
            duration_s=round(result.duration_s, 3),
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            cached_tokens=result.cached_tokens,
            cost_usd=result.cost_usd,
            session_id=result.session_id,
            text=result.text[-2000:],
            extra=dict(result.extra),
        ),
    )
    return result


def _run_turn(request: AgentRequest) -> AgentResult:
    """The backend's turn; a program that cannot be executed is a result that says so."""

    try:
        return backend_for(request.agent).run(request)
    except ProgramNotFound as exc:
        cause = exc.__cause__
        if request.agent.argv is None:
            why = str(exc)  # a CLI that left PATH since the run's preflight
        elif isinstance(cause, FileNotFoundError):
            # It was found as an executable file: what is missing is what its #! line names.
            why = f"{request.agent.argv[0]}: {_NO_INTERPRETER}"
        elif isinstance(cause, PermissionError):
            why = f"{request.agent.argv[0]}: permission denied"
        else:
            why = f"{request.agent.argv[0]}: not found, or not executable"
    except OSError as exc:
        if exc.errno != errno.ENOEXEC:
            raise  # not about starting the program: a real error
        why = f"{(request.agent.argv or ('',))[0]}: {_NOT_A_PROGRAM}"
    return AgentResult(
        status=AgentStatus.ERROR,
        exit_code=None,
        duration_s=0.0,
        text=why,
        extra={"cannot_start": why},
    )


def limit_reached(result: AgentResult, reason: str) -> AgentResult:
    """The turn ended by a resource limit (loopctl.limits): an error whose reason is the limit,
    whatever the agent printed as it died."""

    return replace(
        result, status=AgentStatus.ERROR, text=reason, extra={**result.extra, "limit": reason}
    )


_NO_INTERPRETER = "the interpreter its #! line names was not found"
_NOT_A_PROGRAM = "not a program (a script needs a #! line naming its interpreter)"


def agent_env(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    number: int,
    agent: Agent,
    role: str,
    prompt_file: Path,
) -> dict[str, str]:
    """The scrubbed environment of one agent turn, with the agent protocol's variables; the
    worktree's sources first on PYTHONPATH where the checkout's venv imports the checkout's."""

    env = build_env(
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
    return import_roots.agent_env(ctx.paths.root, workspace.path, env)


def approved_commands(rec: Recorder, loop: str, task: str) -> dict[str, tuple[str, ...]]:
    """Commands this task's maker asked to run and a human approved, not yet used."""

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
    ctx: RunContext,
    spec: TaskSpec,
    number: int,
    role: str,
    agent: Agent,
    pid: int,
    session: str | None = None,
) -> None:
    started = AgentStarted(attempt=number, role=role, agent=agent.name, pid=pid, session_id=session)
    ctx.record(spec.id, started)


# --- can the agent start at all ---------------------------------------------------------------

# What bubblewrap prints, and nothing else, when the program it was to run cannot be executed
# (a script whose interpreter is missing): the sandbox started, the agent never did.
_SANDBOX_EXEC_FAILED = re.compile(r"\Abwrap: execvp (?P<program>[^\n]+?): (?P<why>[^\n]+)\Z")


def cannot_start(ctx: RunContext, spec: TaskSpec, workspace: Workspace) -> str | None:
    """Why the maker or the judge cannot start in this task's worktree, as one line naming the
    agent and the fix; None when both can.

    Asked before the task's first check: an agent whose program or script is missing would
    fail every attempt the same way, and each failure would be blamed on the check.
    """
    base = spec.base_ref or ctx.base_ref
    for agent in (ctx.maker, ctx.judge):
        if agent is None:
            continue
        path = _agent_path(ctx.rec, agent)
        problem = launch_problem(agent, workspace.path, ctx.paths.root, base, path)
        if problem is not None:
            return problem
    return None


def _agent_path(rec: Recorder, agent: Agent) -> str | None:
    """The PATH the agent's program is looked up on (its scrubbed environment keeps PATH)."""

    return build_env(allow=agent_allow(rec, agent)).get("PATH")


def launch_problem(
    agent: Agent, cwd: Path, checkout: Path, base: str, path: str | None
) -> str | None:
    """Why a command agent's program, or the script its interpreter runs, is not there in `cwd`
    (the task's worktree, made from `base`) or cannot be executed; None when it can start.

    A relative path means the file in `cwd`, as when the program runs. `checkout` is the main
    checkout: a file that is there but not in `cwd` was never committed (or git ignores it).
    Other arguments may name files the agent creates, and are not asked for. Other backends
    run a CLI found on PATH (refused before the run when missing) or no program at all.
    """
    if agent.backend is not Backend.COMMAND or not agent.argv:
        return None
    argv = (*agent.argv, *agent.args)
    where = _shown(agent.path, checkout)
    program = argv[0]
    if "/" in program:
        problem = _file_problem(agent, program, cwd, checkout, base, where, path, program=True)
        if problem is not None:
            return problem
    elif shutil.which(program, path=path) is None:
        return (
            f"agent {agent.name!r}: program {program!r} is not on PATH"
            f" (install it, or fix argv in {where})"
        )
    script = _script(argv)
    if script is None:
        return None
    return _file_problem(agent, script, cwd, checkout, base, where, path, program=False)


def _script(argv: Sequence[str]) -> str | None:
    """The script an interpreter in argv[0] runs (`python tools/agent.py`): the first file
    argument named like one, unless the code comes from `-c`/`-m` instead, or argv[0] is itself
    a script (what it is given is its data)."""
    if runs_script(argv[0]) or any(arg in ("-c", "-e", "-m", "--eval") for arg in argv[1:]):
        return None
    return next((f for f in argv_files(argv[1:]) if runs_script(f)), None)


def _file_problem(
    agent: Agent,
    file: str,
    cwd: Path,
    checkout: Path,
    base: str,
    where: str,
    path: str | None,
    *,
    program: bool,
) -> str | None:
    named = Path(file)
    full = named if named.is_absolute() else cwd / named
    if full.is_dir():
        return f"agent {agent.name!r}: {file} is a folder, not a file (fix argv in {where})"
    if not full.is_file():
        in_checkout = checkout / named
        if named.is_absolute() or cwd == checkout or not in_checkout.is_file():
            return f"agent {agent.name!r}: {file} does not exist (fix argv in {where})"
        if is_ignored(checkout, file):
            # A virtualenv's interpreter, a build output: not for committing.
            return (
                f"agent {agent.name!r}: {file} is ignored by git, so the task's worktree (made"
                f" from {base}) does not have it — name it by its absolute path in {where}"
            )
        state = "is not committed" if base == "HEAD" else f"is not in {base}"
        return (
            f"agent {agent.name!r}: {file} {state}; the task's worktree is made from {base}"
            f" — commit it, or name it by its absolute path in {where}"
        )
    if not program:
        return None
    if not os.access(full, os.X_OK):
        committed = not named.is_absolute() and cwd != checkout
        fix = f"`chmod +x {file}`" + (" and commit it" if committed else "")
        return (
            f"agent {agent.name!r}: {file} is not executable: {fix}, or run it through its"
            f" interpreter in argv ({where})"
        )
    missing = _missing_interpreter(full, path)
    if missing is not None:
        return (
            f"agent {agent.name!r}: {file} cannot run: its #! line names {missing}"
            f" (fix the #! line, or argv in {where})"
        )
    return None


def _missing_interpreter(script: Path, path: str | None) -> str | None:
    """What a script's #! line names that is not here ("/usr/bin/env node": node on PATH)."""
    try:
        with script.open("rb") as opened:
            head = opened.read(256)
    except OSError:
        return None  # unreadable to us: the exec itself will say
    if not head.startswith(b"#!"):
        return None  # a binary, or a script a shell runs (bwrap's execvp falls back to sh)
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    interpreter = words[0]
    if not (os.path.isfile(interpreter) and os.access(interpreter, os.X_OK)):
        return f"{interpreter}, which is not here"
    named = next((w for w in words[1:] if not w.startswith("-")), None)
    by_env = Path(interpreter).name == "env" and named is not None and "=" not in named
    if by_env and named is not None and shutil.which(named, path=path) is None:
        return f"{named!r}, which is not on PATH"
    return None


def _shown(path: Path, root: Path) -> str:
    """A definition file's path as the user knows it: relative to the checkout when inside."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def exec_failure(agent: Agent, result: AgentResult, checkout: Path) -> str | None:
    """Why the agent's process never ran (its program could not be executed), from a turn's
    result; None when it ran, whatever it did."""
    fix = f" (fix argv in {_shown(agent.path, checkout)})" if agent.argv else ""
    failed = result.extra.get("cannot_start")
    if isinstance(failed, str) and failed:
        return f"agent {agent.name!r} cannot start: {failed}{fix}"
    found = _SANDBOX_EXEC_FAILED.match(result.output_tail.strip())
    if result.status != "error" or agent.backend is not Backend.COMMAND or found is None:
        return None
    program, why = found["program"], found["why"]
    if why == os.strerror(errno.ENOENT) and Path(program).is_file():
        why = _NO_INTERPRETER  # the file is there: what is missing is what its #! line names
    elif why == os.strerror(errno.ENOEXEC):
        why = _NOT_A_PROGRAM
    named = (agent.argv or ("",))[0]
    if "/" in named and program.endswith("/" + named.removeprefix("./")):
        program = named  # as the user wrote it, not the worktree's absolute path
    return f"agent {agent.name!r} cannot start: {program}: {why}{fix}"


def _hosts_asked(request: AgentRequest, env: Mapping[str, str]) -> list[str]:
    """What the proxy was asked for during the turn but the agent's own model: the hosts of
    the turn's footprint (issue 31, engine.footprint)."""
    if request.sandbox is None or not request.sandbox.asked:
        return []
    model = {str(target) for target in model_endpoints(request.agent, env).targets}
    return [host for host in dict.fromkeys(request.sandbox.asked) if host not in model]

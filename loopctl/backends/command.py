"""Backend "command": any program speaking the agent protocol (README.md, "Agent protocol")."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from loopctl import git, process
from loopctl.backend_registry import BackendSpec, register
from loopctl.backends.base import (
    AgentRequest,
    AgentResult,
    AgentStatus,
    Invocation,
    ProbeCheck,
    read_protocol_result,
    trailing_json,
)
from loopctl.definitions.agents import Agent, argv_files
from loopctl.definitions.environment import inside_repository
from loopctl.errors import AgentUnavailable, GitError
from loopctl.process import Completed

PLACEHOLDERS = ("prompt_file", "worktree", "loop", "task", "attempt", "model")


def render_argv(agent: Agent, request: AgentRequest) -> list[str]:
    """Fill `{prompt_file}` and friends; other text is passed through untouched."""
    assert agent.argv is not None
    values = {
        "prompt_file": str(request.prompt_file),
        "worktree": str(request.worktree),
        "loop": request.loop,
        "task": request.task,
        "attempt": str(request.attempt),
        "model": agent.model or "",
    }
    rendered = []
    for arg in (*agent.argv, *agent.args):
        for key, value in values.items():
            arg = arg.replace("{" + key + "}", value)
        rendered.append(arg)
    return rendered


class CommandBackend:
    name = "command"

    def check_available(self, agent: Agent, env: dict[str, str]) -> None:
        if not agent.argv:
            raise AgentUnavailable(f"agent {agent.name!r} has no argv ({agent.path})")
        program = agent.argv[0]
        if "/" in program:
            candidate = Path(program)
            if not candidate.is_absolute():
                return  # relative to the worktree; checked when it runs
            if not candidate.exists():
                raise AgentUnavailable(f"agent {agent.name!r}: program not found: {program}")
            if not candidate.is_file() or not os.access(candidate, os.X_OK):
                raise AgentUnavailable(
                    f"agent {agent.name!r}: {program} is not an executable file (`chmod +x`"
                    f" it, or run it through its interpreter in argv in {agent.path})"
                )
            return
        if shutil.which(program, path=env.get("PATH")) is None:
            raise AgentUnavailable(
                f"agent {agent.name!r}: program {program!r} is not on PATH"
                f" (install it, or fix argv in {agent.path})"
            )

    def probe(self, agent: Agent, env: dict[str, str], cwd: Path) -> list[ProbeCheck]:
        try:
            self.check_available(agent, env)
        except AgentUnavailable as exc:
            return [ProbeCheck("program", False, str(exc))]
        assert agent.argv is not None
        program = agent.argv[0]
        found = program if "/" in program else shutil.which(program, path=env.get("PATH"))
        return [
            ProbeCheck(
                "program", True, f"{found} (not run: a command agent's dry run would do its work)"
            ),
            *_file_checks(agent, cwd),
        ]

    def preview(self, request: AgentRequest) -> Invocation:
        agent = request.agent
        stdin = request.prompt if agent.prompt_via in ("stdin", "both") else None
        return Invocation(render_argv(agent, request), stdin, dict(request.env))

    def run(self, request: AgentRequest) -> AgentResult:
        call = self.preview(request)
        done = process.run(
            call.argv,
            cwd=request.worktree,
            env=call.env,
            timeout=request.agent.timeout_s,
            stdin=call.stdin,
            stdout_path=request.stdout_path,
            stderr_path=request.stderr_path,
            redactor=request.redactor,
            cancel=request.cancel,
            on_start=request.on_start,
            sandbox=request.sandbox,
            idle=request.idle,
        )
        return result_from_completed(done)


def _file_checks(agent: Agent, root: Path) -> list[ProbeCheck]:
    """Each file the argv names (a script it runs) must exist, and be committed to be found.

    The agent runs in the task's worktree, checked out from a commit: a relative path means the
    file there, so a script missing from the checkout fails, and one not in HEAD is a warning.
    """
    named = argv_files((*(agent.argv or ()), *agent.args))
    checks: list[ProbeCheck] = []
    for file in named:
        path = Path(file) if Path(file).is_absolute() else root / file
        if not path.is_file():
            checks.append(
                ProbeCheck("file", False, f"{file} does not exist (fix argv in {agent.path})")
            )
    inside = inside_repository(root, [f for f in named if (root / f).is_file()])
    if inside:
        try:
            committed = git.paths_in_commit(root, "HEAD", inside)
        except GitError:
            committed = set()
        for file in inside:
            if file not in committed:
                checks.append(
                    ProbeCheck(
                        "file",
                        True,
                        f"{file} is not committed: the task's worktree (checked out from a"
                        " commit) will not have it; commit it",
                        warning=True,
                    )
                )
    return checks


def result_from_completed(done: object) -> AgentResult:
    """Turn a finished process into an AgentResult, reading a trailing protocol JSON line."""
    assert isinstance(done, Completed)
    payload = trailing_json(done.stdout_tail)
    parsed = read_protocol_result(payload) if payload is not None else None
    if done.stalled:
        status = AgentStatus.STALLED
    elif done.timed_out:
        status = AgentStatus.TIMEOUT
    elif done.interrupted:
        status = AgentStatus.INTERRUPTED
    elif done.exit_code != 0 or (parsed is not None and parsed.is_error):
        status = AgentStatus.ERROR
    else:
        status = AgentStatus.OK
    text = parsed.text if parsed is not None and parsed.text is not None else done.stdout_tail
    return AgentResult(
        status=status,
        exit_code=done.exit_code,
        duration_s=done.duration_s,
        text=text[-4000:],
        input_tokens=parsed.input_tokens if parsed else None,
        output_tokens=parsed.output_tokens if parsed else None,
        cached_tokens=parsed.cached_tokens if parsed else None,
        cost_usd=parsed.cost_usd if parsed else None,
        session_id=parsed.session_id if parsed else None,
        output_tail=done.output_tail(4000),
        escalate=parsed.escalate if parsed else None,
        extra={"usage_warnings": list(parsed.warnings)} if parsed and parsed.warnings else {},
    )


SPEC = register(BackendSpec(name="command", factory=CommandBackend, preference=60))

"""What a run would do, shown before it runs (`goal --dry-run`, `run NAME --dry-run`).

`build_preview` (behind `Engine.preview_goal` / `Engine.preview_loop`) builds it from the
engine's own prompt, environment and sandbox code and each backend's own argv, so the preview
cannot drift from a real run.
Environment variables appear by name only: their values can be credentials.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopctl import git, node_links
from loopctl.backends import AgentRequest, backend_for
from loopctl.checks.conditions import ResolvedCondition
from loopctl.checks.import_roots import checkout_program, describe, import_roots
from loopctl.definitions import Agent, Loop
from loopctl.definitions.sandbox import SandboxMode
from loopctl.delivery import pipeline as delivery
from loopctl.delivery.tools import machine_problems
from loopctl.engine.agents import agent_env
from loopctl.engine.attempt import maker_context
from loopctl.engine.containment import sandbox_for
from loopctl.engine.context import RunContext, Tick, check_commands, check_env, new_run_id
from loopctl.engine.egress_policy import check_summary, egress_lines, egress_summary
from loopctl.engine.prompts import maker_prompt
from loopctl.engine.setup import check_available, check_programs, find_specs, protected_paths
from loopctl.engine.workspace import resolve_base
from loopctl.errors import LoopctlError, UsageError
from loopctl.journal.recorder import Recorder
from loopctl.worktrees import Workspace, branch_name, worktree_path

if TYPE_CHECKING:
    from loopctl.sandbox import Sandbox


@dataclass(frozen=True, slots=True)
class TaskPreview:
    """The maker's first turn on one task."""

    task: str
    title: str
    base_ref: str
    base_sha: str
    worktree: str  # where it would run (not created by a preview)
    branch: str
    prompt: str
    argv: tuple[str, ...]  # empty: loopctl's own agent calls a model API, no program runs
    stdin: bool  # whether the prompt is also written to the agent's stdin
    env_names: tuple[str, ...]
    sandbox: dict[str, Any] | None  # Sandbox.describe(); None when [sandbox] mode = "off"
    # EgressPolicy.describe() of the maker's first turn, plus `stand_in_only` (issue 25)
    egress: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "title": self.title,
            "base_ref": self.base_ref,
            "base_sha": self.base_sha,
            "worktree": self.worktree,
            "branch": self.branch,
            "prompt": self.prompt,
            "argv": list(self.argv),
            "prompt_on_stdin": self.stdin,
            "env": list(self.env_names),
            "sandbox": self.sandbox,
            "egress": self.egress,
        }


@dataclass(frozen=True, slots=True)
class Preview:
    """A dry run: the checks and, per task, what its maker would get on its first attempt."""

    loop: str
    condition: str | None
    maker: str
    backend: str
    judge: str | None
    checks: tuple[tuple[str, ...], ...]
    protected: tuple[str, ...]
    in_place: bool
    sandbox_mode: str
    tasks: tuple[TaskPreview, ...]
    problems: tuple[str, ...]  # what would stop the real run (a missing CLI, no sandbox, …)
    imports: tuple[str, ...] = ()  # which source tree each Python check imports
    warnings: tuple[str, ...] = ()  # what `loopctl validate` warns about, as it prints it
    check_egress: dict[str, Any] | None = None  # [checker] network; None: no sandbox

    def to_json(self) -> dict[str, Any]:
        return {
            "loop": self.loop,
            "condition": self.condition,
            "maker": {"agent": self.maker, "backend": self.backend},
            "judge": self.judge,
            "checks": [list(c) for c in self.checks],
            "protected": list(self.protected),
            "in_place": self.in_place,
            "sandbox_mode": self.sandbox_mode,
            "tasks": [t.to_json() for t in self.tasks],
            "problems": list(self.problems),
            "imports": list(self.imports),
            "warnings": list(self.warnings),
            "check_egress": self.check_egress,
        }


def render(preview: Preview) -> str:
    """A preview for people."""

    lines = [
        f"Dry run of {preview.loop}: nothing runs, no worktree is made, nothing is logged.",
        f"{'Maker:':<10}{preview.maker} ({preview.backend})",
    ]
    if preview.condition:
        lines.append(f"{'Goal:':<10}{preview.condition}")
    lines.append("Checks:")
    lines += [f"  {shlex.join(argv)}" for argv in preview.checks] or ["  (no command)"]
    lines += [f"  note: {line}" for line in preview.imports]
    if preview.check_egress is not None:
        lines += egress_lines(preview.check_egress, "  ")
    if preview.judge:
        lines.append(f"  then the checker agent {preview.judge} judges the diff")
    if preview.protected:
        lines.append("Protected: " + ", ".join(preview.protected))
    if not preview.tasks:
        lines.append("No task found: a run now would work nothing.")
    for task in preview.tasks:
        lines += ["", f"== Task {task.task} ==", f"{'Worktree:':<10}{task.worktree}"]
        lines.append(f"{'Branch:':<10}{task.branch} from {task.base_ref} ({task.base_sha[:12]})")
        if task.argv:
            lines.append(f"{'Argv:':<10}{shlex.join(task.argv)}")
        else:
            lines.append(f"{'Argv:':<10}(none: loopctl's own agent calls the model API)")
        lines.append(f"{'Stdin:':<10}" + ("the prompt" if task.stdin else "empty"))
        lines.append(f"{'Env:':<10}" + " ".join(task.env_names))
        if task.sandbox is None:
            lines.append(f'{"Sandbox:":<10}none ([sandbox] mode = "off"): runs unconfined')
        else:
            box = task.sandbox
            lines.append(f"{'Sandbox:':<10}{box['mechanism']} ({box['program']})")
            lines += [f"  writable: {p}" for p in box["writable"]]
            lines += [f"  hidden:   {p}" for p in box["hidden"]]
            lines += egress_lines(task.egress or {}, "  ")
        lines += ["Prompt (attempt 1):", *(f"  {ln}" for ln in task.prompt.rstrip().splitlines())]
    if preview.warnings or preview.problems:
        lines.append("")
    lines += list(preview.warnings)
    lines += [f"warning: a real run would stop: {p}" for p in preview.problems]
    return "\n".join(lines)


def build_preview(
    rec: Recorder,
    loop: Loop,
    condition: ResolvedCondition | None,
    maker: Agent,
    judge: Agent | None,
    in_place: bool,
    base_ref: str,
) -> Preview:
    """The first maker turn of each task a run would work, built by the code that runs it
    (prompt, environment, sandbox, backend argv), with every side effect left out."""

    root = rec.paths.root
    if not in_place and not git.has_commits(root):
        raise LoopctlError("the repository has no commits yet; commit something first")
    if condition is not None and condition.argv is None and judge is None:
        raise UsageError(
            f"the goal {condition.text!r} is not a known check and no checker agent is set:"
            " pass --check CMD, add it to [conditions] in .loop/config.toml, or set"
            " [defaults] checker"
        )
    problems: list[str] = []
    refusals: list[Callable[[], None]] = [
        lambda: check_available(rec, [a for a in (maker, judge) if a is not None]),
        lambda: check_programs(rec, loop, condition),
        lambda: delivery.check_tools(rec.project, loop),
    ]
    for refusal in refusals:
        try:
            refusal()
        except LoopctlError as exc:
            problems.append(str(exc))
    specs = find_specs(rec, loop, condition, base_ref, Tick())[: loop.budget.max_tasks]
    ctx = RunContext(
        rec=rec,
        project=rec.project,
        loop=loop,
        run_id=new_run_id(rec.clock()),
        condition=condition,
        maker=maker,
        judge=judge,
        in_place=in_place,
        base_ref=base_ref,
        protected=protected_paths(rec, loop, condition, maker, judge),
    )
    worktree_root = rec.project.config.worktree_root or rec.paths.default_worktree_root()
    run_dir = rec.paths.runs_dir / ctx.run_id
    fresh_dir = not run_dir.exists()
    tasks: list[TaskPreview] = []
    for spec in specs:
        try:
            base_sha = resolve_base(rec, spec.base_ref or base_ref)
        except LoopctlError as exc:
            problems.append(f"task {spec.id}: {exc}")
            base_sha = ""
        if in_place:
            workspace = Workspace(root, git.current_branch(root) or "HEAD", base_sha, False)
        else:
            path = worktree_path(worktree_root, loop.name, spec.id)
            workspace = Workspace(path, branch_name(loop.name, spec.id), base_sha, False)
        prompt = maker_prompt(maker_context(ctx, spec, 1, [], ()))
        folder = run_dir / spec.id / "attempt-1"  # named, never made
        prompt_file = folder / "maker-prompt.md"
        env = agent_env(ctx, spec, workspace, 1, maker, "maker", prompt_file)
        sandbox: Sandbox | None = None
        try:
            sandbox = sandbox_for(ctx, workspace, maker, folder / "maker-state", env=env)
        except LoopctlError as exc:
            problems.append(str(exc))
        request = AgentRequest(
            agent=maker,
            role="maker",
            prompt=prompt,
            worktree=workspace.path,
            prompt_file=prompt_file,
            env=env,
            stdout_path=folder / "maker.out",
            stderr_path=folder / "maker.err",
            redactor=rec.redactor,
            loop=loop.name,
            task=spec.id,
            attempt=1,
            skills=tuple(rec.project.skills.values()),
            sandbox=sandbox,
            state_dir=folder / "maker-state",
        )
        try:
            call = backend_for(maker).preview(request)
        finally:
            # A connector's launch files are staged beside the agent's logs: none stay.
            if fresh_dir:
                shutil.rmtree(run_dir, ignore_errors=True)
        tasks.append(
            TaskPreview(
                task=spec.id,
                title=spec.title,
                base_ref=spec.base_ref or base_ref,
                base_sha=base_sha,
                worktree=str(workspace.path),
                branch=workspace.branch,
                prompt=prompt,
                argv=tuple(call.argv),
                stdin=call.stdin is not None,
                env_names=tuple(sorted(call.env)),
                sandbox=sandbox.describe(call.env) if sandbox is not None else None,
                egress=egress_summary(maker, env) if sandbox is not None else None,
            )
        )
    return Preview(
        loop=loop.name,
        condition=condition.text if condition else None,
        maker=maker.name,
        backend=maker.backend.value,
        judge=judge.name if judge else None,
        checks=check_commands(ctx),
        protected=ctx.protected,
        in_place=in_place,
        sandbox_mode=rec.project.config.sandbox.value,
        tasks=tuple(tasks),
        problems=tuple(dict.fromkeys(problems)),
        imports=_imports(
            rec,
            check_commands(ctx),
            Path(tasks[0].worktree) if tasks else None,
            setup=bool(loop.worktree.setup) and not in_place,
        ),
        warnings=validate_warnings(rec),
        check_egress=check_summary(loop.checker)
        if rec.project.config.sandbox is not SandboxMode.OFF
        else None,
    )


def validate_warnings(rec: Recorder) -> tuple[str, ...]:
    """Every warning `loopctl validate` prints, as it prints it: a dry run is where a user
    looks before a run, and a warning seen only after the run cost attempts."""

    found = (*rec.project.warnings, *machine_problems(rec.project))
    return tuple(dict.fromkeys(p.render(rec.paths.root) for p in found if not p.is_error))


def _imports(
    rec: Recorder, commands: Sequence[Sequence[str]], worktree: Path | None, *, setup: bool
) -> tuple[str, ...]:
    """For each check, which source tree its Python imports the project from, when an
    editable install or PYTHONPATH points into the main checkout (and the override used);
    for a Node check, where its node_modules resolves the workspace packages."""

    root = rec.paths.root
    where = worktree if worktree is not None else root
    env = check_env(rec)
    lines: list[str] = []
    for argv in commands:
        program = checkout_program(argv, root, where)
        line = describe(import_roots(program, root, where, env), root, where)
        if line is not None and line not in lines:
            lines.append(line)
    if worktree != root and any(node_links.is_node_command(argv, root) for argv in commands):
        line = node_links.describe(root, setup=setup)
        if line is not None:
            lines.append(line)
    return tuple(lines)

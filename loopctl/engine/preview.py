"""What a run would do, shown before it runs (`goal --dry-run`, `run NAME --dry-run`).

Built by `Engine.preview_goal` / `Engine.preview_loop` from the engine's own prompt, environment
and sandbox code and each backend's own argv, so the preview cannot drift from a real run.
Environment variables appear by name only: their values can be credentials.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
        }


def render(preview: Preview) -> str:
    """A preview for people."""
    import shlex

    lines = [
        f"Dry run of {preview.loop}: nothing runs, no worktree is made, nothing is logged.",
        f"{'Maker:':<10}{preview.maker} ({preview.backend})",
    ]
    if preview.condition:
        lines.append(f"{'Goal:':<10}{preview.condition}")
    lines.append("Checks:")
    lines += [f"  {shlex.join(argv)}" for argv in preview.checks] or ["  (no command)"]
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
            lines.append(f"  network:  {'yes' if box['network'] else 'no'}")
        lines += ["Prompt (attempt 1):", *(f"  {ln}" for ln in task.prompt.rstrip().splitlines())]
    if preview.problems:
        lines.append("")
        lines += [f"warning: a real run would stop: {p}" for p in preview.problems]
    return "\n".join(lines)

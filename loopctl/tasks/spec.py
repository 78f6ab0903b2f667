"""Finding a tick's tasks: the loop's single prompt, or items printed by `[tasks] command`.

Item fields are untrusted data (issue titles, branch names): they only ever fill templates, and
every id is sanitised before it becomes a branch or a path.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopctl.definitions.loops import Loop
from loopctl.errors import LoopctlError
from loopctl.text import clean_data
from loopctl.worktrees import sanitize_task_id

if TYPE_CHECKING:
    from loopctl.journal.events import Event

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][\w.]*)\}")
MAX_TASK_OUTPUT = 8 * 1024 * 1024
# Far beyond any real task list (gh's JSON nests 4 deep), far below the parser's own limit.
MAX_JSON_DEPTH = 64
MAX_JSON_DIGITS = 64


class TaskSourceError(LoopctlError):
    """The task command failed or printed something that is not a list of tasks."""


@dataclass(frozen=True, slots=True)
class TaskSpec:
    id: str  # sanitised: safe as a path component and a branch name part
    raw_id: str
    prompt: str
    title: str = ""
    base_ref: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


def render_template(template: str, fields: Mapping[str, Any]) -> str:
    """Fill `{name}` / `{a.b}` from fields; `{{` and `}}` are literal braces."""

    def lookup(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        value: Any = fields
        for part in match.group(1).split("."):
            if not isinstance(value, Mapping) or part not in value:
                known = ", ".join(sorted(fields)) or "none"
                raise TaskSourceError(
                    f"template {template!r} uses {{{match.group(1)}}}, but the task has no such"
                    f" field (fields: {known})"
                )
            value = value[part]
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    return _PLACEHOLDER.sub(lookup, template)


class _Unsafe(ValueError):
    """JSON that parses but cannot be kept: NaN, infinities, huge numbers, deep nesting."""


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Unsafe(f"number {text[:20]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_JSON_DIGITS:
        raise _Unsafe(f"a number has more than {MAX_JSON_DIGITS} digits")
    return int(text)


def _no_constant(name: str) -> Any:
    raise _Unsafe(f"{name} is not a JSON value")


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in `value`, counted without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict | list):
            deepest = max(deepest, depth)
            children = current.values() if isinstance(current, dict) else current
            stack.extend((child, depth + 1) for child in children)
    return deepest


def load_json(text: str) -> Any:
    """Parse JSON printed by a program we do not control, as strictly as the event log stores it.

    NaN and infinities cannot be written to the log, a number of thousands of digits cannot
    even be read, and nesting deeper than the parser's stack raises RecursionError: each is a
    ValueError here, never an unexpected error.
    """
    try:
        value = json.loads(
            text, parse_float=_finite, parse_int=_bounded_int, parse_constant=_no_constant
        )
    except RecursionError:
        raise _Unsafe("nesting is too deep") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise _Unsafe(f"nesting is deeper than {MAX_JSON_DEPTH} levels")
    return value


def _why(exc: ValueError) -> str:
    return exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)


def parse_task_output(stdout: str) -> list[dict[str, Any]]:
    """A JSON array of objects, or JSON lines of objects."""
    text = stdout.strip()
    if not text:
        return []
    try:
        value = load_json(text)
    except _Unsafe as exc:
        raise TaskSourceError(f"task command printed JSON loopctl cannot use: {exc}") from None
    except ValueError:
        value = None
        items: list[Any] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append(load_json(line))
            except _Unsafe as exc:
                raise TaskSourceError(
                    f"task command output line {number} holds JSON loopctl cannot use: {exc}"
                ) from None
            except ValueError as exc:
                raise TaskSourceError(
                    f"task command output line {number} is not JSON: {_why(exc)}"
                ) from None
        value = items
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise TaskSourceError("task command must print a JSON array of objects or JSON lines")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise TaskSourceError(f"task #{index + 1} from the task command is not a JSON object")
    return value


def changed_text(changed: Sequence[str]) -> str:
    """What `{changed}` becomes in a template: the paths a watch trigger saw, one a line."""
    return "\n".join(changed)


def single_task(loop: Loop, changed: Sequence[str] = ()) -> TaskSpec:
    """A loop without [tasks] has one task: its prompt (or its goal)."""
    prompt = loop.prompt or f"Make this condition hold: {loop.goal}"
    # Only `{changed}` is filled: a plain prompt may hold other braces (code, JSON) verbatim.
    prompt = prompt.replace("{changed}", changed_text(changed))
    return TaskSpec(id="main", raw_id="main", prompt=prompt, title=loop.description)


def tasks_from_items(
    loop: Loop, items: list[dict[str, Any]], changed: Sequence[str] = ()
) -> list[TaskSpec]:
    assert loop.tasks is not None
    source = loop.tasks
    specs: list[TaskSpec] = []
    seen: set[str] = set()
    for raw_item in items:
        # Issue titles and bodies are anyone's text: no escape sequences reach the log or a human.
        item: dict[str, Any] = clean_data(raw_item)
        raw_id = render_template(source.id, item)
        task_id = sanitize_task_id(raw_id)
        if task_id in seen:
            continue
        seen.add(task_id)
        prompt_template = source.prompt or loop.prompt or "{title}"
        fields = {"changed": changed_text(changed), **item}  # an item's own field wins
        try:
            prompt = render_template(prompt_template, fields)
        except TaskSourceError:
            prompt = json.dumps(item, ensure_ascii=False)
        base = render_template(source.base, item) if source.base else None
        title = item.get("title") if isinstance(item.get("title"), str) else ""
        specs.append(TaskSpec(task_id, raw_id, prompt, str(title), base, dict(item)))
    return specs


def discover(
    loop: Loop,
    repo: Path,
    *,
    timeout: float = 300.0,
    changed: Sequence[str] = (),
    events: Sequence[Event] = (),
) -> list[TaskSpec]:
    """Run the loop's task command (or take its single prompt) and template each task.

    `changed` (from a watch trigger) is offered to prompt templates as `{changed}`; `events`
    (the log so far) tell a GitHub source which review comments are new.
    """
    if loop.tasks is None:
        return [single_task(loop, changed)]
    if loop.tasks.source == "github":
        from loopctl.tasks import github as github_tasks

        return github_tasks.discover(loop, repo, events, changed)
    from loopctl import process

    # The task command is the user's own (e.g. `gh pr list`) run in their checkout, so it keeps
    # their environment; only git's redirection variables are dropped.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    done = process.run(
        list(loop.tasks.command), cwd=repo, env=env, timeout=timeout, tail_bytes=MAX_TASK_OUTPUT
    )
    if done.timed_out:
        raise TaskSourceError(f"task command timed out after {int(timeout)}s")
    if done.exit_code != 0:
        tail = done.stderr_tail.strip().splitlines()[-1:] or [""]
        raise TaskSourceError(f"task command exited {done.exit_code}: {tail[0][:300]}")
    return tasks_from_items(loop, parse_task_output(done.stdout_tail), changed)


def requeued_specs(events: Sequence[Event], loop: str) -> list[TaskSpec]:
    """The tasks `retry`/`reply` queued for `loop`, as the engine's next run should find them."""
    specs = []
    from loopctl.journal.history import requeued_tasks

    for event in requeued_tasks(events, loop):
        data = event.data
        fields = data.get("fields")
        specs.append(
            TaskSpec(
                id=str(event.task),
                raw_id=str(data.get("raw_id") or event.task),
                prompt=str(data.get("prompt") or ""),
                title=str(data.get("title") or ""),
                base_ref=data.get("base_ref") if isinstance(data.get("base_ref"), str) else None,
                fields=dict(fields) if isinstance(fields, dict) else {},
            )
        )
    return specs

"""What every task source shares: TaskSpec, templates, strict JSON, a loop's single task.

Item fields are untrusted data (issue titles, branch names): they only ever fill templates, and
every id is sanitised before it becomes a branch or a path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopctl.definitions.loops import Loop
from loopctl.errors import LoopctlError
from loopctl.journal.events import Event
from loopctl.journal.history import requeued_tasks

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][\w.]*)\}")
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


class UnsafeJson(ValueError):
    """JSON that parses but cannot be kept: NaN, infinities, huge numbers, deep nesting."""


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise UnsafeJson(f"number {text[:20]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_JSON_DIGITS:
        raise UnsafeJson(f"a number has more than {MAX_JSON_DIGITS} digits")
    return int(text)


def _no_constant(name: str) -> Any:
    raise UnsafeJson(f"{name} is not a JSON value")


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
        raise UnsafeJson("nesting is too deep") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise UnsafeJson(f"nesting is deeper than {MAX_JSON_DEPTH} levels")
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


def requeued_specs(events: Sequence[Event], loop: str) -> list[TaskSpec]:
    """The tasks `retry`/`reply` queued for `loop`, as the engine's next run should find them."""
    specs = []
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

"""Tasks from `[tasks] command`: the user's own program prints JSON items, each templated.

The command runs in the user's checkout with their environment (it is theirs, e.g. `gh pr
list`); what it prints is untrusted and parsed strictly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loopctl import process
from loopctl.definitions.loops import Loop
from loopctl.tasks.spec import (
    TaskSourceError,
    TaskSpec,
    UnsafeJson,
    changed_text,
    load_json,
    render_template,
)
from loopctl.text import clean_data
from loopctl.worktrees import sanitize_task_id

MAX_TASK_OUTPUT = 8 * 1024 * 1024


def discover(
    loop: Loop, repo: Path, *, timeout: float = 300.0, changed: Sequence[str] = ()
) -> list[TaskSpec]:
    """Run the loop's task command and template each item it prints."""
    assert loop.tasks is not None
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


def _why(exc: ValueError) -> str:
    return exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)


def parse_task_output(stdout: str) -> list[dict[str, Any]]:
    """A JSON array of objects, or JSON lines of objects."""
    text = stdout.strip()
    if not text:
        return []
    try:
        value = load_json(text)
    except UnsafeJson as exc:
        raise TaskSourceError(f"task command printed JSON loopctl cannot use: {exc}") from None
    except ValueError:
        value = None
        items: list[Any] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append(load_json(line))
            except UnsafeJson as exc:
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

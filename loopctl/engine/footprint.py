"""An attempt's footprint, measured and recorded (issue 31, item 1).

After the checks, loopctl measures what the attempt touched from what happened, never from the
agent's account: the diff from the base to the checked snapshot (files, renames under both
names, links and where they point, lines added and removed), the maker's event stream
(`maker.out`, read by backends.stream_steps: tools, commands, files written even if deleted
since) and the hosts its egress proxy was asked for (agent_finished's `hosts_asked`, and
`network_refused`). It is held against the scope the task runs under (the loop's `[scope]`,
narrowed by the task's own `scope` field), scored against the loop's recent footprints
(checks.drift), and recorded as one `attempt_footprint` event.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from loopctl import git
from loopctl.backends import stream_steps
from loopctl.checks import claims
from loopctl.checks.drift import HISTORY, Drift, drift
from loopctl.checks.footprint import Excursion, Footprint, outside
from loopctl.definitions.scope import ScopeSpec, narrowed
from loopctl.engine.context import RunContext, attempt_dir, ctx_events
from loopctl.errors import LoopctlError
from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import AgentFinished, AttemptFootprint, NetworkRefused, read
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import Workspace

_LINK_MODES = ("new file mode 120000", "new mode 120000")


def task_scope(ctx: RunContext, spec: TaskSpec) -> ScopeSpec:
    """The scope `spec` runs under: the loop's, narrowed by the task's `scope` paths."""
    given = spec.fields.get("scope")
    paths = [given] if isinstance(given, str) else given if isinstance(given, list) else []
    return narrowed(ctx.loop.scope, [str(p) for p in paths if isinstance(p, str) and p])


def measure(
    ctx: RunContext, spec: TaskSpec, workspace: Workspace, number: int, tree: str | None
) -> Footprint:
    """What attempt `number` touched (`tree`: the checked snapshot; None: the worktree)."""
    root = ctx.paths.root
    files: list[str] = []
    patch = ""
    try:
        if tree is not None:
            files = git.tree_changes(root, workspace.base_sha, tree)
            patch = git.patch_between(root, workspace.base_sha, tree).decode("utf-8", "replace")
        else:
            files = git.changed_paths(workspace.path, workspace.base_sha)
            patch = git.diff_text(workspace.path, workspace.base_sha, 20_000_000)
    except LoopctlError:
        pass  # no diff to read: the stream and the proxy still say what happened
    added, removed = claims.diff_size(patch)
    events = ctx.log.read()
    turns = [
        turn
        for e in ctx_events(events, ctx.run_id, spec.id, EventType.AGENT_FINISHED)
        if (turn := read(AgentFinished, e)).attempt == number and turn.role in (None, "maker")
    ]
    hosts: list[str] = []
    for turn in turns:
        asked = turn.extra.get("hosts_asked")
        hosts += [str(h) for h in asked] if isinstance(asked, list) else []
    for e in ctx_events(events, ctx.run_id, spec.id, EventType.NOTE):
        refused = read(NetworkRefused, e)
        if refused.attempt == number and refused.role == "maker":
            hosts += list(refused.hosts)
    steps = None
    out = attempt_dir(ctx, spec.id, number) / "maker.out"
    if out.is_file():
        backend = ctx.maker.backend.value
        steps = stream_steps.read(backend, out.read_text("utf-8", "replace"), workspace.path)
    return Footprint(
        files=tuple(files),
        written=tuple(steps.written) if steps else (),
        links=links_in(patch),
        commands=tuple(steps.commands) if steps else (),
        tools=tuple(steps.tools) if steps else (),
        hosts=tuple(dict.fromkeys(hosts)),
        added=added,
        removed=removed,
        stream=steps is not None,
    )


def links_in(patch: str) -> tuple[tuple[str, str], ...]:
    """Each symlink a diff adds or makes, with where it points (relative to the repository,
    or as written when absolute)."""
    found: list[tuple[str, str]] = []
    path: str | None = None
    link = False
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            path, link = _new_path(line), False
        elif line.startswith(_LINK_MODES):
            link = True
        elif link and path and line.startswith("+") and not line.startswith("+++"):
            target = line[1:]
            where = (
                target
                if target.startswith("/")
                else posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
            )
            found.append((path, where))
            link = False
    return tuple(found)


def _new_path(header: str) -> str | None:
    """The `b/` side of a `diff --git a/x b/x` line (an unquoted, space-free name)."""
    parts = header.split(" ")
    return parts[-1][2:] if len(parts) == 4 and parts[-1].startswith("b/") else None


def history(events: Sequence[Event], loop: str, before: int) -> list[Footprint]:
    """The loop's last HISTORY footprints recorded before sequence number `before`."""
    found = [
        Footprint.from_json(read(AttemptFootprint, e).footprint)
        for e in events
        if e.type == EventType.ATTEMPT_FOOTPRINT and e.loop == loop and e.seq < before
    ]
    return found[-HISTORY:]


def record(
    ctx: RunContext, spec: TaskSpec, workspace: Workspace, number: int, tree: str | None
) -> tuple[Excursion, ...]:
    """Measure attempt `number`, record its `attempt_footprint`, return its excursions."""
    scope = task_scope(ctx, spec)
    footprint = measure(ctx, spec, workspace, number, tree)
    found = outside(footprint, scope)
    events = ctx.log.read()
    last = events[-1].seq + 1 if events else 0
    score: Drift = drift(footprint, found, history(events, ctx.loop.name, last))
    ctx.record(
        spec.id,
        AttemptFootprint(
            attempt=number,
            footprint=footprint.to_json(),
            outside=tuple(e.to_json() for e in found),
            drift=score.to_json(),
            scope=scope.to_json(),
        ),
    )
    return found


def recorded(events: Sequence[Event], run: str, task: str, number: int) -> AttemptFootprint | None:
    """The footprint recorded for attempt `number` of `task` in `run`, if any."""
    for e in reversed(ctx_events(events, run, task, EventType.ATTEMPT_FOOTPRINT)):
        found = read(AttemptFootprint, e)
        if found.attempt == number:
            return found
    return None

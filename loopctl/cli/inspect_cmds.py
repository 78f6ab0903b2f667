"""Read-only commands: status, log, replay, worktrees (the inbox is in inbox_cmds)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from loopctl.cli import completion
from loopctl.cli.boundary import boundary
from loopctl.cli.options import JsonFlag, load_here


def _invalid_json(project: Any, bad: Any) -> dict[str, Any] | None:
    """Where an invalid loop's first error is, for `status --json`."""
    if bad is None:
        return None
    first = bad.problems[0] if bad.problems else None
    return {
        "path": str(bad.path.relative_to(project.root)),
        "line": first.line if first else None,
        "message": first.message if first else "invalid",
        "errors": len(bad.problems),
    }


def _never_run(project: Any, names: list[str]) -> list[Any]:
    """Status rows for loops the log has never seen (an invalid loop has no other row)."""
    if not names:
        return []
    from loopctl.commands.status import LoopStatus
    from loopctl.journal.inbox import open_items

    waiting = open_items(_log(project).read())
    return [
        LoopStatus(
            loop=name,
            trigger="-",
            last_run=None,
            last_started=None,
            last_status=None,
            tokens=0,
            cost_usd=0.0,
            max_tokens=None,
            max_usd=None,
            open_items=sum(1 for i in waiting if i.loop == name),
            running_pid=None,
        )
        for name in names
    ]


def _print_review(project: Any) -> None:
    """The reviewer's throughput, once a cap is set or anything was ever put to a human."""
    from loopctl.commands.status import review_throughput

    review = review_throughput(project)
    cap = project.config.review.max_open
    if cap is None and not review.decided and not review.open_now:
        return
    limit = f" (max_open {cap})" if cap is not None else ""
    print(f"\n{review.describe()}{limit}")


def _log(project: Any) -> Any:
    from loopctl.journal.events import EventLog

    return EventLog(project.paths.events_file)


def status(json_out: JsonFlag = False) -> None:
    """Loops, their last run, spend against budget, and the open inbox."""
    from loopctl.commands.status import loop_statuses
    from loopctl.definitions.project import DefinitionKind

    project = load_here(strict=False)
    statuses = loop_statuses(project)
    # A loop whose file has errors is listed as invalid, never left out as if it did not exist.
    invalid = {bad.name: bad for bad in project.invalid if bad.kind is DefinitionKind.LOOP}
    statuses += _never_run(project, sorted(set(invalid) - {s.loop for s in statuses}))
    statuses.sort(key=lambda s: s.loop)
    if json_out:
        from loopctl.cli.render import print_json
        from loopctl.scheduling.daemon import up_info

        running = up_info(project.paths)
        print_json(
            "status",
            [
                {**s.to_json(), "invalid": _invalid_json(project, invalid.get(s.loop))}
                for s in statuses
            ],
            # `up` beside the loops: its pid and its mandate (deadline, cap, spent so far).
            {"up": running.to_json() if running is not None else None},
        )
        return
    from loopctl.cli.render import print_table
    from loopctl.commands.status import relative

    rows = []
    for s in statuses:
        spend = f"{s.tokens} tok" + (f" ${s.cost_usd:.2f}" if s.cost_usd else "")
        if s.max_usd:
            spend += f" / ${s.max_usd:.2f}"
        state = s.state
        if s.run_pid and not s.running_pid and s.waiting_for_review is None:
            state = f"scheduled (run pid {s.run_pid})"
        if s.paused and not s.running_pid:
            state = s.paused
        bad = invalid.get(s.loop)
        if bad is not None:
            state = f"INVALID: {bad.first(project.root)}"
        rows.append(
            (
                s.loop,
                s.trigger,
                state,
                s.last_outcome or "-",
                relative(s.last_started),
                relative(s.next_tick),
                spend,
                str(s.open_items),
            )
        )
    from loopctl.scheduling.daemon import up_info

    up = up_info(project.paths)
    foreground = [f"{s.loop} (pid {s.run_pid})" for s in statuses if s.run_pid]
    if up:
        mandate = f"; {up.mandate}" if up.mandate else ""
        print(f"up: running (pid {up.pid}, started {relative(up.since)}){mandate}")
    elif foreground:
        # Not `up`, but loops are scheduled all the same: saying "not running" would mislead.
        print(f"scheduled by loopctl run: {', '.join(foreground)}; loopctl up is not running")
    else:
        print("up: not running")
    print_table(
        ("LOOP", "TRIGGER", "STATE", "OUTCOME", "LAST RUN", "NEXT TICK", "SPEND", "INBOX"),
        rows,
        empty='no loops yet: `loopctl init`, or `loopctl goal "tests green"`',
    )
    _print_review(project)
    drifting = [s for s in statuses if s.drift is not None and s.drift.scoped]
    if drifting:
        print("\ndrift (latest measured attempt; 0 = as declared and as usual):")
        for s in drifting:
            assert s.drift is not None
            where = f"{s.drift.task} attempt {s.drift.attempt}"
            print(f"  {s.loop}: {s.drift.describe()} ({where})")
    from loopctl.journal.state import describe_spend
    from loopctl.journal.warmth import WARM_COUNTS

    # Any warm-workspace activity counts: a loop whose only wins are seeds or skipped setups
    # is shown too (as the dashboard's loops page does).
    warm = [s for s in statuses if any(s.warm.get(key) for key in WARM_COUNTS)]
    if warm:
        print("\nwarm workspaces (all runs):")
        for s in warm:
            w = s.warm
            print(
                f"  {s.loop}: saved {w['saved_s']:.1f}s — {w['pool_hits']} pool hits,"
                f" {w['seed_hits']} seed hits, {w['setups_skipped']} setups skipped,"
                f" {w['setups_run']} run"
            )
    spent = [(s.loop, task, by) for s in statuses for task, by in s.by_task.items() if by]
    if spent:
        print("\nspend of each loop's last run, by task and backend:")
        for loop_name, task, by in spent:
            print(f"  {loop_name}/{task}: {describe_spend(by)}")
    if project.errors:
        print(f"{len(project.errors)} definition error(s): run `loopctl validate`", file=sys.stderr)


def log(
    loop: Annotated[
        str | None,
        typer.Argument(
            metavar="NAME", help="Only this loop's events.", autocompletion=completion.loop_names
        ),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new events.")
    ] = False,
    json_out: JsonFlag = False,
) -> None:
    """The event log, oldest first; an unknown loop NAME is a usage error (exit 2)."""
    import json

    from loopctl.commands.status import describe

    project = load_here(strict=False)
    events_log = _log(project)
    events = events_log.read()
    if loop is not None:
        _known_loop(project, events, loop)

    def show(event: Any) -> None:
        if loop is not None and event.loop != loop:
            return
        if json_out:
            print(json.dumps({"seq": event.seq, **event.to_json()}, ensure_ascii=False), flush=True)
        else:
            where = f"{event.loop}/{event.run}" if event.run else (event.loop or "-")
            print(f"{event.seq:>6} {event.ts[:19]} {where} {describe(event)}", flush=True)

    for event in events:
        show(event)
    if follow:
        last = events[-1].seq if events else 0
        try:
            for event in events_log.follow(last, stop=lambda: False):
                show(event)
        except KeyboardInterrupt:
            raise typer.Exit(0) from None


def _known_loop(project: Any, events: list[Any], name: str) -> None:
    """Refuse a loop that is neither defined nor in the log (a typo would print nothing)."""
    known = {*project.loops, *(bad.name for bad in project.invalid), "goal"}
    if name in known:
        return
    known |= {e.loop for e in events if e.loop}
    if name in known:
        return  # a loop since deleted: its history is still there to read
    from difflib import get_close_matches

    from loopctl.errors import UsageError

    close = get_close_matches(name, sorted(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    listed = ", ".join(sorted(known - {"goal"})) or "none"
    raise UsageError(f"no loop {name!r} (loops: {listed}){hint}")


def replay(
    run_id: Annotated[
        str,
        typer.Argument(
            metavar="RUN", help="Run id (a unique prefix works).", autocompletion=completion.run_ids
        ),
    ],
    json_out: JsonFlag = False,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Re-run it against its recorded model cassettes, with no model and no network;"
            " exit 1 at the first request that diverges.",
        ),
    ] = False,
    keep_going: Annotated[
        bool,
        typer.Option(
            "--keep-going", help="With --offline: after a divergence, answer in recorded order."
        ),
    ] = False,
    definitions: Annotated[
        Path | None,
        typer.Option(
            "--definitions",
            metavar="DIR",
            help="With --offline: read the .loop/ definitions from DIR, not the checkout.",
        ),
    ] = None,
) -> None:
    """A past run rebuilt from its events, as a readable timeline; or re-run offline."""
    if offline:
        from loopctl.cli.replay_offline import offline_replay

        offline_replay(run_id, json_out=json_out, keep_going=keep_going, definitions=definitions)
        return
    from loopctl.cli.live import failure_lines, needs_you_lines
    from loopctl.cli.phases import PhaseClock
    from loopctl.commands.status import describe
    from loopctl.journal.history import find_run
    from loopctl.journal.outcomes import of_run, of_task

    project = load_here(strict=False)
    run = find_run(_log(project).read(), run_id)
    if json_out:
        from loopctl.cli.render import print_json

        print_json(
            "replay",
            {
                "run": run.run,
                "loop": run.loop,
                "status": run.status,
                "outcome": of_run(run),
                "tasks": {
                    name: {
                        "status": t.status,
                        "outcome": of_task(run, t),
                        "reason": t.reason,
                        "commit": t.commit,
                        "attempts": [
                            {
                                "number": a.number,
                                "verdict": a.verdict,
                                "reason": a.reason,
                                "fingerprint": a.fingerprint,
                                "agent_status": a.agent_status,
                                "agent_output": a.agent_tail,
                            }
                            for a in t.attempts
                        ],
                    }
                    for name, t in run.tasks.items()
                },
                "events": [{"seq": e.seq, **e.to_json()} for e in run.events],
            },
        )
        return
    ended = of_run(run)
    print(f"run {run.run} · loop {run.loop} · {run.status}" + (f" · {ended}" if ended else ""))
    start = run.events[0].ts if run.events else run.started
    from datetime import datetime

    t0 = datetime.fromisoformat(start)
    phases = PhaseClock()
    for event in run.events:
        offset = (datetime.fromisoformat(event.ts) - t0).total_seconds()
        print(f"  +{offset:7.1f}s  {describe(event)}")
        for line in [*failure_lines(event), *needs_you_lines(event)]:
            print(f"            {line}")
        for line in phases.lines(event):
            print(f"            {line}")
    for name, task in run.tasks.items():
        commit = f" commit {task.commit[:12]}" if task.commit else ""
        print(f"task {name}: {task.status} after {len(task.attempts)} attempt(s){commit}")
        if (named := of_task(run, task)) is not None:
            print(f"  outcome: {named}")


worktrees_app = typer.Typer(help="loopctl's worktrees: list them, or prune finished ones.")


@worktrees_app.callback(invoke_without_command=True)
@boundary
def worktrees(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """List loopctl's worktrees with the state of their task."""
    if ctx.invoked_subcommand is not None:
        return
    from loopctl.commands.worktrees import worktree_report

    project = load_here(strict=False)
    rows = worktree_report(project)
    if json_out:
        from loopctl.cli.render import print_json

        print_json("worktrees", [r.to_json() for r in rows])
        return
    from loopctl.cli.render import print_table

    print_table(
        ("LOOP", "TASK", "BRANCH", "TASK STATE", "DIRTY", "PATH"),
        [
            (r.loop, r.task, r.branch, r.task_status, "yes" if r.dirty else "no", r.path)
            for r in rows
            if r.kind == "task"
        ],
        empty="no loopctl worktrees",
    )
    for r in rows:
        if r.resume:
            print(f"{r.loop}/{r.task} was interrupted; resume it with: {r.resume}")
    warm = [r for r in rows if r.kind != "task"]
    if warm:
        from loopctl.cli.render import human_bytes

        print()
        print_table(
            ("POOLED / SEED", "LOOP", "SIZE", "FILES", "HOLDS", "PATH"),
            [
                (
                    r.kind,
                    r.loop or "-",
                    human_bytes(r.bytes or 0),
                    "-" if r.files is None else str(r.files),
                    r.detail or "-",
                    r.path,
                )
                for r in warm
            ],
            empty="",
        )


@worktrees_app.command("prune")
@boundary
def worktrees_prune(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would go.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Remove worktrees of finished tasks, following each loop's `keep` policy."""
    from loopctl.commands.worktrees import prune

    project = load_here(strict=False)
    removed = prune(project, dry_run=dry_run)
    if json_out:
        from loopctl.cli.render import print_json

        print_json("pruned", [r.to_json() for r in removed])
        return
    verb = "would remove" if dry_run else "removed"
    for r in removed:
        if r.kind == "task":
            print(f"{verb} {r.path} ({r.loop}/{r.task}: {r.task_status})")
        else:
            print(f"{verb} {r.kind} {r.path} ({r.bytes or 0} bytes)")
    if not removed:
        print("nothing to prune")


def register(app: typer.Typer) -> None:
    app.command()(boundary(status))
    app.command()(boundary(log))
    app.command()(boundary(replay))
    app.add_typer(worktrees_app, name="worktrees")

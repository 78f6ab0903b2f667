"""`loopctl inbox`: list, show, diff, approve, reject, retry, dismiss, reply."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from loopctl.cli import completion
from loopctl.cli.boundary import boundary
from loopctl.cli.options import JsonFlag, load_here

inbox_app = typer.Typer(help="What needs a human: approvals, failures, escalations.")

ItemId = Annotated[
    str,
    typer.Argument(
        metavar="ID", help="Item id (a unique prefix works).", autocompletion=completion.inbox_ids
    ),
]


def _human_only(command: str) -> None:
    """Refuse (exit 1) before anything is read or decided when an agent runs this command."""
    from loopctl.commands.agent_context import refuse_inside_agent
    from loopctl.paths import ProjectPaths, find_repo_root

    refuse_inside_agent(f"inbox {command}", ProjectPaths(find_repo_root()).events_file)


def _finish(result: Any, json_out: bool) -> None:
    if json_out:
        from loopctl.cli.render import print_json

        print_json("inbox_action", result.to_json())
    elif result.ok:
        print(result.message)
    else:
        from loopctl.cli.reporting import eprint

        eprint(f"loopctl: {result.message}")
    if not result.ok:
        raise typer.Exit(1)


@inbox_app.callback(invoke_without_command=True)
@boundary
def inbox(
    ctx: typer.Context,
    show_all: Annotated[bool, typer.Option("--all", help="Include closed items.")] = False,
    loop: Annotated[
        str | None, typer.Option("--loop", metavar="NAME", help="Only this loop's items.")
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            metavar="KIND",
            help="Only approval, failed, escalation, unhandled or proposal items.",
        ),
    ] = None,
    digest: Annotated[
        bool, typer.Option("--digest", help="The daily summary: what ran, what waits for you.")
    ] = False,
    sort: Annotated[
        str,
        typer.Option(
            "--sort",
            metavar="ORDER",
            help="age (oldest first, the default) or risk (riskiest first, with its factors).",
        ),
    ] = "age",
    json_out: JsonFlag = False,
) -> None:
    """List open inbox items: id, kind, state, loop, task, age, summary."""
    if ctx.invoked_subcommand is not None:
        return
    from loopctl.cli.plain import inbox_list

    code = inbox_list(show_all, json_out, loop=loop, kind=kind, digest=digest, sort=sort)
    if code:
        raise typer.Exit(code)


NoPager = Annotated[
    bool, typer.Option("--no-pager", help="Print straight to the terminal, without $PAGER.")
]


@inbox_app.command("show")
@boundary
def show(
    item_id: ItemId,
    stat: Annotated[
        bool, typer.Option("--stat", help="The diffstat only, not an approval's whole patch.")
    ] = False,
    no_pager: NoPager = False,
    json_out: JsonFlag = False,
) -> None:
    """The evidence: branch, commit, diff, last check output, attempts, spend, pending action.

    An approval shows its whole patch (paged and coloured on a terminal); --stat the short form.
    """
    from loopctl.commands.inbox_show import show as show_item

    detail = show_item(load_here(strict=False), item_id, with_patch=not stat)
    if json_out:
        from loopctl.cli.render import print_json

        print_json("item", detail.to_json())
        return
    from loopctl.cli import pager
    from loopctl.text import strip_controls

    # Evidence, attempts, check output and the patch are agent text, possibly from a log older
    # than the cleaning at the source: nothing in them may drive the approver's terminal.
    text = strip_controls(render_detail(detail))
    if detail.patch:
        body = (
            pager.coloured_diff(detail.patch)
            if pager.colour_wanted()
            else strip_controls(detail.patch)
        )
        text += "\n\nPatch:\n" + body
    pager.show(text, page=not no_pager)


@inbox_app.command("diff")
@boundary
def diff(item_id: ItemId, no_pager: NoPager = False) -> None:
    """The patch of an approval alone: exact bytes when piped (`| git apply`), paged on a terminal.

    Exits 1 for an item that is not an approval of a commit.
    """

    from loopctl.cli import pager
    from loopctl.commands.inbox_show import patch

    data = patch(load_here(strict=False), item_id)
    if not pager.on_terminal():
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    text = data.decode("utf-8", "replace")
    from loopctl.text import strip_controls

    shown = pager.coloured_diff(text) if pager.colour_wanted() else strip_controls(text)
    pager.show(shown, page=not no_pager)


def _tampering_lines(found: Any) -> list[str]:
    """Every line the sabotage scan quoted, with its rule and why (the summary shows three)."""
    from loopctl.text import strip_controls

    if not isinstance(found, list) or not found:
        return []
    lines = ["Looks like it tampers with the test run:"]
    for f in found:
        if isinstance(f, dict):
            where = strip_controls(f"{f.get('path')}:{f.get('line')}")
            lines.append(f"  {where}: {strip_controls(str(f.get('text')))}")
            lines.append(f"    {f.get('rule')}: {f.get('reason')}")
    return [*lines, ""]


def _proposal_lines(item: Any) -> list[str]:
    """A proposal's change to the definitions, as `inbox approve` would apply it."""
    if item.kind != "proposal":
        return []
    evidence = item.evidence
    paths = ", ".join(str(p) for p in evidence.get("paths") or ())
    lines = [
        f"Proposes changing: {paths} ({evidence.get('source')}, against"
        f" {str(evidence.get('base'))[:12]}); approving commits it if validate and the"
        " regression gate pass"
    ]
    if item.refused:
        lines.append(f"Refused: {item.refused}")
    rationale = str(evidence.get("rationale") or "").strip()
    if rationale:
        lines += ["Rationale:", *(f"  {ln}" for ln in rationale.splitlines())]
    lines += ["Proposed diff:", *(f"  {ln}" for ln in str(evidence.get("diff") or "").splitlines())]
    return [*lines, ""]


def render_detail(detail: Any) -> str:
    """`inbox show` for people."""
    item = detail.item
    where = "/".join(p for p in (item.loop, item.task) if p) or "-"
    if not item.is_open:
        state = f"closed: {item.resolution} {str(item.closed)[:19]}"
    elif item.approved:
        state = f"approved {item.approved[:19]}, delivery not finished"
    elif item.refused:
        state = "open (the last approval was refused)"
    else:
        state = "open"
    lines = [f"{item.id} · {item.kind} · {where} · {state}", item.summary, ""]
    if detail.action:
        lines.append(f"Awaiting approval: {detail.action}")
        for then in detail.then:
            lines.append(f"  then: {then}")
        if item.refused:
            lines.append(f"Refused: {item.refused}")
        lines.append("")
    lines += _proposal_lines(item)
    if detail.question:
        lines += ["The agent asks:", *(f"  {q}" for q in detail.question.splitlines()), ""]
    lines += _tampering_lines(item.evidence.get("sabotage"))
    if detail.claims is not None:
        from loopctl.journal.claimed import text_lines

        lines += [*text_lines(detail.claims), ""]
    facts = [
        ("Run", item.run),
        ("Task status", detail.task_status),
        ("Branch", detail.branch),
        ("Commit", detail.commit),
        ("Base", detail.base_sha),
        ("Fingerprint", detail.fingerprint),
        ("Reason", item.evidence.get("reason")),
        ("Worktree", item.evidence.get("worktree")),
    ]
    for label, value in facts:
        if value:
            lines.append(f"{label + ':':<13}{value}")
    spend = f"{detail.tokens} tokens" + (f", ${detail.cost_usd:.2f}" if detail.cost_usd else "")
    lines.append(f"{'Spend:':<13}{spend}")
    if detail.attempts:
        lines.append("Attempts:")
        for a in detail.attempts:
            fp = f" [{a['fingerprint']}]" if a.get("fingerprint") else ""
            reason = " ".join(str(a.get("reason") or "").split())[:120]
            lines.append(f"  {a['number']}: {a['verdict']}{fp} {reason}".rstrip())
    if detail.diff_stat:
        lines += ["Diff:", *(f"  {ln}" for ln in detail.diff_stat.splitlines())]
    if detail.check_output.strip():
        tail = detail.check_output.rstrip().splitlines()[-30:]
        lines += ["Last check output:", *(f"  {ln}" for ln in tail)]
    if detail.agent_output.strip():
        status = f" ({detail.agent_status})" if detail.agent_status else ""
        tail = detail.agent_output.rstrip().splitlines()[-8:]
        lines += [f"Agent output{status}, last lines:", *(f"  {ln}" for ln in tail)]
    if detail.network_refused:
        lines.append("Network refused (not in the agent's allowed hosts, or a check's):")
        lines += [f"  {host}" for host in detail.network_refused]
    if detail.attempt_dir:
        lines.append(f"{'Attempt:':<13}{detail.attempt_dir} (prompt, agent and check output)")
    if detail.history:
        lines += ["History:", *(f"  {h}" for h in detail.history)]
    if item.is_open:
        acts = {
            "approval": f"loopctl inbox approve {item.id}  |  loopctl inbox reject {item.id}",
            "proposal": f"loopctl inbox approve {item.id}  |  loopctl inbox reject {item.id}",
            "escalation": f'loopctl inbox reply {item.id} "answer"  |  dismiss {item.id}',
            "failed": f"loopctl inbox retry {item.id}  |  loopctl inbox dismiss {item.id}",
        }
        lines += ["", "Act: " + acts.get(item.kind, f"loopctl inbox dismiss {item.id}")]
    return "\n".join(lines)


@inbox_app.command("approve")
@boundary
def approve(
    item_id: ItemId,
    note: Annotated[str | None, typer.Option("--note", help="Why, for the record.")] = None,
    json_out: JsonFlag = False,
) -> None:
    """Approve an item: the actions it shows run now (or in the loop's running tick)."""
    from loopctl.commands.inbox import approve as approve_item

    _human_only("approve")
    _finish_signalled(approve_item(load_here(strict=False), item_id, note), json_out)


def _finish_signalled(result: Any, json_out: bool) -> None:
    """`_finish`, then, after a signal (a loop on Temporal), leave without interpreter
    teardown (commands.worker.exit_now says why).

    Only when this very command signalled: the SDK merely imported (a process that runs
    commands in-process, as the test suite does) must not end the whole process."""
    if not getattr(result, "signalled", False):
        _finish(result, json_out)
        return
    from loopctl.commands.worker import exit_now

    try:
        _finish(result, json_out)
    except typer.Exit as exc:
        exit_now(exc.exit_code)
    exit_now(0)


@inbox_app.command("reject")
@boundary
def reject(
    item_id: ItemId,
    reason: Annotated[str | None, typer.Option("--reason", help="Why, for the record.")] = None,
    changes: Annotated[
        str | None,
        typer.Option(
            "--changes",
            metavar="NOTE",
            help="Request changes: the task runs again with NOTE in its next attempt's prompt.",
        ),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Reject an approval: nothing is delivered and the task ends rejected (or, with
    --changes, runs again with your note)."""
    from loopctl.commands.inbox import reject as reject_item
    from loopctl.commands.inbox import request_changes
    from loopctl.errors import UsageError

    _human_only("reject")
    if changes is not None:
        if reason is not None:
            raise UsageError("give --reason or --changes, not both (the note is the reason)")
        _finish_signalled(request_changes(load_here(strict=False), item_id, changes), json_out)
        return
    _finish_signalled(reject_item(load_here(strict=False), item_id, reason), json_out)


@inbox_app.command("retry")
@boundary
def retry(item_id: ItemId, json_out: JsonFlag = False) -> None:
    """Run a failed task again now, with a fresh attempt budget."""
    from loopctl.commands.inbox import retry as retry_item

    _human_only("retry")
    _finish(retry_item(load_here(strict=False), item_id), json_out)


@inbox_app.command("dismiss")
@boundary
def dismiss(item_id: ItemId, json_out: JsonFlag = False) -> None:
    """Close an item that needs nothing more."""
    from loopctl.commands.inbox import dismiss as dismiss_item

    _human_only("dismiss")
    _finish(dismiss_item(load_here(strict=False), item_id), json_out)


@inbox_app.command("reply")
@boundary
def reply(
    item_id: ItemId,
    answer: Annotated[str, typer.Argument(metavar="ANSWER", help="Your answer to the agent.")],
    json_out: JsonFlag = False,
) -> None:
    """Answer an agent's question: its task runs again with the answer in its prompt."""
    from loopctl.commands.inbox import reply as reply_item

    _human_only("reply")
    _finish(reply_item(load_here(strict=False), item_id, answer), json_out)


def register(app: typer.Typer) -> None:
    app.add_typer(inbox_app, name="inbox")

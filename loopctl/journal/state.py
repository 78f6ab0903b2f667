"""STATE.md: per loop, what was done, tried and is open — rendered from events.

A human's `## Notes` section is carried over verbatim every time the file is rewritten.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from loopctl.atomicfile import write_atomic
from loopctl.journal import outcomes
from loopctl.journal.claimed import ClaimedView, measured_line, said_line
from loopctl.journal.history import RunView, Spend, TaskView
from loopctl.journal.statuses import Outcome
from loopctl.paths import attempt_folder
from loopctl.text import code_span, escape_markdown, strip_controls

STATE_FORMAT = 1
NOTES_HEADING = "## Notes"
_DETAILED_ATTEMPTS = 5
_NOTES = re.compile(r"^## Notes[ \t]*$", re.M)
_DEFAULT_NOTES = (
    f"{NOTES_HEADING}\n\n"
    "<!-- Write here: loopctl keeps this section word for word when it rewrites the file. -->\n"
)


def existing_notes(path: Path) -> str:
    """The `## Notes` section of the current file, or a fresh empty one."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return _DEFAULT_NOTES
    match = _NOTES.search(text)
    return text[match.start() :] if match else _DEFAULT_NOTES


def _cell(text: str, limit: int = 80) -> str:
    """Agent or task text on one line, cut to `limit`, then escaped for Markdown (and tables)."""
    flat = " ".join(strip_controls(str(text)).split())
    return escape_markdown(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def _code(text: str, limit: int = 80) -> str:
    flat = " ".join(str(text).split())
    return code_span(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def describe_spend(by_backend: dict[str, Spend]) -> str:
    """One line per run or task: `claude 1200 tokens $0.0100; openai 300 tokens (cost unknown…)`."""
    parts = []
    for backend in sorted(by_backend):
        spend = by_backend[backend]
        text = f"{backend} {spend.tokens} tokens"
        if spend.usd:
            text += f" ${spend.usd:.4f}"
        if spend.unpriced:
            text += f" (cost unknown for {spend.unpriced} call{'s' if spend.unpriced > 1 else ''})"
        parts.append(text)
    return "; ".join(parts)


def _task_lines(task: TaskView, ended: Outcome | None = None) -> list[str]:
    outcome = f", outcome **{ended}**" if ended is not None else ""
    lines = [f"### {_code(task.task, 200)} — {task.status}{outcome}"]
    if task.title:
        # Quoted, so a hostile title ("## Notes") can never pose as a heading.
        lines.append(f"> {_cell(task.title, 200)}")
    facts = []
    if task.branch:
        facts.append(f"branch {_code(task.branch, 200)}")
    if task.commit:
        facts.append(f"commit {_code(task.commit[:12])}")
    if task.tokens:
        facts.append(f"{task.tokens} tokens")
    if task.cost_usd:
        facts.append(f"${task.cost_usd:.2f}")
    if facts:
        lines.append("- " + ", ".join(facts))
    if task.by_backend:
        lines.append("- spend by backend: " + describe_spend(task.by_backend))
    if task.reason:
        lines.append(f"- reason: {_cell(task.reason, 300)}")
    attempts = task.attempts
    older = attempts[:-_DETAILED_ATTEMPTS] if len(attempts) > _DETAILED_ATTEMPTS else []
    if older:
        verdicts = Counter(a.verdict or "interrupted" for a in older)
        prints = Counter(a.fingerprint for a in older if a.fingerprint)
        common = ", ".join(f"{_cell(fp, 40)}×{n}" for fp, n in prints.most_common(3))
        summary = ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
        lines.append(
            f"- attempts {older[0].number}–{older[-1].number} (compacted): {summary}"
            + (f"; fingerprints {common}" if common else "")
        )
    for attempt in attempts[-_DETAILED_ATTEMPTS:]:
        verdict = attempt.verdict or ("running" if task.status == "open" else "interrupted")
        fp = f" {_code(attempt.fingerprint)}" if attempt.fingerprint else ""
        reason = f": {_cell(attempt.reason, 160)}" if attempt.reason else ""
        drift = f" (drift {_cell(attempt.drift, 200)})" if attempt.drift else ""
        lines.append(f"- attempt {attempt.number}: {verdict}{fp}{reason}{drift}")
    said = next((a.claims for a in reversed(attempts) if a.claims), None)
    if said is not None:
        lines += claims_lines(said)
    last = attempts[-1] if attempts else None
    if last is not None and last.verdict != "passed" and last.agent_tail.strip():
        where = _code(attempt_folder(task.run, task.task, last.number), 300)
        lines.append(
            f"- the agent's last output ({last.agent_status or '?'}; all of it in {where}):"
        )
        lines += [f"  - {_cell(line, 200)}" for line in last.agent_tail.splitlines()[-8:]]
    return lines


def claims_lines(view: ClaimedView) -> list[str]:
    """Claimed beside measured, as list items; a disagreement in bold, never the agent's words
    unescaped."""
    lines = [
        f"- claimed by the agent: {_cell(said_line(view), 300)}",
        f"- measured by loopctl: {_cell(measured_line(view), 300)}",
    ]
    lines += [f"- **disagrees:** {_cell(problem, 200)}" for problem in view.disagree]
    return lines


def render_state(runs: Iterable[RunView], notes: str = _DEFAULT_NOTES) -> str:
    """The whole STATE.md text: the latest run of each loop, then the notes."""
    latest: dict[str, RunView] = {}
    previous_counts: Counter[str] = Counter()
    for run in runs:
        previous_counts[run.loop] += 1
        latest[run.loop] = run
    lines = [
        "# Loop state",
        "",
        f"<!-- loopctl state format {STATE_FORMAT}; generated from .loop/log/."
        " Only the Notes section below is yours: it is kept verbatim. -->",
        "",
    ]
    if not latest:
        lines += ["No loop has run yet.", ""]
    for loop_name in sorted(latest):
        run = latest[loop_name]
        counts = Counter(t.status for t in run.tasks.values())
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no tasks"
        lines += [
            f"## Loop `{loop_name}`",
            "",
            f"Last {run.kind}: run `{run.run}` started {run.started}"
            + (f", finished {run.finished}" if run.finished else "")
            + f" — **{run.status}** ({summary})."
            + (f" Outcome: **{ended}**." if (ended := outcomes.of_run(run)) else ""),
        ]
        if run.reason:
            lines.append(f"Reason: {_cell(run.reason, 300)}")
        spend = f"Spend: {run.tokens} tokens"
        if run.cost_usd:
            spend += f", ${run.cost_usd:.2f}"
        if run.by_backend:
            spend += f". By backend: {describe_spend(run.by_backend)}"
        lines.append(spend + f". Runs recorded: {previous_counts[loop_name]}.")
        lines.append("")
        if run.tasks:
            lines += [
                "| task | status | attempts | last verdict | commit | outcome |",
                "|---|---|---|---|---|---|",
            ]
            for task in run.tasks.values():
                last = task.attempts[-1] if task.attempts else None
                # The verdict is loopctl's word, the reason may be the agent's: only it is escaped.
                verdict = f"{last.verdict or '-'}: {_cell(last.reason, 45)}" if last else "-"
                commit = _code(task.commit[:12]) if task.commit else "-"
                lines.append(
                    f"| {_code(task.task, 40)} | {task.status} | {len(task.attempts)} |"
                    f" {verdict} | {commit} | {outcomes.of_task(run, task) or '-'} |"
                )
            lines.append("")
            for task in run.tasks.values():
                lines += [*_task_lines(task, outcomes.of_task(run, task)), ""]
    return "\n".join(lines).rstrip() + "\n\n" + notes.rstrip() + "\n"


def write_state(path: Path, runs: Iterable[RunView]) -> None:
    """Re-render STATE.md atomically, keeping the human's notes."""
    write_atomic(path, render_state(runs, existing_notes(path)))

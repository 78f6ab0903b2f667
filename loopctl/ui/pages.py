"""Server-rendered HTML of each page. Everything not written here is escaped.

Agent text (summaries, check output, prompts, patches, event details) goes through `esc`:
control sequences stripped (loopctl.text) and HTML-escaped, so nothing an agent wrote becomes
markup, a link or a script. The pages load only /static/ files of this server (the CSP says so).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import datetime
from urllib.parse import quote

from loopctl.journal.claimed import ClaimedView, measured_line, said_line
from loopctl.journal.drift import LoopDrift
from loopctl.journal.history import RunView
from loopctl.journal.inbox import InboxItem, ItemKind
from loopctl.journal.outcomes import of_run, of_task
from loopctl.journal.report import TITLES, Line, Report
from loopctl.journal.spending import SpendRow
from loopctl.journal.warmth import WARM_COUNTS
from loopctl.text import strip_controls
from loopctl.ui.jobs import JobState
from loopctl.ui.paused import paused_section
from loopctl.ui.views import (
    AttemptFolder,
    DeliverView,
    InboxView,
    ItemView,
    LoopsView,
    RunPage,
    RunsList,
    SkippedRuns,
    is_skipped,
)


def esc(value: object) -> str:
    """`value` as text safe inside HTML (and attribute values)."""
    return html.escape(strip_controls("" if value is None else str(value)), quote=True)


def url(*parts: str) -> str:
    return "/" + "/".join(quote(p, safe="") for p in parts)


def layout(title: str, body: str, *, active: str = "", project: str = "") -> str:
    nav = "".join(
        f'<a href="{href}"{" class=on" if name == active else ""}>{name.title()}</a>'
        for name, href in (
            ("loops", "/loops"),
            ("inbox", "/inbox"),
            ("runs", "/runs"),
            ("report", "/report"),
        )
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · loopctl</title>"
        '<link rel=stylesheet href="/static/app.css"><script defer src="/static/app.js"></script>'
        f"</head><body><header><b>loopctl</b> <span class=proj>{esc(project)}</span>"
        f"<nav>{nav}</nav></header><main>{body}</main></body></html>"
    )


def boxed_table(head: Sequence[str], rows: str, cls: str = "") -> str:
    """A table in a box of its own: on a narrow screen each row becomes a card (cells flow,
    a `wide` cell takes a line of its own), and what still does not fit scrolls inside the box,
    never the page."""
    heads = "".join(f"<th>{h}</th>" for h in head)
    klass = f" class='stack {cls}'" if cls else " class=stack"
    return (
        f"<div class=table-wrap><table{klass}><thead><tr>{heads}</tr></thead>"
        f"<tbody>{rows}</tbody></table></div>"
    )


def badge(state: str | None) -> str:
    state = state or "never run"
    tone = {
        "done": "ok",
        "passed": "ok",
        "approved": "ok",
        "running": "live",
        "open": "warn",
        "awaiting approval": "warn",
        "approval": "warn",
        "escalation": "warn",
    }.get(state, "bad" if state in ("failed", "interrupted", "stopped", "rejected") else "")
    return f'<span class="badge {tone}">{esc(state)}</span>'


_QUIET = ("needs-approval", "needs-reply", "waiting-for-review", "rate-limited", "interrupted")
OUTCOME_TONES = {
    "done": "ok",
    "nothing-to-do": "",
    "superseded": "",
    **dict.fromkeys(_QUIET, "warn"),
}


def outcome_badge(named: str | None) -> str:
    """How a run, task or item ended (journal.outcomes), as a badge; nothing while it runs."""
    if not named:
        return ""
    tone = OUTCOME_TONES.get(named, "bad")
    return f'<span class="badge outcome {tone}" data-outcome="{esc(named)}">{esc(named)}</span>'


def chart(days: Sequence[SpendRow], *, width: int = 280, height: int = 60) -> str:
    """Per-day spend as SVG bars (USD when any day has a price, else tokens)."""
    if not days:
        return '<span class="muted">no spend yet</span>'
    priced = any(d.usd for d in days)
    values = [d.usd if priced else float(d.tokens) for d in days]
    top = max(values) or 1.0
    step = width / len(days)
    bars = []
    for n, (day, value) in enumerate(zip(days, values, strict=True)):
        h = max(1.0, value / top * (height - 14)) if value else 1.0
        label = f"{day.key}: ${day.usd:.2f}, {day.tokens} tokens, {day.calls} calls"
        bars.append(
            f'<rect x="{n * step + 1:.1f}" y="{height - 12 - h:.1f}" width="{max(step - 2, 1):.1f}"'
            f' height="{h:.1f}" class="{"bar" if value else "bar zero"}"><title>{esc(label)}'
            "</title></rect>"
        )
    total = f"${sum(d.usd for d in days):.2f}" if priced else f"{sum(values):.0f} tokens"
    caption = f"{days[0].key[5:]} → {days[-1].key[5:]} · {total}"
    return (
        f'<svg class=chart viewBox="0 0 {width} {height}" width="{width}" height="{height}"'
        f' role=img aria-label="spend per day">{"".join(bars)}'
        f'<text x="0" y="{height - 1}">{esc(caption)}</text></svg>'
    )


def run_state(run: RunView) -> str:
    """A run's status, but "skipped" for a tick that found nothing to do (not a green done)."""
    return "skipped" if is_skipped(run) else run.status


def _when(ts: str | None) -> str:
    return esc((ts or "-")[:19].replace("T", " "))


# --- loops ----------------------------------------------------------------------------------


LOOP_COLUMNS = (
    "Loop",
    "Trigger",
    "State",
    "Next tick",
    "Last runs",
    "Spend per day",
    "Warm workspaces",
    "Inbox",
)


def loops_page(view: LoopsView, project: str) -> str:
    rows = []
    for card in view.loops:
        s = card.status
        state = f"running (pid {s.running_pid})" if s.running_pid else s.last_status
        if s.waiting_for_review is not None and not s.running_pid:
            state = s.waiting_for_review.describe()
        if s.paused and not s.running_pid:
            state = s.paused  # "rate-limited until 14:05 (claude)", as `status` says it
        runs = " ".join(
            f'<a href="{url("runs", r.run)}" title="{esc(r.run)}">{badge(run_state(r))}'
            f"<small>{_when(r.started)[5:16]}</small></a>"
            for r in card.recent
        )
        rows.append(
            f'<tr data-loop="{esc(s.loop)}"><td><b>{esc(s.loop)}</b></td>'
            f"<td>{esc(s.trigger)}</td><td>{badge(state)} {outcome_badge(s.last_outcome)}"
            f"{drift_note(s.drift)}</td>"
            f"<td>{_when(s.next_tick) if s.next_tick != 'on change' else 'on change'}</td>"
            f"<td class='runs wide'>{runs or '<span class=muted>none</span>'}</td>"
            f"<td class=wide>{chart(card.days, width=180, height=44)}</td>"
            f"{warm_cell(s.warm)}"
            f'<td data-label=inbox><a href="/inbox?loop={quote(s.loop)}">{s.open_items}</a></td>'
            "</tr>"
        )
    up = f"up: running ({esc(view.up)})" if view.up else "up: not running"
    table = (
        boxed_table(LOOP_COLUMNS, "".join(rows), "loops")
        if rows
        else "<p class=muted>no loops yet: <code>loopctl init</code>, or <code>loopctl goal"
        ' "tests green"</code></p>'
    )
    body = (
        f"<h1>Loops</h1><p class=muted>{up}</p>{paused_section(view.paused)}"
        f"<section class=total><h2>Spend per day, all loops</h2>{chart(view.days, width=560)}"
        f"</section>{table}"
    )
    return layout("Loops", body, active="loops", project=project)


def drift_note(drift: LoopDrift | None) -> str:
    """The latest attempt's drift under the state, as `status` says it (issue 31)."""
    if drift is None or not drift.scoped:
        return ""
    style = "bad" if drift.alarm else "muted"  # .drift.bad: red text, as a failed badge
    return f'<br><small class="drift {style}">drift {esc(drift.describe())}</small>'


def warm_cell(warm: Mapping[str, float | int]) -> str:
    """What warm workspaces saved a loop (`status`'s `warm_workspaces`), or a dash if nothing."""
    saved = float(warm.get("saved_s", 0.0))
    counts = [int(warm.get(key, 0)) for key in WARM_COUNTS]
    if not saved and not any(counts):
        return "<td class=warm><span class=muted>-</span></td>"
    hits, seeds, skipped, ran = counts
    return (
        f'<td class=warm data-saved-s="{esc(saved)}">saved {saved:.1f}s<small>'
        f"{hits} pool hits, {seeds} seed hits, {skipped} setups skipped, {ran} run</small></td>"
    )


# --- inbox ----------------------------------------------------------------------------------


def item_state(item: InboxItem) -> str:
    if not item.is_open:
        return str(item.resolution or "closed")
    if item.approved:
        return "approved"
    return "refused" if item.refused else "open"


def inbox_page(view: InboxView, project: str, now: datetime) -> str:
    rows = "".join(
        f'<tr data-item="{esc(i.id)}"><td><a href="{url("inbox", i.id)}"><code>{esc(i.id)}'
        f"</code></a></td><td>{badge(i.kind)} {outcome_badge(i.outcome)}</td>"
        f"<td>{badge(item_state(i))}</td>"
        f"<td>{esc(i.loop or '-')}</td><td>{esc(i.task or '-')}</td>"
        f"<td>{_age(i.opened, now)}</td><td class=wide>{esc(i.summary[:140])}</td></tr>"
        for i in view.shown
    )
    what = "items" if view.closed else "open items"
    if view.loop is not None:
        what += f" of loop {esc(view.loop)}"
    where = f"&loop={quote(view.loop)}" if view.loop is not None else ""
    toggle = f'<a href="/inbox?all=1{where}">show closed</a>'
    if view.closed:
        toggle = f'<a href="/inbox?all=0{where}">open only</a>'
    pager = ""
    if view.pages > 1:
        extra = ("&all=1" if view.closed else "") + where
        links = []
        if view.page > 1:
            links.append(f'<a href="/inbox?page={view.page - 1}{extra}">← newer</a>')
        links.append(f"page {view.page} of {view.pages}")
        if view.page < view.pages:
            links.append(f'<a href="/inbox?page={view.page + 1}{extra}">older →</a>')
        pager = f"<p class=pager>{' · '.join(links)}</p>"
    table = (
        boxed_table(("ID", "Kind", "State", "Loop", "Task", "Age", "Summary"), rows, "inbox")
        if rows
        else "<p class=muted>nothing waits for you</p>"
    )
    body = f"<h1>Inbox</h1><p class=muted>{view.total} {what} · {toggle}</p>{table}{pager}"
    return layout("Inbox", body, active="inbox", project=project)


def _age(ts: str, now: datetime) -> str:
    try:
        seconds = int((now - datetime.fromisoformat(ts)).total_seconds())
    except ValueError:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def diff_html(patch: str) -> str:
    """A unified diff, each line classed for colour (added, removed, hunk, file header)."""
    out = []
    for line in strip_controls(patch).splitlines():
        if line.startswith(("+++", "---", "diff --git", "index ")):
            cls = "file"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        elif line.startswith("@@"):
            cls = "hunk"
        else:
            cls = ""
        out.append(f'<span class="{cls}">{html.escape(line)}</span>' if cls else html.escape(line))
    return '<pre class="diff">' + "\n".join(out) + "</pre>"


def _form(item: str, action: str, label: str, field: tuple[str, str] | None = None) -> str:
    extra = ""
    if field is not None:
        name, hint = field
        # What the agent reads next (an answer, the changes asked for) is a required text.
        needed = action in ("reply", "changes")
        tag = "textarea" if needed else "input"
        close = "</textarea>" if tag == "textarea" else ""
        required = " required" if needed else ""
        extra = f'<{tag} name="{name}" placeholder="{esc(hint)}"{required}>{close}'
    return (
        f'<form method=post action="{url("inbox", item, action)}" class="act {action}">'
        f'{extra}<button type=submit name=do value="{action}">{label}</button></form>'
    )


def item_actions(item: InboxItem) -> str:
    if not item.is_open:
        return "<section id=actions class=actions hidden></section>"
    if item.kind in (ItemKind.APPROVAL, ItemKind.PROPOSAL):
        forms = [
            _form(item.id, "approve", "Approve", ("note", "note (optional)")),
            _form(item.id, "reject", "Reject", ("reason", "reason (optional)")),
        ]
        if isinstance(item.evidence.get("step"), int) and item.task:
            # A delivery gate: reject it and run the task again with this as its guidance.
            forms.append(
                _form(
                    item.id,
                    "changes",
                    "Request changes",
                    ("note", "what to change: the agent's next attempt reads it"),
                )
            )
    elif item.kind == ItemKind.ESCALATION:
        forms = [
            _form(item.id, "reply", "Reply", ("answer", "your answer to the agent")),
            _form(item.id, "dismiss", "Dismiss"),
        ]
    elif item.kind in (ItemKind.FAILED, ItemKind.UNHANDLED):
        forms = [_form(item.id, "retry", "Retry"), _form(item.id, "dismiss", "Dismiss")]
    else:
        forms = [_form(item.id, "dismiss", "Dismiss")]
    return f"<section id=actions class=actions>{''.join(forms)}</section>"


def notice(job: JobState | None) -> str:
    """An action's progress and result, in place: the page's script follows a running job
    (`data-job`) and rewrites this; without a script, a reload shows where it is."""
    if job is None:
        return "<p id=notice class=notice hidden></p>"
    if not job.done:
        run = (
            f' · run <a href="{url("runs", job.run)}">{esc(job.run)}</a>: {esc(job.progress)}'
            if job.run
            else ""
        )
        return (
            f'<p id=notice class="notice live" data-state=running data-job="/jobs/{esc(job.job)}">'
            f"<span class=msg>{esc(job.action)} is running…</span>{run}</p>"
        )
    tone = "ok" if job.ok else "bad"
    run = f' · <a href="{url("runs", job.run)}">run {esc(job.run)}</a>' if job.run else ""
    return (
        f'<p id=notice class="notice {tone}" data-state=done>'
        f"<span class=msg>{esc(job.message)}</span>{run}</p>"
    )


def review_section(found: object, claims: ClaimedView | None) -> str:
    """The lines that look like tampering with the test run, and claimed beside measured with
    each disagreement marked; empty when there is neither."""
    parts = []
    if isinstance(found, list) and found:
        lis = "".join(
            f"<li><code>{esc(f.get('path'))}:{esc(f.get('line'))}</code>"
            f" <code>{esc(f.get('text'))}</code> — {esc(f.get('rule'))}:"
            f" {esc(f.get('reason'))}</li>"
            for f in found
            if isinstance(f, dict)
        )
        parts.append(
            "<p class=bad>The change looks like it tampers with the test run:</p>"
            f"<ul class=plain>{lis}</ul>"
        )
    if claims is not None:
        rows = (
            f"<tr><th>Claimed by the agent</th><td>{esc(said_line(claims))}</td></tr>"
            f"<tr><th>Measured by loopctl</th><td>{esc(measured_line(claims))}</td></tr>"
        )
        parts.append(f"<table class=facts>{rows}</table>")
        parts += [f"<p class=bad>Disagrees: {esc(p)}</p>" for p in claims.disagree]
    if not parts:
        return ""
    return "<section><h2>Claimed vs measured</h2>" + "".join(parts) + "</section>"


def item_page(view: ItemView, project: str, job: JobState | None) -> str:
    d = view.detail
    item = d.item
    where = "/".join(p for p in (item.loop, item.task) if p) or "-"
    parts = [
        f"<h1 id=item-head><code>{esc(item.id)}</code> {badge(item.kind)}"
        f" {outcome_badge(item.outcome)}"
        f" {badge(item_state(item))}</h1>",
        f"<p class=summary>{esc(item.summary)}</p>",
        notice(job),
        item_actions(item),
    ]
    if d.action:
        then = "".join(f"<li>then: {esc(t)}</li>" for t in d.then)
        heading = "Awaiting approval" if item.is_open and not item.approved else "The action"
        parts.append(
            f"<section><h2>{heading}</h2><p><b>{esc(d.action)}</b></p><ul>{then}</ul>"
            + (f"<p class=bad>Refused: {esc(item.refused)}</p>" if item.refused else "")
            + "</section>"
        )
    if d.question:
        parts.append(
            f"<section><h2>The agent asks</h2><pre class=output>{esc(d.question)}</pre></section>"
        )
    parts.append(review_section(item.evidence.get("sabotage"), d.claims))
    facts = [
        ("Loop / task", where),
        ("Run", item.run),
        ("Task status", d.task_status),
        ("Branch", d.branch),
        ("Commit", d.commit),
        ("Base", d.base_sha),
        ("Fingerprint", d.fingerprint),
        ("Reason", item.evidence.get("reason")),
        ("Worktree", item.evidence.get("worktree")),
        ("Spend", f"{d.tokens} tokens" + (f", ${d.cost_usd:.2f}" if d.cost_usd else "")),
        ("Network refused", ", ".join(d.network_refused)),
        ("Opened", item.opened[:19]),
    ]
    rows = "".join(
        f"<tr><th>{label}</th><td>"
        + (
            f'<a href="{url("runs", str(value))}">{esc(value)}</a>'
            if label == "Run"
            else esc(value)
        )
        + "</td></tr>"
        for label, value in facts
        if value
    )
    parts.append(
        f"<section id=evidence><h2>Evidence</h2><table class=facts>{rows}</table></section>"
    )
    if d.attempts:
        lis = "".join(
            f"<li>{esc(a['number'])}: {badge(str(a['verdict']))} {esc(a.get('reason') or '')}"
            + (f" <code>{esc(a['fingerprint'])}</code>" if a.get("fingerprint") else "")
            + "</li>"
            for a in d.attempts
        )
        parts.append(f"<section><h2>Attempts</h2><ol class=plain>{lis}</ol></section>")
    if view.patch is not None:
        parts.append(
            f"<section><h2>Diff</h2><pre class=stat>{esc(d.diff_stat)}</pre>"
            f"{diff_html(view.patch) if view.patch else '<p class=muted>(empty)</p>'}</section>"
        )
    elif d.diff_stat:
        parts.append(f"<section><h2>Diff</h2><pre class=stat>{esc(d.diff_stat)}</pre></section>")
    if d.check_output.strip():
        parts.append(
            f"<section><h2>Check output</h2><pre class=output>{esc(d.check_output)}</pre></section>"
        )
    if d.history:
        lis = "".join(f"<li>{esc(h)}</li>" for h in d.history)
        parts.append(f"<section id=history><h2>History</h2><ul class=plain>{lis}</ul></section>")
    return layout(f"inbox {item.id}", "".join(parts), active="inbox", project=project)


# --- runs -----------------------------------------------------------------------------------


RUN_COLUMNS = ("Run", "Why", "Loop", "Status", "Started", "Tasks", "Tokens")


def runs_page(listing: RunsList, project: str) -> str:
    rows = []
    for entry in listing.rows:
        if isinstance(entry, SkippedRuns):
            first, last = entry.runs[-1], entry.runs[0]
            span = _when(first.started)
            if len(entry.runs) > 1:
                span += f" → {_when(last.started)}"
            rows.append(
                f'<tr class=skipped data-skipped="{len(entry.runs)}"><td colspan=2 class=wide>'
                f'<a href="/runs?skipped=1">{len(entry.runs)} skipped</a>'
                f" <span class=muted>({esc(entry.reason)})</span></td>"
                f"<td>{esc(entry.loop)}</td><td>{badge('skipped')}</td><td>{span}</td>"
                "<td class=nil>-</td><td class=nil>-</td></tr>"
            )
            continue
        r = entry
        rows.append(
            f'<tr data-run="{esc(r.run)}"><td><a href="{url("runs", r.run)}"><code>{esc(r.run)}'
            f"</code></a></td><td class=wide>{esc(_reason(r))}</td>"
            f"<td>{esc(r.loop)}</td><td>{badge(run_state(r))} {outcome_badge(of_run(r))}</td>"
            f"<td>{_when(r.started)}</td><td data-label=tasks>{len(r.tasks)}</td>"
            f"<td data-label=tokens>{r.tokens}</td></tr>"
        )
    shown = (
        '<a href="/runs">fold skipped ticks</a>'
        if listing.skipped_shown
        else f'<a href="/runs?skipped=1">show skipped ticks ({listing.skipped})</a>'
    )
    body = (
        f"<h1>Runs</h1><p class=muted>ticks that found nothing to do are"
        f" {'shown' if listing.skipped_shown else 'folded'} · {shown}</p>"
        + (boxed_table(RUN_COLUMNS, "".join(rows)) if rows else "<p class=muted>no runs yet</p>")
    )
    return layout("Runs", body, active="runs", project=project)


def _reason(run: RunView) -> str:
    """A short why: the run's reason, or its one task's."""
    if run.reason:
        return run.reason[:120]
    reasons = {t.reason for t in run.tasks.values() if t.reason}
    return next(iter(reasons))[:120] if len(reasons) == 1 else ""


def deliver_section(found: DeliverView | None) -> str:
    """A finished goal's diff and its merge / push / pull request buttons, each bound to the
    commit shown (and a push to the remote URL shown); one that ran says what it did."""
    if found is None:
        return ""
    offer = found.offer
    moved = offer.head != offer.commit
    forms = []
    for action, label in (
        ("merge", f"Merge into {offer.base_branch or '(no base branch)'}"),
        ("push", f"Push to origin {offer.branch}"),
        ("pr", "Open a pull request"),
    ):
        if action in offer.done:
            forms.append(f'<p class="done {action}">{esc(offer.done[action])}</p>')
            continue
        why = offer.unavailable.get(action)
        if why is None and moved:
            why = f"{offer.branch} moved since this commit"
        if action == "merge" and offer.base_branch is None:
            why = "no base branch (HEAD was detached)"
        hidden = f'<input type=hidden name=sha value="{esc(offer.commit)}">'
        if offer.remote_url is not None and action != "merge":
            hidden += f'<input type=hidden name=remote_url value="{esc(offer.remote_url)}">'
        disabled = f' disabled title="{esc(why)}"' if why else ""
        reason = f"<span class=muted>{esc(why)}</span>" if why else ""
        forms.append(
            f'<form method=post action="{url("runs", offer.run, "deliver", action)}"'
            f' class="act {action}">{hidden}<button type=submit name=do value="{action}"'
            f"{disabled}>{esc(label)}</button>{reason}</form>"
        )
    where = f" · origin: <code>{esc(offer.remote_url)}</code>" if offer.remote_url else ""
    patch = diff_html(found.patch) if found.patch else "<p class=muted>(empty)</p>"
    return (
        f"<section id=actions><h2>Deliver</h2><p>commit <code"
        f" id=deliver-sha>{esc(offer.commit[:12])}</code> on <code>{esc(offer.branch)}</code>"
        f"{where}</p><div class=deliver>{''.join(forms)}</div></section>"
        f"<section id=evidence><h2>Diff</h2>{patch}"
        "</section>"
    )


def run_page(
    view: RunPage, project: str, deliver: DeliverView | None = None, job: JobState | None = None
) -> str:
    run = view.run
    live = run.status == "running"
    stream = (
        f' data-stream="{url("runs", run.run, "stream")}?after={view.last_seq}"' if live else ""
    )
    lines = "".join(
        f'<li data-seq="{t.seq}"><span class=off>+{t.offset_s:.1f}s</span> {esc(t.text)}</li>'
        for t in view.timeline
    )
    tasks = "".join(
        f"<li><b>{esc(name)}</b>: {badge(t.status)} {outcome_badge(of_task(run, t))}"
        f" after {len(t.attempts)} attempt(s)"
        + (f" · commit <code>{esc(t.commit[:12])}</code>" if t.commit else "")
        + (f" · {esc(t.reason)}" if t.reason else "")
        + (
            f" · <span class=bad>network refused: {esc(', '.join(t.refused))}</span>"
            if t.refused
            else ""
        )
        + "</li>"
        for name, t in run.tasks.items()
    )
    body = (
        f"<h1>Run <code>{esc(run.run)}</code></h1>"
        f'<p>loop <b>{esc(run.loop)}</b> · <span id=run-status data-status="{esc(run.status)}">'
        f"{badge(run.status)}</span> {outcome_badge(of_run(run))} · started {_when(run.started)}"
        + (" <span class=live-dot>updating live</span>" if live else "")
        + f"</p><section id=tasks><h2>Tasks</h2><ul class=plain>{tasks or '<li>none yet</li>'}"
        f"</ul></section><section><h2>Timeline</h2><ol id=timeline class=timeline{stream}>"
        f"{lines}</ol></section>"
        + (
            # What the running agents print, as `-v` shows it (filled by the page's script).
            "<section id=agent-live><h2>Agent output, live</h2><ol id=agent-output"
            " class=timeline><li class=muted>waiting for an agent to print…</li></ol></section>"
            if live
            else ""
        )
        + (notice(job) + deliver_section(deliver) if deliver is not None or job else "")
        + f"<div id=attempts>{_attempts(view.folders)}</div>"
    )
    return layout(f"run {run.run}", body, active="runs", project=project)


def _attempts(folders: Sequence[AttemptFolder]) -> str:
    if not folders:
        return ""
    parts = ["<section><h2>Attempts</h2>"]
    for folder in folders:
        files = "".join(
            f"<details><summary>{esc(f.name)} <small>({f.size} bytes"
            + (", last 256 KiB shown" if f.truncated else "")
            + f")</small></summary><pre class=output>{esc(f.text)}</pre></details>"
            for f in folder.files
        )
        parts.append(
            f"<div class=attempt><h3>{esc(folder.task)} · {esc(folder.name)}</h3>"
            f"<p class=muted><code>{esc(folder.path)}</code></p>"
            f"{files or '<p class=muted>no files</p>'}</div>"
        )
    parts.append("</section>")
    return "".join(parts)


# --- report -------------------------------------------------------------------------------


REPORT_WINDOWS = (("last", "since my last report"), ("24h", "24 hours"), ("7d", "7 days"))


def _report_link(line: Line) -> str:
    """The page that acts on a line: its inbox item, its run, or its pull request."""
    link = line.link or ""
    if line.item and link == f"/inbox/{line.item}":
        return f'<a href="{url("inbox", line.item)}">open item {esc(line.item)}</a>'
    if line.run and link == f"/runs/{line.run}":
        return f'<a href="{url("runs", line.run)}">open run</a>'
    if link.startswith(("https://", "http://")):
        return f'<a href="{esc(link)}" rel="noreferrer noopener">{esc(link)}</a>'
    return ""


def report_page(report: Report, project: str, since: str) -> str:
    """`loopctl report` in the browser: the same sections and commands, with links that act.
    Reading it never moves "since my last report" (only the CLI's report does)."""
    windows = " · ".join(
        f"<b>{esc(label)}</b>"
        if value == since
        else f'<a href="/report?since={quote(value, safe="")}">{esc(label)}</a>'
        for value, label in REPORT_WINDOWS
    )
    parts = [f"<h1>Report</h1><p class=muted>{esc(report.window)} · {windows}</p>"]
    if report.empty:
        parts.append("<p data-empty>Nothing happened, and nothing waits for you.</p>")
    if report.quiet:
        parts.append(f"<p class=muted>{report.quiet} tick(s) found nothing to do.</p>")
    if report.held:
        parts.append(f"<p>{report.held} tick(s) waited for review ([review] max_open).</p>")
    for name, lines in report.sections:
        rows = "".join(
            f'<li data-outcome="{esc(line.outcome or "")}">{esc(line.text)} {_report_link(line)}'
            f"<br><code>{esc(line.commands[0])}</code></li>"
            for line in lines
        )
        parts.append(
            f'<section data-section="{esc(name.value)}"><h2>{esc(TITLES[name])}'
            f" ({len(lines)})</h2><ul class=plain>{rows}</ul></section>"
        )
    if not report.empty:
        parts.append(
            f"<section data-section=spent><h2>Spent</h2><p>{esc(report.spent.line())}</p>"
            "<code>loopctl spend --by loop</code></section>"
        )
    return layout("Report", "".join(parts), active="report", project=project)


def refused_page(reason: str) -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>refused · loopctl</title>"
        f"</head><body><h1>Refused</h1><p>{esc(reason)}</p></body></html>"
    )

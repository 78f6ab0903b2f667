"""The triage inbox: items opened and closed by events, and the INBOX.md projection."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from loopctl.journal.claimed import ClaimedView, measured_line, said_line
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.outcomes import item_outcome
from loopctl.journal.schema import ApprovalRefused, Approved, inbox_closed, inbox_opened, read
from loopctl.journal.statuses import ItemState, Outcome
from loopctl.text import code_block, code_span, escape_markdown, strip_controls

INBOX_FORMAT = 1


class ItemKind(StrEnum):
    APPROVAL = "approval"
    FAILED = "failed"
    ESCALATION = "escalation"
    UNHANDLED = "unhandled"
    PROPOSAL = "proposal"  # a change to the loop's own definitions an agent proposed


@dataclass(frozen=True, slots=True)
class InboxItem:
    id: str
    kind: str
    loop: str | None
    task: str | None
    run: str | None
    opened: str
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    closed: str | None = None
    resolution: str | None = None
    approved: str | None = None  # when a human approved it (delivery may still be running)
    refused: str | None = None  # why the last approval did not apply (the work changed)

    @property
    def is_open(self) -> bool:
        return self.closed is None

    @property
    def outcome(self) -> Outcome | None:
        """The outcome this item stands for (journal.outcomes.item_outcome)."""
        return item_outcome(self.kind, self.evidence)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "loop": self.loop,
            "task": self.task,
            "run": self.run,
            "opened": self.opened,
            "summary": self.summary,
            "evidence": self.evidence,
            "status": ItemState.OPEN if self.is_open else ItemState.CLOSED,
            "closed": self.closed,
            "resolution": self.resolution,
            "approved": self.approved,
            "refused": self.refused,
            "outcome": self.outcome,
        }


def new_item_id(*parts: str) -> str:
    """A short id, stable for the same inputs; lowercase base32 reads well and types fast."""
    return _digest(parts)[:6]


def unique_item_id(
    events: Iterable[Event], run: str, loop: str, task: str, kind: str, summary: str
) -> str:
    """`new_item_id` of these parts, lengthened past any id a different item already holds."""
    identity = (run, loop, task, kind, summary)
    digest = _digest(identity)
    taken: dict[str, tuple[str, ...]] = {}
    for event in events:
        if event.type == EventType.INBOX_OPENED:
            opened = inbox_opened(event)
            taken[opened.id] = (
                event.run or "",
                event.loop or "",
                event.task or "",
                opened.kind or "",
                opened.summary,
            )
    for length in range(6, len(digest) + 1):
        candidate = digest[:length]
        # The same item opened again (a resumed run) keeps its id; another item never shares it.
        if taken.get(candidate, identity) == identity:
            return candidate
    return digest


def _digest(parts: Iterable[str]) -> str:
    raw = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).digest()
    return base64.b32encode(raw).decode().lower().rstrip("=")


def items(events: Iterable[Event]) -> list[InboxItem]:
    """Every inbox item, oldest first, with its open/closed status."""
    return list(fold_items({}, events).values())


def current_items(log: EventLog) -> list[InboxItem]:
    """`items` of the whole log, folding only what was appended since the last call
    (`EventLog.folding`): what a long-running `up` asks before every tick."""
    with log.folding("inbox.items", fold_items, dict) as found:
        return list(found.values())


def fold_items(found: dict[str, InboxItem], events: Iterable[Event]) -> dict[str, InboxItem]:
    """`found` (items by id, oldest first) with what `events` open, close, approve or refuse."""
    for event in events:
        if event.type == EventType.INBOX_OPENED:
            opened = inbox_opened(event)
            found[opened.id] = InboxItem(
                id=opened.id,
                kind=opened.kind or ItemKind.FAILED,
                loop=event.loop,
                task=event.task,
                run=event.run,
                opened=event.ts,
                # A log older than the cleaning at the source may hold escape sequences.
                summary=strip_controls(opened.summary),
                evidence=opened.evidence,
            )
        elif event.type == EventType.INBOX_CLOSED:
            closed = inbox_closed(event)
            item = found.get(closed.id)
            if item is not None and item.is_open:
                found[closed.id] = replace(item, closed=event.ts, resolution=closed.resolution)
        elif event.type == EventType.APPROVED:
            item = found.get(read(Approved, event).id)
            if item is not None and item.is_open:
                found[item.id] = replace(item, approved=event.ts, refused=None)
        elif event.type == EventType.APPROVAL_REFUSED:
            refusal = read(ApprovalRefused, event)
            item = found.get(refusal.id)
            if item is not None and item.is_open:
                found[item.id] = replace(
                    item, approved=None, refused=strip_controls(refusal.reason)
                )
    return found


def open_items(events: Iterable[Event]) -> list[InboxItem]:
    return [item for item in items(events) if item.is_open]


def render_inbox_md(
    open_now: list[InboxItem],
    claims: Mapping[tuple[str, str], ClaimedView] | None = None,
) -> str:
    """INBOX.md: what needs a human, newest last, with the evidence to act on; `claims`: each
    task's claimed vs measured, by (run, task)."""
    lines = [
        "# Inbox",
        "",
        f"<!-- loopctl inbox format {INBOX_FORMAT}; generated from .loop/log/, do not edit."
        " Act with `loopctl inbox`. -->",
        "",
    ]
    if not open_now:
        lines.append("Nothing needs you.")
        return "\n".join(lines) + "\n"
    lines.append(f"{len(open_now)} open item(s).")
    # Summaries, questions and check output are agent text: escaped, so none of it can pose as
    # loopctl's own words (a heading, a link, an "approved" line) or drive a terminal.
    for item in open_now:
        where = escape_markdown("/".join(p for p in (item.loop, item.task) if p))
        head = f"## {escape_markdown(item.id)} · {escape_markdown(item.kind)} · {where}"
        lines += ["", head, "", escape_markdown(_one_line(item.summary)), ""]
        if item.outcome is not None:
            lines.append(f"- outcome: {item.outcome}")
        if item.approved:
            lines.append(f"- approved {item.approved[:19]}; delivery not finished yet")
        if item.refused:
            lines.append(f"- approval refused: {escape_markdown(_one_line(item.refused))}")
        keys = ("question", "action", "reason", "branch", "commit", "worktree", "fingerprint")
        for key in (*keys, "attempts"):
            value = item.evidence.get(key)
            if value not in (None, ""):
                lines.append(f"- {key}: {code_span(str(value))}")
        for found in item.evidence.get("sabotage") or ():
            if isinstance(found, dict):
                where = f"{found.get('path')}:{found.get('line')}"
                quoted = code_span(_one_line(str(found.get("text", ""))))
                rule = escape_markdown(str(found.get("rule")))
                lines.append(f"- tampering? {escape_markdown(where)}: {quoted} ({rule})")
        view = (claims or {}).get((item.run or "", item.task or ""))
        if view is not None:
            lines.append(f"- claimed by the agent: {escape_markdown(_one_line(said_line(view)))}")
            lines.append(f"- measured by loopctl: {escape_markdown(measured_line(view))}")
            lines += [f"- **disagrees:** {escape_markdown(_one_line(p))}" for p in view.disagree]
        tail = item.evidence.get("check_tail")
        if tail:
            lines += ["", *code_block(str(tail).rstrip()[-1500:])]
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())

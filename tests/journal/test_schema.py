"""The typed event payloads: each reader on a well-formed record, an empty one, wrong types and
unknown keys, never raising; and the journal's folds over a hostile log written to a real file."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from loopctl.journal import budgets, fuse, history, inbox, schema, spending, traces, warmth
from loopctl.journal.events import Event, EventLog
from loopctl.usage import MAX_TOKENS, MAX_USD

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def event(type_: str, data: Any) -> Event:
    return Event(1, NOW.isoformat(), type_, "r1", "ci", "fix", data)


# (reader, event type, a well-formed payload as loopctl writes it, what the reader returns)
WELL_FORMED: list[tuple[Callable[[Event], object], str, dict[str, Any], object]] = [
    (
        schema.agent_finished,
        "agent_finished",
        {
            "attempt": 2,
            "role": "maker",
            "agent": "implementer",
            "backend": "claude",
            "request_model": "sonnet",
            "output_tail": "done\n",
            "status": "ok",
            "exit_code": 0,
            "duration_s": 1.5,
            "input_tokens": 100,
            "output_tokens": 20,
            "cached_tokens": 5,
            "cost_usd": 0.25,
            "session_id": "s-1",
            "text": "all green",
            "model": "claude-sonnet",
            "turns": 3,
            "tool_calls": [{"name": "read", "duration_s": 0.1}],
        },
        schema.AgentFinished(
            attempt=2,
            role="maker",
            agent="implementer",
            backend="claude",
            status="ok",
            exit_code=0,
            duration_s=1.5,
            input_tokens=100,
            output_tokens=20,
            cached_tokens=5,
            cost_usd=0.25,
            model="claude-sonnet",
            request_model="sonnet",
            session_id="s-1",
            turns=3,
            output_tail="done\n",
            text="all green",
            tool_calls=({"name": "read", "duration_s": 0.1},),
        ),
    ),
    (
        schema.check_finished,
        "check_finished",
        {
            "attempt": 1,
            "passed": True,
            "reason": "tests pass",
            "fingerprint": "abc",
            "exit_code": 0,
            "source": "command",
            "failing_tests": ["t::a"],
            "output_tail": "ok",
            "commands": [{"argv": ["pytest"], "exit_code": 0}],
        },
        schema.CheckFinished(
            attempt=1,
            passed=True,
            reason="tests pass",
            fingerprint="abc",
            exit_code=0,
            source="command",
            failing_tests=("t::a",),
            output_tail="ok",
            commands=({"argv": ["pytest"], "exit_code": 0},),
        ),
    ),
    (
        schema.attempt_finished,
        "attempt_finished",
        {
            "attempt": 3,
            "verdict": "escalated",
            "reason": "the maker asks: which?",
            "fingerprint": None,
            "output_tail": "x",
            "fatal": True,
            "question": "which?",
            "tree": "t1",
        },
        schema.AttemptFinished(
            attempt=3,
            verdict="escalated",
            reason="the maker asks: which?",
            output_tail="x",
            fatal=True,
            question="which?",
            tree="t1",
        ),
    ),
    (
        schema.attempt_started,
        "attempt_started",
        {"attempt": 4},
        schema.AttemptStarted(attempt=4),
    ),
    (
        schema.task_found,
        "task_found",
        {
            "prompt": "fix it",
            "title": "Fix",
            "base_ref": "main",
            "raw_id": "42",
            "fields": {"label": "bug"},
        },
        schema.TaskFound(
            prompt="fix it", title="Fix", base_ref="main", raw_id="42", fields={"label": "bug"}
        ),
    ),
    (
        schema.task_finished,
        "task_finished",
        {"status": "failed", "reason": "3 attempts", "commit": None, "attempts": 3},
        schema.TaskFinished(status="failed", reason="3 attempts", attempts=3),
    ),
    (
        schema.tick_started,
        "tick_started",
        {
            "kind": "goal",
            "maker": "m",
            "judge": "j",
            "condition": "tests pass",
            "in_place": True,
            "check": ["pytest", "-q"],
            "trigger": {"fired": "cron", "due": "2026-12-01T12:00:00+00:00"},
        },
        schema.TickStarted(
            kind="goal",
            maker="m",
            judge="j",
            condition="tests pass",
            in_place=True,
            check=("pytest", "-q"),
            trigger={"fired": "cron", "due": "2026-12-01T12:00:00+00:00"},
        ),
    ),
    (
        schema.tick_finished,
        "tick_finished",
        {"status": "done", "reason": "", "tasks": {"done": 2, "failed": 1}},
        schema.TickFinished(status="done", tasks={"done": 2, "failed": 1}),
    ),
    (
        schema.inbox_opened,
        "inbox_opened",
        {"id": "ab12cd", "kind": "approval", "summary": "push?", "evidence": {"branch": "b"}},
        schema.InboxOpened(id="ab12cd", kind="approval", summary="push?", evidence={"branch": "b"}),
    ),
    (
        schema.inbox_closed,
        "inbox_closed",
        {"id": "ab12cd", "resolution": "approved"},
        schema.InboxClosed(id="ab12cd", resolution="approved"),
    ),
    (
        schema.note,
        "note",
        {"what": "usage_clamped", "attempt": 1, "role": "maker", "warning": "NaN"},
        schema.Note(what="usage_clamped", attempt=1, role="maker", warning="NaN"),
    ),
    (
        schema.workspace_ready,
        "note",
        {"what": "workspace_ready", "pool": "hit", "took_s": 0.5, "saved_s": 12, "reason": "r"},
        schema.WorkspaceReady(pool="hit", took_s=0.5, saved_s=12.0, reason="r"),
    ),
]

# What each reader gives for a record with no payload at all (an older or a foreign writer).
EMPTY: list[tuple[Callable[[Event], object], str, object]] = [
    (schema.agent_finished, "agent_finished", schema.AgentFinished()),
    (schema.check_finished, "check_finished", schema.CheckFinished()),
    (schema.attempt_finished, "attempt_finished", schema.AttemptFinished()),
    (schema.attempt_started, "attempt_started", schema.AttemptStarted()),
    (schema.task_found, "task_found", schema.TaskFound()),
    (schema.task_finished, "task_finished", schema.TaskFinished()),
    (schema.tick_started, "tick_started", schema.TickStarted()),
    (schema.tick_finished, "tick_finished", schema.TickFinished()),
    (schema.inbox_opened, "inbox_opened", schema.InboxOpened()),
    (schema.inbox_closed, "inbox_closed", schema.InboxClosed()),
    (schema.note, "note", schema.Note()),
]

# Every key a reader looks at, holding what a hostile or confused writer might put there.
WRONG: list[tuple[Callable[[Event], object], str, dict[str, Any], object]] = [
    (
        schema.agent_finished,
        "agent_finished",
        {
            "attempt": "2",
            "role": ["maker"],
            "agent": 7,
            "backend": {"x": 1},
            "status": None,
            "exit_code": True,
            "duration_s": math.nan,
            "input_tokens": "100",
            "output_tokens": math.inf,
            "cached_tokens": -5,
            "cost_usd": math.nan,
            "model": "",
            "request_model": 1.5,
            "session_id": [],
            "turns": "3",
            "output_tail": ["a"],
            "text": {"a": 1},
            "tool_calls": {"name": "read"},
        },
        schema.AgentFinished(output_tokens=MAX_TOKENS),
    ),
    (
        schema.check_finished,
        "check_finished",
        {
            "attempt": 1.0,
            "passed": "yes",
            "reason": 5,
            "fingerprint": [],
            "exit_code": "0",
            "source": 3,
            "failing_tests": "t::a",
            "output_tail": None,
            "commands": ["pytest", 3, {"argv": ["pytest"]}],
        },
        schema.CheckFinished(commands=({"argv": ["pytest"]},)),
    ),
    (
        schema.attempt_finished,
        "attempt_finished",
        {
            "attempt": "x",
            "verdict": 1,
            "reason": None,
            "fingerprint": 5,
            "output_tail": 3,
            "fatal": 1,
            "question": [],
            "tree": {},
        },
        schema.AttemptFinished(),
    ),
    (schema.attempt_started, "attempt_started", {"attempt": "x"}, schema.AttemptStarted()),
    (
        schema.task_found,
        "task_found",
        {"prompt": 1, "title": None, "base_ref": [], "raw_id": 42, "fields": ["a"]},
        schema.TaskFound(),
    ),
    (
        schema.task_finished,
        "task_finished",
        {"status": 1, "reason": [], "commit": 5, "attempts": "3"},
        schema.TaskFinished(),
    ),
    (
        schema.tick_started,
        "tick_started",
        {
            "kind": 3,
            "maker": [],
            "judge": None,
            "condition": {},
            "in_place": "true",
            "check": "pytest -q",
            "trigger": ["cron"],
        },
        schema.TickStarted(),
    ),
    (
        schema.tick_finished,
        "tick_finished",
        {"status": [], "reason": 3, "tasks": {"done": "2", "failed": 1, "x": math.nan}},
        schema.TickFinished(tasks={"failed": 1}),
    ),
    (
        schema.inbox_opened,
        "inbox_opened",
        {"id": None, "kind": 1, "summary": ["s"], "evidence": ["e"]},
        schema.InboxOpened(),
    ),
    (
        schema.inbox_closed,
        "inbox_closed",
        {"id": 12, "resolution": 3},
        schema.InboxClosed(id="12"),
    ),
    (
        schema.note,
        "note",
        {"what": 3, "attempt": "1", "role": {}, "reason": [], "warning": 1},
        schema.Note(),
    ),
    (
        schema.workspace_ready,
        "note",
        {"what": "workspace_ready", "pool": 1, "took_s": -1, "saved_s": math.inf, "decision": []},
        schema.WorkspaceReady(),
    ),
]


def _ids(rows: list[Any]) -> list[str]:
    return [f"{row[0].__name__}-{row[1]}" for row in rows]


@pytest.mark.parametrize(
    ("reader", "type_", "data", "expected"), WELL_FORMED, ids=_ids(WELL_FORMED)
)
def test_a_well_formed_payload_reads_as_written(
    reader: Callable[[Event], object], type_: str, data: dict[str, Any], expected: object
) -> None:
    assert reader(event(type_, data)) == expected


@pytest.mark.parametrize(
    ("reader", "type_", "data", "expected"), WELL_FORMED, ids=_ids(WELL_FORMED)
)
def test_unknown_extra_keys_are_ignored(
    reader: Callable[[Event], object], type_: str, data: dict[str, Any], expected: object
) -> None:
    newer = {**data, "added_in_v9": {"nested": [1, 2]}, "schema": 9, "": None}
    assert reader(event(type_, newer)) == expected


@pytest.mark.parametrize(("reader", "type_", "expected"), EMPTY, ids=_ids(EMPTY))
def test_an_empty_payload_gives_the_defaults(
    reader: Callable[[Event], object], type_: str, expected: object
) -> None:
    assert reader(event(type_, {})) == expected


@pytest.mark.parametrize(("reader", "type_", "data", "expected"), WRONG, ids=_ids(WRONG))
def test_wrong_types_read_as_unknown(
    reader: Callable[[Event], object], type_: str, data: dict[str, Any], expected: object
) -> None:
    assert reader(event(type_, data)) == expected


@pytest.mark.parametrize(("reader", "type_", "expected"), EMPTY, ids=_ids(EMPTY))
def test_a_payload_that_is_not_an_object_gives_the_defaults(
    reader: Callable[[Event], object], type_: str, expected: object
) -> None:
    for data in (None, [1, 2], "text", 3):
        assert reader(event(type_, data)) == expected


@pytest.mark.parametrize(
    ("tokens", "cost", "expected_tokens", "expected_cost"),
    [
        (10**400, 10**400, MAX_TOKENS, MAX_USD),  # a 400-digit integer neither crashes nor wins
        (1e999, 1e999, MAX_TOKENS, MAX_USD),
        (-1, -0.5, None, None),
        (True, False, None, None),
        (12.9, 3, 12, 3.0),
    ],
)
def test_usage_numbers_go_through_the_clamps(
    tokens: object, cost: object, expected_tokens: int | None, expected_cost: float | None
) -> None:
    turn = schema.agent_finished(
        event("agent_finished", {"input_tokens": tokens, "output_tokens": tokens, "cost_usd": cost})
    )
    assert (turn.input_tokens, turn.output_tokens, turn.cost_usd) == (
        expected_tokens,
        expected_tokens,
        expected_cost,
    )
    assert turn.tokens == 2 * (expected_tokens or 0)


def test_a_huge_duration_is_unknown_not_an_overflow() -> None:
    turn = schema.agent_finished(event("agent_finished", {"duration_s": 10**400}))
    assert turn.duration_s is None


def test_workspace_ready_reads_only_its_own_note() -> None:
    assert schema.workspace_ready(event("note", {"what": "setup", "saved_s": 5})) is None
    assert schema.workspace_ready(event("agent_finished", {"what": "workspace_ready"})) is None


def _hostile_log(path: Path) -> EventLog:
    """A run whose every payload field is of the wrong type, written by the real EventLog."""
    log = EventLog(path, clock=lambda: NOW)
    common = {"run": "r1", "loop": "ci"}
    log.append("tick_started", **common, data={"kind": ["tick"], "check": "pytest", "trigger": 1})
    log.append("task_found", **common, task="fix", data={"prompt": 1, "fields": [1]})
    log.append("attempt_started", **common, task="fix", data={"attempt": "one"})
    for tokens in ("100", 10**400, -3, [1], {"n": 1}):
        log.append(
            "agent_finished",
            **common,
            task="fix",
            data={
                "attempt": "one",
                "input_tokens": tokens,
                "output_tokens": 7,
                "cost_usd": tokens,
                "backend": ["claude"],
                "duration_s": "slow",
                "tool_calls": [{"start_s": 10**400, "duration_s": "x"}, "call"],
                "status": {"ok": True},
            },
        )
    log.append(
        "check_finished",
        **common,
        task="fix",
        data={"attempt": 1, "commands": [{"started": "yesterday", "argv": "pytest"}, 5]},
    )
    log.append("attempt_finished", **common, task="fix", data={"attempt": [], "fatal": "yes"})
    log.append("inbox_opened", **common, task="fix", data={"id": ["x"], "evidence": "e"})
    log.append("inbox_closed", **common, task="fix", data={"id": {"x": 1}, "resolution": 0})
    log.append("note", **common, data={"what": "workspace_ready", "saved_s": "lots"})
    log.append("task_finished", **common, task="fix", data={"status": 0, "commit": 1})
    log.append("tick_finished", **common, data={"status": None, "tasks": ["done"]})
    return log


def test_the_journal_reads_a_hostile_log_without_raising(tmp_path: Path) -> None:
    """Before the readers, `int("one")` in history.fold broke `loopctl status` for good."""
    events = _hostile_log(tmp_path / "events.jsonl").read()
    run = history.fold(events)["r1"]
    task = run.tasks["fix"]
    # 10**400 clamps to the ceiling; "100", -3, a list and an object count as nothing.
    assert task.tokens == MAX_TOKENS + 5 * 7
    assert task.cost_usd == MAX_USD
    assert task.by_backend["unknown"].calls == 5
    assert task.by_backend["unknown"].unpriced == 4
    assert (run.kind, run.status, task.status, task.commit) == ("tick", "done", "done", None)
    assert [a.number for a in task.attempts] == [1]

    used = budgets.spend(events, NOW)
    assert (used.tokens, used.usd, used.usd_unknown_calls) == (MAX_TOKENS + 35, MAX_USD, 4)
    assert fuse.day_spend(events, NOW, UTC).tokens == MAX_TOKENS + 35
    report = spending.spend_report(events, by=spending.GroupBy.BACKEND, since=None, now=NOW, tz=UTC)
    assert [(row.key, row.calls, row.unpriced) for row in report.rows] == [("unknown", 5, 4)]
    assert [item.id for item in inbox.items(events)] == [""]
    assert warmth.time_saved(events)["saved_s"] == 0.0
    batch = traces.build_trace(events, capture_content=True)
    # No attempt span: no attempt number is readable. The check's unreadable start is the event's.
    names = {span.name for span in batch.spans}
    assert names >= {"invoke_workflow ci", "task", "execute_tool check"}
    for span in batch.spans:
        assert span.end_ns >= span.start_ns

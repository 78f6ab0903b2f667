"""What the claude, codex and opencode backends read of a session loopctl may resume (issue 31,
item 4): its id in their output, its usage in their session files, and a session the CLI has not."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from support.backends import make_agent, make_request

from loopctl.backends import AgentResult, AgentStatus
from loopctl.backends.claude import ClaudeBackend
from loopctl.backends.codex import CodexBackend
from loopctl.backends.opencode import OpencodeBackend
from loopctl.backends.sessions import (
    SessionUsage,
    claude_usage,
    codex_usage,
    opencode_usage,
    resumable,
)
from loopctl.definitions.agents import Backend

SESSION = "1998b7c7-d9df-4394-bfc2-23fe0928f1ec"


def jsonl(path: Path, *records: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"torn": ')
    return path


def said(ident: str, input_tokens: int, output: int, model: str = "claude-opus-4-8") -> Any:
    usage = {"input_tokens": input_tokens, "output_tokens": output, "cache_read_input_tokens": 5}
    return {"type": "assistant", "message": {"id": ident, "model": model, "usage": usage}}


def test_a_claude_transcript_counts_each_response_once_and_no_synthetic_message(
    tmp_path: Path,
) -> None:
    path = jsonl(
        tmp_path / "t.jsonl",
        {"type": "user"},
        said("msg_1", 100, 20),
        said("msg_1", 100, 20),  # the same response's second content block
        {"type": "user"},
        said("msg_1", 100, 20),  # a later response (the fake server reuses ids)
        said("synthetic", 0, 0, model="<synthetic>"),
    )

    usage = claude_usage(path)

    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens) == (210, 40, 10)
    assert usage.model == "claude-opus-4-8"


def test_a_codex_rollout_gives_its_last_running_total(tmp_path: Path) -> None:
    def count(tokens: int) -> dict[str, Any]:
        total = {"input_tokens": tokens, "cached_input_tokens": 0, "output_tokens": tokens // 5}
        info = {"total_token_usage": total}
        return {"type": "event_msg", "payload": {"type": "token_count", "info": info}}

    path = jsonl(
        tmp_path / "rollout.jsonl",
        {"type": "turn_context", "payload": {"model": "gpt-5.5"}},
        count(100),
        count(200),
    )

    usage = codex_usage(path)

    assert (usage.input_tokens, usage.output_tokens, usage.model) == (200, 40, "gpt-5.5")


def test_session_files_are_found_under_the_cli_state_places(tmp_path: Path) -> None:
    claude, codex = tmp_path / ".claude", tmp_path / ".codex"
    jsonl(claude / "projects" / "-work-repo" / f"{SESSION}.jsonl", said("m", 7, 3))
    jsonl(codex / "sessions" / "2026" / f"rollout-2026-12-06-{SESSION}.jsonl")

    found = ClaudeBackend().session_usage(SESSION, [tmp_path / "none", claude])

    assert found is not None
    assert (found.input_tokens, found.output_tokens) == (12, 3)
    assert CodexBackend().session_usage(SESSION, [codex]) is not None
    assert ClaudeBackend().session_usage("../escape", [claude]) is None
    assert ClaudeBackend().session_usage(SESSION, [codex]) is None


def test_the_session_id_is_read_from_each_clis_output() -> None:
    claude = '{"type":"system","subtype":"init","session_id":"abc-1"}\n{"type":"assistant"}'
    codex = 'banner\n{"type":"thread.started","thread_id":"0199a213-81c0"}\n'

    assert ClaudeBackend().session_in_output(claude) == "abc-1"
    assert CodexBackend().session_in_output(codex) == "0199a213-81c0"
    assert ClaudeBackend().session_in_output('{"session_id": "--dangerous"}') is None
    assert CodexBackend().session_in_output("") is None


def test_a_session_the_cli_has_not_is_told_from_other_failures() -> None:
    def failed(**extra: Any) -> AgentResult:
        return AgentResult(AgentStatus.ERROR, 1, 0.1, extra=extra)

    gone = failed(error="Error: thread/resume failed: no rollout found for thread id X")
    assert ClaudeBackend().session_gone(failed(session_gone=True))
    assert not ClaudeBackend().session_gone(failed(error="API Error: 500"))
    assert CodexBackend().session_gone(gone)
    assert not CodexBackend().session_gone(failed(error="unexpected status 401"))


def test_claude_names_a_new_session_and_resumes_an_old_one(tmp_path: Path) -> None:
    backend = ClaudeBackend()
    agent = make_agent(Backend.CLAUDE, tmp_path)
    new = make_request(agent, tmp_path, new_session_id=SESSION)
    old = make_request(agent, tmp_path, session_id=SESSION, new_session_id="ignored-1")

    named = backend.invocation(new).argv
    resumed = backend.invocation(old).argv

    assert named[named.index("--session-id") + 1] == SESSION
    assert "--resume" not in named
    assert resumed[resumed.index("--resume") + 1] == SESSION
    assert "--session-id" not in resumed
    assert resumable(backend) is backend
    assert resumable(CodexBackend()) is not None


def opencode_db(
    folder: Path, *messages: tuple[str, dict[str, Any]]
) -> tuple[Path, sqlite3.Connection]:
    """A database with opencode 1.x's `message` table (the columns loopctl reads), in WAL mode
    as opencode keeps it, its newest rows still in the log."""
    folder.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(folder / "opencode.db", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA wal_autocheckpoint = 0")
    db.execute(
        "CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,"
        " time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL)"
    )
    for n, (session, data) in enumerate(messages):
        db.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
            (f"msg_{n}", session, n, n, json.dumps(data)),
        )
    # Left open, as a CLI killed with loopctl leaves it: the rows are only in opencode.db-wal.
    return folder, db


def answered(input_tokens: int, output: int, read: int = 0, write: int = 0) -> dict[str, Any]:
    tokens = {"input": input_tokens, "output": output, "cache": {"read": read, "write": write}}
    return {"role": "assistant", "modelID": "fake-model", "tokens": tokens}


def test_an_opencode_session_sums_its_answers_from_the_database_and_its_log(
    tmp_path: Path,
) -> None:
    folder, _open = opencode_db(
        tmp_path / "opencode",
        ("ses_a", {"role": "user"}),
        ("ses_a", answered(100, 20, read=30, write=5)),
        ("ses_other", answered(1000, 1000)),
        ("ses_a", answered(100, 20)),
        ("ses_a", {"role": "assistant", "tokens": "torn"}),
    )
    assert (folder / "opencode.db-wal").stat().st_size > 0

    usage = opencode_usage(folder, "ses_a")
    found = OpencodeBackend().session_usage("ses_a", [tmp_path / "x", folder])

    assert usage == SessionUsage(235, 40, 30, "fake-model")
    assert found == usage
    assert OpencodeBackend().session_usage("--ses_a", [folder]) is None
    assert opencode_usage(tmp_path / "none", "ses_a") is None


def test_an_opencode_database_the_agent_planted_is_not_trusted(tmp_path: Path) -> None:
    """A link to a database elsewhere is not followed; a `message` that is a view (whose
    author chose what it runs) is not queried; a file that is not a database is no session."""
    elsewhere, _open = opencode_db(tmp_path / "elsewhere", ("ses_a", answered(100, 20)))
    linked = tmp_path / "linked"
    linked.mkdir()
    for name in ("opencode.db", "opencode.db-wal"):
        (linked / name).symlink_to(elsewhere / name)
    viewed = tmp_path / "viewed"
    viewed.mkdir()
    db = sqlite3.connect(viewed / "opencode.db")
    db.execute("CREATE TABLE t (session_id, time_created, data)")
    db.execute("INSERT INTO t VALUES ('ses_a', 1, ?)", (json.dumps(answered(5, 5)),))
    db.execute("CREATE VIEW message AS SELECT * FROM t")
    db.commit()
    db.close()
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "opencode.db").write_bytes(b"not a database" * 100)

    assert opencode_usage(linked, "ses_a") is None
    assert opencode_usage(viewed, "ses_a") is None
    assert opencode_usage(garbage, "ses_a") is None


def test_opencode_names_its_session_in_its_events_and_says_when_it_has_it_not() -> None:
    events = '{"type":"step_start","sessionID":"ses_db3225d54ffe0aX5"}\n{"type":"text"}'
    gone = AgentResult(
        AgentStatus.ERROR, 1, 0.1, output_tail="\x1b[91m\x1b[1mError: \x1b[0mSession not found\n"
    )
    other = AgentResult(AgentStatus.ERROR, 1, 0.1, output_tail="Error: bad key (HTTP 401)")

    assert OpencodeBackend().session_in_output(events) == "ses_db3225d54ffe0aX5"
    assert OpencodeBackend().session_in_output('{"sessionID": "-s"}') is None
    assert OpencodeBackend().session_gone(gone)
    assert not OpencodeBackend().session_gone(other)
    assert resumable(OpencodeBackend()) is not None

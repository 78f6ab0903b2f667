"""Sessions a CLI can resume after loopctl itself died mid-turn (issue 31, item 4).

A `kill -9` of loopctl leaves no `agent_finished` for the turn it was running. The CLI's own
session, though, is on disk in its private state (`sandbox.cli_state`): Claude Code keeps the
conversation up to its last tool result, Codex its rollout, opencode its database. A backend
that implements `Resumable` lets the engine find that session (named before the turn ran, or
read from the turn's own output), count what the lost turn spent from the CLI's session files,
and tell a session the CLI no longer has from any other failure, so the next attempt continues
the conversation instead of starting it again.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from loopctl.backends.base import AgentResult, as_dict, int_or_none

# A session's files are read whole; a transcript larger than this is not one loopctl made.
MAX_SESSION_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SessionUsage:
    """What a session's files say its model calls used, in total, so far."""

    input_tokens: int = 0  # every input token, cached ones included (AgentResult's convention)
    output_tokens: int = 0
    cached_tokens: int = 0
    model: str | None = None  # the last model that answered


@runtime_checkable
class Resumable(Protocol):
    """A backend whose CLI sessions survive loopctl's death and can be continued."""

    # True when loopctl names a new session itself (Claude's `--session-id`): the id is then
    # journaled in `agent_started`, before the CLI prints anything.
    names_sessions: bool
    # True when a resumed turn reports the whole session's usage, earlier turns included
    # (Codex's `turn.completed` after `exec resume`), not only its own calls (Claude's result).
    reports_session_totals: bool

    def session_in_output(self, text: str) -> str | None:
        """The session id the CLI printed on stdout (`text`) before it was stopped."""

    def session_usage(self, session: str, places: Sequence[Path]) -> SessionUsage | None:
        """What the session's model calls used, read from its files under the CLI's state
        `places`; None when they cannot be found."""

    def session_gone(self, result: AgentResult) -> bool:
        """Whether the turn failed because the CLI no longer has the session it was asked to
        resume (expired, deleted, never written)."""


def resumable(backend: object) -> Resumable | None:
    return backend if isinstance(backend, Resumable) else None


def json_records(path: Path) -> Iterator[dict[str, Any]]:
    """Each JSON object line of a session file (torn or foreign lines skipped)."""
    try:
        if path.is_symlink() or path.stat().st_size > MAX_SESSION_BYTES:
            return
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def claude_usage(path: Path) -> SessionUsage:
    """The total usage of a Claude Code transcript (`projects/<cwd>/<session>.jsonl`).

    Claude writes one `assistant` line per content block of a response, each repeating the
    response's usage: consecutive lines of one message id are counted once. Its own synthetic
    messages (an interruption) used no model.
    """
    fresh = written = read = output = 0
    model: str | None = None
    previous: object = None
    for record in json_records(path):
        if record.get("type") != "assistant":
            previous = None
            continue
        message = as_dict(record.get("message"))
        ident = message.get("id")
        if message.get("model") == "<synthetic>" or (ident is not None and ident == previous):
            previous = ident
            continue
        previous = ident
        usage = as_dict(message.get("usage"))
        fresh += int_or_none(usage.get("input_tokens")) or 0
        written += int_or_none(usage.get("cache_creation_input_tokens")) or 0
        read += int_or_none(usage.get("cache_read_input_tokens")) or 0
        output += int_or_none(usage.get("output_tokens")) or 0
        if isinstance(message.get("model"), str):
            model = message["model"]
    return SessionUsage(fresh + written + read, output, read, model)


def codex_usage(path: Path) -> SessionUsage:
    """The total usage of a Codex rollout (`sessions/**/rollout-*-<thread>.jsonl`): its last
    `token_count` event's running total."""
    total: dict[str, Any] = {}
    model: str | None = None
    for record in json_records(path):
        payload = as_dict(record.get("payload"))
        if payload.get("type") == "token_count":
            found = as_dict(as_dict(payload.get("info")).get("total_token_usage"))
            total = found or total
        if record.get("type") == "turn_context" and isinstance(payload.get("model"), str):
            model = payload["model"]
    return SessionUsage(
        int_or_none(total.get("input_tokens")) or 0,
        int_or_none(total.get("output_tokens")) or 0,
        int_or_none(total.get("cached_input_tokens")) or 0,
        model,
    )


# opencode (1.x) keeps its sessions in one SQLite database, written with a write-ahead log.
OPENCODE_DB = "opencode.db"
_DB_FILES = (OPENCODE_DB, f"{OPENCODE_DB}-wal", f"{OPENCODE_DB}-shm")


def opencode_usage(folder: Path, session: str) -> SessionUsage | None:
    """The total usage of opencode session `session`, from `folder`'s opencode.db: each
    assistant message's tokens (its cache reads and writes counted as input, as the turn's
    stream is). The agent wrote that database: it is read from a private copy (no link
    followed, each file size-capped), its schema not trusted, queried read-only."""
    if not (folder / OPENCODE_DB).is_file():
        return None
    with tempfile.TemporaryDirectory(prefix="loopctl-opencode-") as private:
        for name in _DB_FILES:
            source = folder / name
            if source.is_symlink():
                return None
            try:
                if source.stat().st_size > MAX_SESSION_BYTES:
                    return None
                shutil.copyfile(source, Path(private) / name, follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError:
                return None
        return _opencode_rows(Path(private) / OPENCODE_DB, session)


def _opencode_rows(db: Path, session: str) -> SessionUsage | None:
    tokens = {"input": 0, "cached": 0, "output": 0}
    model: str | None = None
    try:
        with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as connection:
            connection.execute("PRAGMA trusted_schema = OFF")
            kind = connection.execute(
                "SELECT type FROM sqlite_master WHERE name = 'message'"
            ).fetchone()
            if kind != ("table",):  # a view could run what its author chose
                return None
            connection.execute("PRAGMA query_only = ON")
            rows = connection.execute(
                "SELECT data FROM message WHERE session_id = ? ORDER BY time_created", (session,)
            ).fetchall()
    except sqlite3.Error:
        return None
    for (data,) in rows:
        try:
            message = json.loads(data) if isinstance(data, str) else None
        except ValueError:
            continue
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        used = as_dict(message.get("tokens"))
        cache = as_dict(used.get("cache"))
        read = int_or_none(cache.get("read")) or 0
        tokens["input"] += (int_or_none(used.get("input")) or 0) + read
        tokens["input"] += int_or_none(cache.get("write")) or 0
        tokens["cached"] += read
        tokens["output"] += int_or_none(used.get("output")) or 0
        if isinstance(message.get("modelID"), str):
            model = message["modelID"]
    return SessionUsage(tokens["input"], tokens["output"], tokens["cached"], model)

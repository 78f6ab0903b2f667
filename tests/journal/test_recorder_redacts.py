"""What the recorder writes carries no withheld secret, whatever field holds it (issue 27).

Redaction of agent and check output happens where the output is captured; a new event field
with raw text (a task title, a reason, a URL) goes straight to `Recorder.emit`. Kills the
mutant that drops the redaction in `emit`: the raw log file is read, not the parsed events.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from support.repos import write_config

from loopctl.definitions import load_project
from loopctl.journal.recorder import Recorder

SECRET = "sk-live-0f9e8d7c6b5a4f3e2d1c"


def test_a_secret_in_any_field_of_an_emitted_event_never_reaches_the_log(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)  # withheld from agents, so never logged
    write_config(repo, "version = 1\n")
    recorder = Recorder(load_project(repo))

    event = recorder.emit(
        "note",
        run="run-1",
        loop="ship",
        task="t1",
        what="delivery",
        detail=f"pushed to https://x:{SECRET}@example.invalid/repo.git",
        steps=[{"argv": ["deploy", f"--token={SECRET}"]}],
    )

    raw = recorder.paths.events_file.read_bytes()
    assert b'"what": "delivery"' in raw or b'"what":"delivery"' in raw  # the event is there
    assert SECRET.encode() not in raw
    assert base64.b64encode(SECRET.encode()) not in raw
    assert SECRET not in repr(event.data)
    assert "[REDACTED]" in str(event.data["detail"])

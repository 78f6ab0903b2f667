"""A run's model traffic is recorded as cassettes beside its attempt files (issue 31, item 5).

A real run: the scripted model server on 127.0.0.1, a fake maker that asks it over plain HTTP
through loopctl's real egress proxy, in the real sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import invoke
from support.journal import events
from support.model_server import Request, ScriptedModelServer, Turn
from support.repos import make_project

from loopctl.egress_cassette import read_cassette

FIXED = "def add(a, b):\n    return a + b\n"
KEY = "sk-replay-secret-0123456789"


def fix(request: Request, server: ScriptedModelServer) -> Turn:
    return Turn(text=FIXED)


def asking_project(repo: Path, url: str, extra: str = "") -> None:
    port = url.rsplit(":", 1)[1]
    make_project(
        repo,
        "asks_model.py",
        url,
        agent_extra=f'\n[sandbox]\nhosts = ["127.0.0.1:{port}"]\n' + extra,
    )


def cassette_lines(repo: Path) -> list[dict[str, Any]]:
    (path,) = (repo / ".loop" / "runs").glob("*/*/attempt-1/maker.cassette.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_through_the_proxy_leaves_a_redacted_cassette(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedModelServer(fix) as model:
        asking_project(repo, model.url)
        monkeypatch.setenv("REPLAY_TEST_TOKEN", KEY)
        result = invoke(monkeypatch, repo, "goal", "tests green", "--max-iterations", "1")
        asked = model.posts()
    assert result.exit_code == 0, result.output
    assert len(asked) == 1
    header, exchange = cassette_lines(repo)
    assert header["cassette"] == 1
    assert header["role"] == "maker"
    assert (exchange["method"], exchange["path"]) == ("POST", "/v1/messages")
    assert json.loads(exchange["body"]["text"])["messages"][0]["content"].startswith("")
    assert "200" in exchange["response_head"]["text"].split("\r\n")[0]
    assert FIXED.strip() in exchange["response_body"]["text"] or "return a + b" in json.dumps(
        exchange
    )
    # The key header is never written.
    names = {name.lower() for name, _ in exchange["headers"]}
    assert "x-api-key" not in names
    assert "content-type" in names
    (path,) = (repo / ".loop" / "runs").glob("*/*/attempt-1/maker.cassette.jsonl")
    assert read_cassette(path, within=repo).refusal() is None
    assert events(repo, "commit_created")

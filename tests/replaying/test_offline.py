"""`loopctl replay RUN --offline` (issue 31, item 5), fast: no real CLI.

A real run is recorded first: the scripted model server on 127.0.0.1, a command maker that asks
it over plain HTTP through loopctl's real egress proxy in the real sandbox. The server is then
stopped and the run replayed against its cassettes: same STATE.md, every request matched; one
byte changed in the loop's prompt names the first divergent request.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import events
from support.model_server import Call, Request, ScriptedModelServer, Turn
from support.repos import commit_all, git, make_project, write_loop

from loopctl.egress_cassette import CassetteWriter, read_cassette
from loopctl.replaying.offline import replay_offline, replayable_runs
from loopctl.secrets import Redactor

FIXED = "def add(a, b):\n    return a + b\n"
PROMPT = "Fix add() in calc.py so that the tests pass."
LOOP = f'prompt = "{PROMPT}"\ngoal = "tests green"\n\n[budget]\nmax_iterations = 2\n'


def fix(request: Request, server: ScriptedModelServer) -> Turn:
    return Turn(text=FIXED)


def recorded_run(
    repo: Path, monkeypatch: pytest.MonkeyPatch, script: str = "asks_model.py", exit_code: int = 0
) -> str:
    """One tick of the loop `fix`, its model on 127.0.0.1 (stopped when this returns)."""
    with ScriptedModelServer(fix) as model:
        port = model.url.rsplit(":", 1)[1]
        make_project(
            repo, script, model.url, agent_extra=f'\n[sandbox]\nhosts = ["127.0.0.1:{port}"]\n'
        )
        write_loop(repo, "fix", LOOP)
        commit_all(repo, "the loop fix")
        result = invoke(monkeypatch, repo, "run", "fix", "--once")
        assert result.exit_code == exit_code, result.output
        assert model.posts()
    (started,) = events(repo, "tick_started")
    assert started.run
    return started.run


def test_an_unchanged_run_replays_offline_with_the_same_state(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = recorded_run(repo, monkeypatch)
    log_before = (repo / ".loop" / "log" / "events.jsonl").read_bytes()
    state_before = (repo / ".loop" / "STATE.md").read_text()
    branches = git(repo, "for-each-ref", "--format=%(refname)")

    found = replay_offline(repo, run)

    assert found.diverged is None, found.diverged
    assert found.state_identical, (found.recorded_state, found.replayed_state)
    assert found.recorded_outcomes == found.replayed_outcomes == {"main": "done"}
    assert found.replay_run
    assert found.replay_run != run
    # The real log, STATE.md and refs are as they were: the replay ran in its own scratch.
    assert (repo / ".loop" / "log" / "events.jsonl").read_bytes() == log_before
    assert (repo / ".loop" / "STATE.md").read_text() == state_before
    assert git(repo, "for-each-ref", "--format=%(refname)") == branches
    assert replayable_runs(repo, "fix") == [run]
    assert not list((Path(os.environ["LOOPCTL_HOME"]) / "replays").iterdir())

    # The command line: exit 0, and --json says the same.
    shown = invoke(monkeypatch, repo, "replay", run[:10], "--offline", "--json")
    assert shown.exit_code == 0, shown.output
    payload = json.loads(shown.stdout)["replay"]
    assert (payload["identical"], payload["diverged"]) == (True, None)


def test_one_changed_prompt_byte_names_the_first_divergent_request(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = recorded_run(repo, monkeypatch)
    loop_file = repo / ".loop" / "loops" / "fix.toml"
    loop_file.write_text(LOOP.replace("calc.py so", "calc.py sO"))

    shown = invoke(monkeypatch, repo, "replay", run, "--offline")

    assert shown.exit_code == 1, shown.output
    assert "diverged offline at main/attempt-1/maker, request 0" in shown.stdout, shown.output
    assert 'recorded "' in shown.stdout
    assert "calc.py so" in shown.stdout
    assert "calc.py sO" in shown.stdout
    # Not strict: the recorded answers keep coming, and the task's replayed outcome is known.
    found = replay_offline(repo, run, strict=False)
    assert found.diverged is not None
    assert found.diverged.index == 0
    assert found.replayed_outcomes == {"main": "done"}
    # A proposal's definitions, given as a folder laid out as .loop/, are read instead.
    loop_file.write_text(LOOP)
    proposal = repo.parent / "proposal"
    (proposal / "loops").mkdir(parents=True)
    (proposal / "loops" / "fix.toml").write_text(LOOP.replace("Fix", "Mend"))
    (proposal / "config.toml").write_text((repo / ".loop" / "config.toml").read_text())
    assert replay_offline(repo, run, definitions=proposal).diverged is not None
    assert replay_offline(repo, run).diverged is None


def test_a_capped_or_linked_cassette_is_refused_clearly(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run = recorded_run(repo, monkeypatch)
    (cassette,) = (repo / ".loop" / "runs" / run).glob("*/attempt-1/maker.cassette.jsonl")
    recorded = cassette.read_bytes()

    cassette.write_bytes(recorded + json.dumps({"capped": 64}).encode() + b"\n")
    shown = invoke(monkeypatch, repo, "replay", run, "--offline")
    assert shown.exit_code == 2, shown.output
    assert "is capped at" in shown.output
    assert "cannot be replayed" in shown.output
    assert replayable_runs(repo, "fix") == []

    # A link where the cassette was: never followed, whatever it points at.
    forged = tmp_path / "forged.jsonl"
    forged.write_bytes(recorded)
    cassette.unlink()
    cassette.symlink_to(forged)
    shown = invoke(monkeypatch, repo, "replay", run, "--offline")
    assert shown.exit_code == 2, shown.output
    assert "cannot read the cassette" in shown.output


def test_a_cassette_the_agent_plants_in_its_worktree_is_not_read(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The maker writes a forged cassette (and a link) where the attempt's would be, inside
    its worktree: loopctl records and replays from the checkout's .loop/runs only (and what
    it wrote under .loop/ is taken out of its attempt before the check, invariant 10: a
    proposal, refused, for none of it is a definition file)."""
    run = recorded_run(repo, monkeypatch, script="asks_model_and_plants.py")
    cassettes = sorted((repo / ".loop" / "runs" / run).glob("*/attempt-*/*.cassette.jsonl"))
    assert [c.parent.name + "/" + c.name for c in cassettes] == ["attempt-1/maker.cassette.jsonl"]
    (made,) = events(repo, "proposal_made")
    assert "not a definition file" in str(made.data["refused"])
    # Each line is loopctl's own: a header, then exchanges (a forged line would be a header).
    for cassette in cassettes:
        lines = [json.loads(line) for line in cassette.read_text().splitlines()]
        assert [("forged" in line, "cassette" in line) for line in lines] == [
            (False, True),
            *[(False, False)] * (len(lines) - 1),
        ]
    assert not (repo / ".loop" / "runs" / "forged-run").exists()
    found = replay_offline(repo, run)
    assert found.diverged is None, found.diverged
    assert found.state_identical
    assert found.recorded_outcomes == found.replayed_outcomes


def test_a_cassette_stops_at_its_cap_and_says_so(tmp_path: Path) -> None:
    from loopctl.egress_cassette import Exchange

    path = tmp_path / "maker.cassette.jsonl"
    writer = CassetteWriter(path, within=tmp_path, redactor=Redactor(["sekrit"]), meta={}, cap=600)
    big = Exchange(
        "h:1", "POST", "/v1", (("x-api-key", "sekrit"),), b"sekrit " * 10, b"HTTP/1.1 200 OK", b"{}"
    )
    writer.exchange(big)
    writer.exchange(big)
    writer.exchange(big)
    text = path.read_text()
    assert "sekrit" not in text
    read = read_cassette(path, within=tmp_path)
    assert read.capped
    assert len(read.exchanges) < 3
    assert "capped at 600 bytes" in (read.refusal() or "")


def test_a_run_of_loopctls_own_agent_is_recorded_and_replays_offline(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The anthropic backend calls its model from loopctl's own process, not through the
    proxy: its calls are recorded all the same, and replayed from 127.0.0.1."""
    calls = 0

    def write_fix(request: Request, server: ScriptedModelServer) -> Turn:
        nonlocal calls
        calls += 1
        if calls == 1:
            return Turn(calls=[Call("write_file", {"path": "calc.py", "content": FIXED})])
        return Turn(text="fixed add()")

    with ScriptedModelServer(write_fix) as model:
        make_project(repo)
        (repo / "agents" / "maker.toml").write_text(
            'backend = "anthropic"\nmodel = "claude-test"\n'
            f'base_url = "{model.url}"\napi_key_env = "REPLAY_API_KEY"\n'
        )
        write_loop(repo, "fix", LOOP)
        commit_all(repo, "loopctl's own agent as maker")
        monkeypatch.setenv("REPLAY_API_KEY", "sk-replay-own-agent-0123456789")
        result = invoke(monkeypatch, repo, "run", "fix", "--once")
        assert result.exit_code == 0, result.output
        asked = len(model.posts())
    (started,) = events(repo, "tick_started")
    run = started.run or ""
    (cassette,) = (repo / ".loop" / "runs" / run).glob("main/attempt-1/maker.cassette.jsonl")
    text = cassette.read_text()
    assert len(text.splitlines()) == 1 + asked == 3
    assert "sk-replay-own-agent" not in text

    found = replay_offline(repo, run)

    assert found.diverged is None, found.diverged
    assert found.state_identical
    assert found.replayed_outcomes == {"main": "done"}

"""A maker turn lost with loopctl (`kill -9`) resumes its CLI session (issue 31, item 4).

The maker is the fake Claude Code of tests/fake_clis, a real process that keeps its transcript
where Claude does (in the sandbox's private copy of ~/.claude): its first turn reads calc.py and
then hangs until loopctl is killed; the rerun must `--resume` that session, count what the lost
turn spent, and commit once. A CLI that no longer has the session starts the attempt cold.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from support.backends import fake_calls, fake_home, install_fake_clis, set_scenario
from support.cli import assert_clean_exit, run_loopctl, spawn_loopctl
from support.journal import events
from support.processes import wait_for
from support.repos import CALC, GOAL_BRANCH, commit_all, git, make_project

from loopctl.engine.sessions import RESUME_PROMPT, SESSION_GONE, SESSION_RESUMED

MAKER = 'description = "claude"\nbackend = "claude"\ntimeout = "120s"\n'
# The fake records its calls in ~/.fake-cli: granted, so the sandbox stays on.
GRANT = '\n[sandbox]\nwrite = ["~/.fake-cli"]\n'


def claude_project(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    make_project(repo)
    (repo / "agents" / "maker.toml").write_text(MAKER + GRANT)
    commit_all(repo, "claude as the maker")


def kill_loopctl_mid_turn(repo: Path, signum: int = signal.SIGKILL) -> str:
    """`loopctl goal` until the maker's first tool call is done, then `signum`; its session."""
    proc = spawn_loopctl(repo, "goal", "tests green")
    try:
        waiting = fake_home() / "claude.waiting"
        session = wait_for(lambda: waiting.exists() and waiting.read_text(), "the maker's turn")
    finally:
        os.kill(proc.pid, signum)
        proc.communicate()
    if signum != signal.SIGKILL:
        assert proc.returncode == 130
    return session


def maker_turns(repo: Path) -> list[dict[str, object]]:
    return [dict(e.data) for e in events(repo, "agent_finished") if e.data["role"] == "maker"]


def test_a_turn_lost_with_loopctl_resumes_its_session_and_keeps_its_spend(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude_project(repo, tmp_path, monkeypatch)
    set_scenario("claude", mode="lost_turn")

    session = kill_loopctl_mid_turn(repo)
    (started,) = events(repo, "agent_started")
    assert started.data["session_id"] == session  # journaled before the CLI said anything

    done = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(done, 0)
    first, second = fake_calls("claude")
    assert first["argv"][first["argv"].index("--session-id") + 1] == session
    argv = second["argv"]
    assert argv[argv.index("--resume") + 1] == session
    assert argv[argv.index("-p") + 1].startswith(RESUME_PROMPT)
    assert "# Rules (loopctl-rules v" in argv[argv.index("-p") + 1]  # every prompt carries them
    # The resumed CLI had the conversation: the tool result of the turn loopctl lost.
    history = (fake_home() / "claude.resumed.jsonl").read_text()
    assert json.dumps(CALC)[1:-1] in history
    assert git(repo, "rev-list", "--count", f"main..{GOAL_BRANCH}").strip() == "1"
    assert "return a + b" in git(repo, "show", f"{GOAL_BRANCH}:calc.py")
    lost, resumed = maker_turns(repo)
    assert (lost["status"], lost["session_id"], lost["attempt"]) == ("interrupted", session, 1)
    assert lost["lost_with_loopctl"] is True
    assert (resumed["status"], resumed["session_id"], resumed["attempt"]) == ("ok", session, 1)
    # Two model calls of 100 in and 20 out, one per turn: spend continued, not reset.
    assert [(t["input_tokens"], t["output_tokens"]) for t in (lost, resumed)] == [(100, 20)] * 2
    notes = [e.data for e in events(repo, "note") if e.data.get("what") == SESSION_RESUMED]
    assert [n["session_id"] for n in notes] == [session]


def test_a_session_the_cli_no_longer_has_starts_the_attempt_cold_with_a_note(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude_project(repo, tmp_path, monkeypatch)
    set_scenario("claude", mode="lost_turn", forget=True)
    session = kill_loopctl_mid_turn(repo)

    done = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(done, 0)
    _, resumed, cold = fake_calls("claude")
    assert resumed["argv"][resumed["argv"].index("--resume") + 1] == session
    assert "--resume" not in cold["argv"]
    fresh = cold["argv"][cold["argv"].index("--session-id") + 1]
    assert fresh != session
    assert not cold["argv"][cold["argv"].index("-p") + 1].startswith(RESUME_PROMPT)  # the task
    (gone,) = [e.data for e in events(repo, "note") if e.data.get("what") == SESSION_GONE]
    assert gone["session_id"] == session
    assert git(repo, "rev-list", "--count", f"main..{GOAL_BRANCH}").strip() == "1"
    statuses = [t["status"] for t in maker_turns(repo)]
    assert statuses == ["interrupted", "error", "ok"]


def test_a_turn_stopped_with_sigterm_resumes_its_session_and_keeps_its_spend(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    claude_project(repo, tmp_path, monkeypatch)
    set_scenario("claude", mode="lost_turn")
    session = kill_loopctl_mid_turn(repo, signal.SIGTERM)

    done = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(done, 0)
    _, second = fake_calls("claude")
    assert second["argv"][second["argv"].index("--resume") + 1] == session
    assert git(repo, "rev-list", "--count", f"main..{GOAL_BRANCH}").strip() == "1"
    turns = maker_turns(repo)
    assert [(t["status"], t["input_tokens"], t["output_tokens"]) for t in turns] == [
        ("interrupted", 100, 20),
        ("ok", 100, 20),
    ]
    assert {t["session_id"] for t in turns} == {session}


def test_a_fresh_run_after_the_kill_starts_its_maker_cold(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--fresh` closes the dead run and starts another: its attempt 1 is not the lost turn's,
    so the old session is not resumed into the new run (its task starts from its prompt)."""
    claude_project(repo, tmp_path, monkeypatch)
    set_scenario("claude", mode="lost_turn")
    session = kill_loopctl_mid_turn(repo)

    done = run_loopctl(repo, "goal", "tests green", "--fresh")

    assert_clean_exit(done, 0)
    _first, second = fake_calls("claude")
    assert "--resume" not in second["argv"]
    assert second["argv"][second["argv"].index("--session-id") + 1] != session
    assert [e for e in events(repo, "note") if e.data.get("what") == SESSION_RESUMED] == []
    assert git(repo, "rev-list", "--count", f"main..{GOAL_BRANCH}").strip() == "1"


def test_a_lost_turn_of_a_resumed_session_counts_only_its_own_calls(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempt 1 is a whole turn (one call, recorded); attempt 2 resumes that session and is
    lost with loopctl after one more call. The session's transcript holds both calls: the lost
    turn is closed with the one the log does not count yet, so spend is each call once."""
    install_fake_clis(tmp_path / "bin", monkeypatch)
    make_project(repo)
    (repo / "agents" / "maker.toml").write_text(MAKER + "resume = true\n" + GRANT)
    commit_all(repo, "claude as the maker, resuming")
    set_scenario("claude", mode="lost_turn", first_done=True)

    session = kill_loopctl_mid_turn(repo)
    done = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(done, 0)
    first, lost, resumed = maker_turns(repo)
    assert {first["session_id"], lost["session_id"], resumed["session_id"]} == {session}
    assert (first["attempt"], lost["attempt"], lost["status"]) == (1, 2, "interrupted")
    assert (first["input_tokens"], first["output_tokens"]) == (100, 20)
    assert (lost["input_tokens"], lost["output_tokens"]) == (100, 20)  # not 200/40
    assert (resumed["input_tokens"], resumed["output_tokens"]) == (100, 20)
    assert git(repo, "rev-list", "--count", f"main..{GOAL_BRANCH}").strip() == "1"
